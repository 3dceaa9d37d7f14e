"""The clock shift of the tests (``tests/support/clock_shift.py``) in the Python processes they start.

The plugin puts this folder first on ``PYTHONPATH`` when ``SPARK_STATE_OBSERVER_TEST_CLOCK_SHIFT_DAYS`` is
set; Python imports ``sitecustomize`` at start-up, so every such process moves its wall clock as many days
ahead (``shifted_clock``), then runs the ``sitecustomize`` this one hides (a distribution's, the zero-code
attach's), as Python would have. Nothing here may stop Python from starting: a problem is one line on stderr.
"""

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain() -> None:
    """Run the next ``sitecustomize`` on the path, as Python would have."""
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    import shifted_clock

    shifted_clock.start()
except Exception as _exc:
    sys.stderr.write(f"tests: the wall clock is not moved in this process ({type(_exc).__name__}: {_exc})\n")
_chain()
