"""Signals: what the events mean for a stateful stream, derived live and in replay alike.

``kinds`` (the vocabulary and ``SignalEvent``, a leaf), ``engine`` (runs the rules per event, returns
``facts``), one module per rule family (``lifecycle``, ``restore``, ``pace``, ``growth``,
``executors``), ``classify`` (termination causes) and ``bus`` (recent signals and user callbacks).
``placement`` (where state partitions run, migrations, skew, advice) is fed by ``placement_feed`` at each
progress event when the observer follows placement.
A new signal: add its kind to ``kinds``, its metric specs to ``observer.metrics.catalog``, and its rule
to the module of its family (or a new one the engine calls), writing only into the ``Facts`` it is given.
"""
