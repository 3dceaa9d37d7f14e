"""The embedded history store: every batch, operator, partition figure and event, in SQLite.

Prometheus keeps numbers over time; the browser and post-mortems need the record of each batch and
what happened around it. ``HistorySink`` writes (from the observer's worker thread, in batches, WAL
mode so readers never block the writer); ``observer.history.loaders`` reads it into pandas.
"""
