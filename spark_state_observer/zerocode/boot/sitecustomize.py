"""Zero-code attach of spark-state-observer: this folder goes first on ``PYTHONPATH`` (``spark-state-observer run``
puts it there; ``python -m spark_state_observer.zerocode path`` prints it for a cluster's configuration).

Python imports ``sitecustomize`` at start-up, so every Python process of the job runs this: it installs
``spark_state_observer.zerocode.hook`` (standard library only; PySpark is not imported here), then runs the
``sitecustomize`` this one hides, if there is one further along the path. Nothing here may stop Python
from starting: a problem is one line on stderr.
"""

import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType

_HERE = os.path.dirname(os.path.abspath(__file__))


def _hook() -> ModuleType:
    """The package's hook; else the ``hook.py`` beside this folder, which says at session creation why nothing attaches."""
    try:
        from spark_state_observer.zerocode import hook

        return hook
    except ImportError:
        path = os.path.join(os.path.dirname(_HERE), "hook.py")
        spec = importlib.util.spec_from_file_location("_spark_state_observer_hook", path)
        if spec is None or spec.loader is None:
            raise
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def _chain() -> None:
    """Run the next ``sitecustomize`` on the path (a distribution's, OpenTelemetry's), as Python would have."""
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _hook().install()
except Exception as _exc:
    sys.stderr.write(f"spark-state-observer: not attached: the zero-code hook failed to load ({type(_exc).__name__}: {_exc})\n")
_chain()
