"""Signals: what the events mean for a stateful stream, derived live and in replay alike.

``engine`` (runs the rules per event, returns ``facts``), one module per rule family (``lifecycle``,
``restore``, ``pace``, ``growth``, ``executors``, ``kafka``, ``capacity``), ``classify`` (termination causes)
and ``bus`` (recent signals and user callbacks). Their vocabulary, ``SignalEvent`` and the kinds, is
``observer.model.signal_kinds``; placement's signals live in ``observer.placement``.
A new signal: add its kind to ``observer.model.signal_kinds``, its metric specs to ``observer.metrics.catalog``,
and its rule to the module of its family (or a new one the engine calls), writing only into the ``SignalFacts`` it is given.
"""
