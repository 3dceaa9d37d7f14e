"""Metrics: the catalog of every exported metric, and the state their values live in.

``catalog`` (every typed spec, assembled from ``families`` where they are written by family, on ``spec``'s
``MetricSpec``; the one module emitters import), ``tracker`` (all metric state:
per query, per operator and application-wide), ``selfmetrics`` (the observer's own counters and
histograms), ``updates`` (the values the signals derive, applied by the tracker) and ``view`` (the
read-only snapshot interface every exporter reads). Nothing here imports PySpark.
"""
