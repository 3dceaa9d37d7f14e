"""Signals: what the events mean for a stateful stream, derived live and in replay alike.

``engine`` (runs the rules per event, returns ``facts``), one module per rule family (``lifecycle``,
``restore``, ``pace``, ``growth``, ``executors``, ``kafka``, ``capacity``), ``classify`` (termination causes)
and ``bus`` (recent signals and user callbacks). Their vocabulary, ``SignalEvent`` and the kinds, is
``spark_state_observer.model.signal_kinds``; placement's signals live in ``spark_state_observer.placement``.
A new signal: add its kind to ``spark_state_observer.model.signal_kinds``, its metric specs to ``spark_state_observer.metrics.catalog``,
and its rule to the module of its family (or a new one the engine calls), writing only into the ``SignalFacts`` it is given.
"""
