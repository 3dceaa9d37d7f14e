"""The history: every batch, operator, partition figure and event, in SQLite or a shared PostgreSQL.

Prometheus keeps numbers over time; the browser and post-mortems need the record of each batch and
what happened around it. ``HistorySink`` writes (SQLite from the observer's worker thread, in batches,
WAL mode so readers never block the writer; PostgreSQL from a background writer that never blocks it);
``spark_state_observer.history.loaders`` reads either into pandas. ``spark_state_observer.history.url`` picks the backend from
the history location.
"""
