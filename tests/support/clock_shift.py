"""Run the tests with the wall clock days ahead, so that a test depending on the day it runs fails today.

``SPARK_STATE_OBSERVER_TEST_CLOCK_SHIFT_DAYS=60 python -m pytest ...`` moves ``time.time``, ``datetime.now``
and the like (time-machine, which patches them in C: references taken before, such as a default
``clock=time.time``, move too) that many days ahead in every test process: this one, each xdist worker
(each imports this plugin through tests/conftest.py), and the Python processes the tests start, which
import ``clock_shift_boot/sitecustomize.py`` (its folder is put first on ``PYTHONPATH`` here). The clock
keeps ticking; the monotonic clocks, sleeps, condition waits and timeouts are untouched (libfaketime is no
good here: it breaks those and librdkafka's timers). Servers that are not Python (Prometheus, PostgreSQL,
the JVM) keep the real clock.

``.ci/run`` runs the fast suite once this way: a test that passes only near the day its fixtures were
recorded (a time bomb) fails there, not weeks later in everyone's run.
"""

from __future__ import annotations

import os
from typing import Any

ENV = "SPARK_STATE_OBSERVER_TEST_CLOCK_SHIFT_DAYS"
BOOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clock_shift_boot")


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
    """Move this process's wall clock ``shift_days()`` ahead, and that of the Python processes it starts;
    returns the traveller to stop, or None when none was started here."""
    days = shift_days()
    if not days:
        return None
    import time

    import time_machine

    traveller = None
    if not time_machine.escape_hatch.is_travelling():  # an xdist worker is moved already, by the sitecustomize below
        traveller = time_machine.travel(time.time() + days * 86400.0, tick=True)
        traveller.start()
        time.time()  # time-machine's clock ticks from its first reading: this one, so the shift stays exact
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if BOOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([BOOT, *filter(None, paths)])
    return traveller


_traveller = start()  # on import, before the test modules are: their import-time reads of the clock move too


def pytest_report_header() -> str | None:
    return f"wall clock moved {shift_days():g} days ahead ({ENV})" if shift_days() else None


def pytest_unconfigure() -> None:
    global _traveller
    if _traveller is not None:
        _traveller.stop()
        _traveller = None
