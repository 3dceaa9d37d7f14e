"""Capture: getting Spark's events into the observer (listener, queue, event-log watcher)."""
