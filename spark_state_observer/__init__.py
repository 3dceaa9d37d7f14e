"""spark-state-observer: make the state of Spark Structured Streaming jobs observable.

    import spark_state_observer as observer
    handle = observer.attach(spark)          # metrics on http://127.0.0.1:9108/metrics
    ...
    handle.stop()

The public names below are imported on first use, so ``import spark_state_observer.metrics`` (the catalog, for
dashboards, alerts and docs) or ``import spark_state_observer.offline`` never pulls in PySpark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from spark_state_observer._version import __version__

if TYPE_CHECKING:
    from spark_state_observer.embedded.attach import ObserverHandle, attach
    from spark_state_observer.embedded.listener import StateObserverListener
    from spark_state_observer.embedded.prometheus_observer import PrometheusObserver as Observer
    from spark_state_observer.model.signal_kinds import SIGNAL_KINDS, SignalEvent
    from spark_state_observer.settings import Settings, SettingsError

_PUBLIC = {
    "attach": "spark_state_observer.embedded.attach",
    "ObserverHandle": "spark_state_observer.embedded.attach",
    "StateObserverListener": "spark_state_observer.embedded.listener",
    "Observer": "spark_state_observer.embedded.prometheus_observer",  # the pipeline's Observer with its Prometheus exporter, as before
    "Settings": "spark_state_observer.settings",
    "SettingsError": "spark_state_observer.settings",
    "SignalEvent": "spark_state_observer.model.signal_kinds",
    "SIGNAL_KINDS": "spark_state_observer.model.signal_kinds",
}
__all__ = [
    "SIGNAL_KINDS",
    "Observer",
    "ObserverHandle",
    "Settings",
    "SettingsError",
    "SignalEvent",
    "StateObserverListener",
    "__version__",
    "attach",
]


_RENAMED = {"Observer": "PrometheusObserver"}  # public name -> its name in the module


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'spark_state_observer' has no attribute {name!r}")
    return getattr(importlib.import_module(module), _RENAMED.get(name, name))
