"""Capture: taking events as cheaply as their source allows; it imports only the model.

``listener`` (the py4j JSON bridge and ``QueryListener``, which hands each event to a ``submit`` callable),
``queue`` (the bounded drop-oldest hand-off and ``CapturedEvent``), ``codecs`` (Spark's event-log compression
codecs) and ``storage`` (local and object-store listing and reading). Who consumes the events is decided by the
composition roots: ``spark_state_observer.embedded`` (inside a job) and ``spark_state_observer.fleet`` (the watcher).
"""
