"""The history store as a pipeline sink: buffered on the worker thread, flushed in batches."""

from __future__ import annotations

import logging
import time
from typing import Sequence

from observer.history.store import HistoryError, HistoryStore
from observer.metrics.selfmetrics import SelfMetrics
from observer.model.events import Event
from observer.settings import Settings
from observer.signals.kinds import SignalEvent

log = logging.getLogger("observer")
FLUSH_ROWS = 2000
FLUSH_SECONDS = 1.0
RETENTION_SECONDS = 300.0


class HistorySink:
    """Writes every event and signal to SQLite. A database problem drops (and counts) only its rows.

    If the database cannot even be opened, the sink stays off: the message is logged once, every event
    it would have written is counted as dropped, and the observer's metrics go on unaffected.
    """

    name = "history"

    def __init__(self, path: str, self_metrics: SelfMetrics, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        self.path = path
        self._metrics = self_metrics
        self._last_flush = time.monotonic()
        self._last_retention = 0.0
        self.error: str | None = None
        self.dropped_rows = 0  # rows (or, with the store off, events) never written: replay reports them
        self.last_failure: str | None = None
        try:
            self.store: HistoryStore | None = HistoryStore(path, settings.history_max_age_seconds, settings.history_max_bytes)
        except HistoryError as exc:
            self.store, self.error = None, str(exc)
            log.warning("spark-state-observer: %s; history is off for this run", exc)

    def on_event(self, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        if self.store is None:
            if event is not None:
                self._metrics.count("dropped", "history")
                self.dropped_rows += 1
            return
        if event is not None:
            self.store.add_event(event, received_at)
        for signal in signals:
            self.store.add_signal(signal.kind, signal.query_id, signal.run_id, signal.timestamp, signal.attributes)
        self._maybe_flush()

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
        pending = store.pending
        try:
            store.flush()
            if now - self._last_retention > RETENTION_SECONDS:
                self._last_retention = now
                store.enforce_retention()
        except HistoryError as exc:
            self._metrics.count("dropped", "history", pending)
            self.dropped_rows += pending
            self.last_failure = str(exc)
            if self.error != str(exc).split(" (")[0]:
                log.warning("spark-state-observer: %s", exc)
            self.error = str(exc).split(" (")[0]
            raise
        self.error = None

    def flush(self) -> None:
        self._maybe_flush(force=True)

    def close(self) -> None:
        try:
            self._maybe_flush(force=True)
        finally:
            if self.store is not None:
                self.store.close()
