"""Run the tests with the wall clock days ahead, so that a test depending on the day it runs fails today.

``SPARK_STATE_OBSERVER_TEST_CLOCK_SHIFT_DAYS=60 python -m pytest ...`` moves ``time.time``, ``datetime.now``
and the like (time-machine, which patches them in C: references taken before, such as a default
``clock=time.time``, move too) that many days ahead in every test process: this one, each xdist worker
(each imports this plugin through tests/conftest.py), and the Python processes the tests start, which
import ``clock_shift_boot/sitecustomize.py`` (its folder is put first on ``PYTHONPATH`` here). The clock
keeps ticking; the monotonic clocks, sleeps, condition waits and timeouts are untouched (libfaketime is no
good here: it breaks those and librdkafka's timers). What is not Python keeps the real clock: Prometheus,
PostgreSQL, the JVM, and gRPC's C core (so gRPC's Python layer is kept on the real clock too:
``clock_shift_boot/shifted_clock.py``).

``.ci/run`` runs the fast suite once this way: a test that passes only near the day its fixtures were
recorded (a time bomb) fails there, not weeks later in everyone's run.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

BOOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clock_shift_boot")


def _shifted_clock() -> Any:
    """``clock_shift_boot/shifted_clock.py``, as the ``sitecustomize`` there imports it (an xdist worker has it already)."""
    module = sys.modules.get("shifted_clock")
    if module is None:
        spec = importlib.util.spec_from_file_location("shifted_clock", os.path.join(BOOT, "shifted_clock.py"))
        assert spec is not None and spec.loader is not None
        module = sys.modules["shifted_clock"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


shifted_clock = _shifted_clock()
if shifted_clock.shift_days():
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if BOOT not in paths:  # the Python processes the tests start move their clock too
        os.environ["PYTHONPATH"] = os.pathsep.join([BOOT, *filter(None, paths)])
# on import, before the test modules are: their import-time reads of the clock move too
_traveller = shifted_clock.start()


def pytest_report_header() -> str | None:
    days = shifted_clock.shift_days()
    return f"wall clock moved {days:g} days ahead ({shifted_clock.ENV})" if days else None


def pytest_unconfigure() -> None:
    global _traveller
    if _traveller is not None:
        _traveller.stop()
        _traveller = None
