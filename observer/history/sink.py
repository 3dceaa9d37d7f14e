"""The history store as a pipeline sink: buffered on the worker thread, flushed in batches.

SQLite (a local file) is written on the worker thread, as before: a flush takes milliseconds, and a
locked or full file drops that flush's rows. PostgreSQL is written by a ``BackgroundWriter``: the
worker only hands rows over, so a server that is down, slow or refusing the password never delays
metrics or signals; the writer retries with backoff and counts what overflows its buffer.
"""

from __future__ import annotations

import logging
import time
from typing import Sequence

from observer.history.backend import open_backend
from observer.history.retention import RetentionError, RetentionPolicy
from observer.history.rows import AppIdentity
from observer.history.store import HistoryError, HistoryStore
from observer.history.writer import BackgroundWriter
from observer.metrics.selfmetrics import SelfMetrics
from observer.model.events import Event
from observer.model.identity import AppContext
from observer.settings import Settings
from observer.signals.kinds import SignalEvent

log = logging.getLogger("observer")
FLUSH_ROWS = 2000
FLUSH_SECONDS = 1.0
RETENTION_SECONDS = 300.0
CLOSE_TIMEOUT_SECONDS = 10.0  # how long stop() lets the background writer finish before counting the rest dropped


class HistorySink:
    """Writes every event and signal to the history. A database problem drops (and counts) only its rows.

    Drops are counted in events (progress events and signals) under ``events_dropped_total{reason="history"}``;
    failed writes under ``export_failures_total{exporter="history"}``. If a SQLite file cannot even be
    opened, the sink stays off: the message is logged once and every event is counted as dropped.
    """

    name = "history"

    def __init__(self, path: str, self_metrics: SelfMetrics, settings: Settings | None = None,
                 app: AppIdentity | None = None) -> None:
        settings = settings or Settings()
        self.path = path
        self._metrics = self_metrics
        self._last_flush = time.monotonic()
        self._last_retention = 0.0
        self.error: str | None = None
        self.writer: BackgroundWriter | None = None
        self.close_timeout = CLOSE_TIMEOUT_SECONDS
        self.store: HistoryStore | None = None
        self._context: AppContext | None = None  # the application the rows are stamped with now (on_app_event)
        self._app = app or AppIdentity()  # the identity given here: rows of an unknown application keep it
        try:
            retention = RetentionPolicy.parse(settings.history_max_age_seconds, settings.history_retention)
            backend = open_backend(path)
            self.store = HistoryStore(path, settings.history_max_age_seconds, settings.history_max_bytes, app=app,
                                      retention=retention, backend=backend)
            if backend.kind != "sqlite":
                self.writer = BackgroundWriter(backend, settings.history_buffer_rows,
                                               on_dropped=lambda n: self._metrics.count("dropped", "history", n),
                                               on_failure=lambda: self._metrics.count("export_failures", "history"),
                                               retention=retention, max_bytes=settings.history_max_bytes)
        except (HistoryError, RetentionError) as exc:
            self.store, self.error = None, str(exc)
            log.warning("spark-state-observer: %s; history is off for this run", exc)

    def on_event(self, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        if self.store is None:
            if event is not None:
                self._metrics.count("dropped", "history")
            return
        if event is not None:
            self.store.add_event(event, received_at)
        for signal in signals:
            self.store.add_signal(signal.kind, signal.query_id, signal.run_id, signal.timestamp, signal.attributes)
        self._maybe_flush()

    def on_app_event(self, app: AppContext, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        """``on_event`` with the rows stamped with ``app``: the watcher's one history sink serves every application it follows.

        An observer that knows nothing of its application (``app.known`` false) leaves the identity this
        sink was built with.
        """
        if self.store is not None and app is not self._context:
            self._context = app
            self.store.rows.app = (AppIdentity.of(app.name or None, dict(app.static), app.app_id or None) if app.known
                                   else self._app)
        self.on_event(event, signals, received_at)

    def tick(self, processed: int) -> None:
        """Rows wait for the next event or flush: a quiet job's history is written when asked."""

    def _maybe_flush(self, force: bool = False) -> None:
        store = self.store
        if store is None or not store.pending:
            return
        now = time.monotonic()
        if not force and store.pending < FLUSH_ROWS and now - self._last_flush < FLUSH_SECONDS:
            return
        self._last_flush = now
        if self.writer is not None:
            self.writer.offer(store.take())  # never waits on the database
            return
        events = store.rows.pending.events
        try:
            store.flush()
            if now - self._last_retention > RETENTION_SECONDS:
                self._last_retention = now
                store.enforce_retention()
        except HistoryError as exc:
            self._metrics.count("dropped", "history", events)
            if self.error != str(exc).split(" (")[0]:
                log.warning("spark-state-observer: %s", exc)
            self.error = str(exc).split(" (")[0]
            raise
        self.error = None

    def flush(self) -> None:
        self._maybe_flush(force=True)

    def wait_written(self, timeout: float) -> bool:
        """Wait until everything handed over is in the database (PostgreSQL; SQLite writes in flush)."""
        self._maybe_flush(force=True)
        return self.writer.drain(timeout) if self.writer is not None else True

    def close(self) -> None:
        try:
            self._maybe_flush(force=True)
        finally:
            if self.writer is not None:
                self.writer.close(self.close_timeout)
            elif self.store is not None:
                self.store.close()
