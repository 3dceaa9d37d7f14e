"""Capture: taking events from Spark as cheaply as it allows, and handing them to the worker.

``listener`` (the py4j JSON bridge and ``StateObserverListener``), ``attach`` (the one line a job adds),
``queue`` (the bounded drop-oldest hand-off). Sources that do not run inside the job (an event-log
watcher) belong here too: they produce ``CapturedEvent``s for the same ``Observer.submit``.
"""
