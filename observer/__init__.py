"""spark-state-observer: make the state of Spark Structured Streaming jobs observable.

    import observer
    handle = observer.attach(spark)          # metrics on http://127.0.0.1:9108/metrics
    ...
    handle.stop()
"""

from observer.attach import ObserverHandle, attach
from observer.listener import StateObserverListener
from observer.runtime import Observer
from observer.settings import Settings, SettingsError
from observer.signals.engine import SIGNAL_KINDS, SignalEvent

__all__ = ["attach", "ObserverHandle", "StateObserverListener", "Observer", "Settings", "SettingsError",
           "SignalEvent", "SIGNAL_KINDS"]
__version__ = "0.1.0"
