"""The observer inside a job: ``attach`` (the one line a job adds: builds the observer, its exporters and
history, and registers the listener) and ``listener`` (``StateObserverListener``, the capture listener bound
to an ``Observer``). Users call ``observer.attach(spark)``; the package re-exports it.
"""
