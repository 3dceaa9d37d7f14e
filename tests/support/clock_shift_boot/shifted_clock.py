"""Move this process's wall clock ``SPARK_STATE_OBSERVER_TEST_CLOCK_SHIFT_DAYS`` days ahead (time-machine), the
one piece both the tests' plugin (``tests/support/clock_shift.py``) and the ``sitecustomize`` beside this file
(for the Python processes the tests start) run.

gRPC is kept on the real clock: its Python layer turns ``time.time()`` into absolute deadlines for its C core,
which reads the real clock, so a server's start (``poll(deadline=time.time())``) would wait the 60 days and a
call's timeout would never come. Its modules get a ``time`` whose ``time``/``time_ns`` are the real ones as they
are imported (nothing of gRPC is imported here). That is a harness matter: outside the tests, Python and C read
one clock.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import time
import types
from typing import Any

ENV = "SPARK_STATE_OBSERVER_TEST_CLOCK_SHIFT_DAYS"
# the gRPC modules that read ``time.time()`` for deadlines (grpcio 1.6x-1.8x)
GRPC_MODULES = frozenset(
    {
        "grpc._cython.cygrpc",
        "grpc._channel",
        "grpc._server",
        "grpc._common",
        "grpc._utilities",
        "grpc.aio._utils",
        "grpc.beta.utilities",
    }
)


def shift_days() -> float:
    """The days the clock is moved ahead (0: not moved). A value that is not a number stops the run: a CI
    run believing it tested a moved clock must not pass on the real one."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return 0.0
    try:
        return float(text)
    except ValueError:
        raise SystemExit(f"{ENV}={text!r}: expected a number of days") from None


def start() -> Any:
    """Move the wall clock ``shift_days()`` ahead in this process; the traveller, or None when no shift is
    asked or the clock is moved already (an xdist worker: the ``sitecustomize`` moved it at start-up)."""
    days = shift_days()
    if not days:
        return None
    import time_machine

    if time_machine.escape_hatch.is_travelling():
        return None
    real = types.ModuleType("time", "the time module with the real wall clock (gRPC's)")
    real.__dict__.update(vars(time))
    real.time, real.time_ns = time_machine.escape_hatch.time.time, time_machine.escape_hatch.time.time_ns
    sys.meta_path.insert(0, _RealTimeFor(GRPC_MODULES, real))
    for name in GRPC_MODULES & set(sys.modules):  # imported before this ran
        _give_real_time(sys.modules[name], real)
    traveller = time_machine.travel(time.time() + days * 86400.0, tick=True)
    traveller.start()
    time.time()  # time-machine's clock ticks from its first reading: this one, so the shift stays exact
    return traveller


def _give_real_time(module: types.ModuleType, real: types.ModuleType) -> None:
    if getattr(module, "time", None) is time:
        module.time = real  # type: ignore[attr-defined]


class _RealTimeFor(importlib.abc.MetaPathFinder):
    """Gives the named modules the real ``time`` right after they are executed."""

    def __init__(self, names: frozenset[str], real: types.ModuleType) -> None:
        self.names, self.real = names, real

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, self.real)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, real: types.ModuleType) -> None:
        self.inner, self.real = inner, real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.inner.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: types.ModuleType) -> None:
        self.inner.exec_module(module)
        _give_real_time(module, self.real)
