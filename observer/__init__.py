"""spark-state-observer: make the state of Spark Structured Streaming jobs observable.

    import observer
    handle = observer.attach(spark)          # metrics on http://127.0.0.1:9108/metrics
    ...
    handle.stop()

The public names below are imported on first use, so ``import observer.metrics`` (the catalog, for
dashboards, alerts and docs) or ``import observer.offline`` never pulls in PySpark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from observer._version import __version__

if TYPE_CHECKING:
    from observer.embedded.attach import ObserverHandle, attach
    from observer.embedded.listener import StateObserverListener
    from observer.embedded.prometheus_observer import PrometheusObserver as Observer
    from observer.model.signal_kinds import SIGNAL_KINDS, SignalEvent
    from observer.settings import Settings, SettingsError

_PUBLIC = {
    "attach": "observer.embedded.attach",
    "ObserverHandle": "observer.embedded.attach",
    "StateObserverListener": "observer.embedded.listener",
    "Observer": "observer.embedded.prometheus_observer",  # the pipeline's Observer with its Prometheus exporter, as before
    "Settings": "observer.settings",
    "SettingsError": "observer.settings",
    "SignalEvent": "observer.model.signal_kinds",
    "SIGNAL_KINDS": "observer.model.signal_kinds",
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
        raise AttributeError(f"module 'observer' has no attribute {name!r}")
    return getattr(importlib.import_module(module), _RENAMED.get(name, name))
