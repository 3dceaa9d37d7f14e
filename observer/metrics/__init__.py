"""Metrics: the catalog of every exported metric, and the state their values live in.

``catalog`` (the typed specs, the only place metric names are written), ``tracker`` (all metric state:
per query, per operator and application-wide), ``selfmetrics`` (the observer's own counters and
histograms), ``updates`` (the values the signals derive, applied by the tracker) and ``view`` (the
read-only snapshot interface every exporter reads). Nothing here imports PySpark.
"""
