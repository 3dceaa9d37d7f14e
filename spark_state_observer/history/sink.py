"""The history store as a pipeline sink: buffered on the worker thread, flushed in batches.

SQLite (a local file) is written on the worker thread for a listener or a replay: a flush takes
milliseconds, and a locked or full file drops that flush's rows. PostgreSQL is written by a
``BackgroundWriter``: the worker only hands rows over, so a server that is down, slow or refusing the
password never delays metrics or signals; the writer retries with backoff and counts what overflows its
buffer. The watcher (``background=True``) writes SQLite through a ``BackgroundWriter`` too: it saves its
read positions only as far as rows are written (``written_mark``/``is_written``), so a full disk holds
rows back and retries them, and a restart re-reads what was never written, instead of skipping it.

Either way, rows the database refuses for their values (a lone surrogate or NUL in a name, a number out
of range) cost only themselves: the rest of the write goes in (``spark_state_observer.history.isolate``).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Sequence

from spark_state_observer.history.backend import open_backend
from spark_state_observer.history.isolate import PartlyWritten
from spark_state_observer.history.retention import RetentionError, RetentionPolicy
from spark_state_observer.history.rows import PendingRows
from spark_state_observer.history.store import HistoryError, HistoryStore
from spark_state_observer.history.writer import BackgroundWriter
from spark_state_observer.metrics.selfmetrics import SelfMetrics
from spark_state_observer.model.events import Event, QueryProgress
from spark_state_observer.model.identity import AppContext
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.placement.feed import PlacementFeed
from spark_state_observer.placement.tracker import OperatorBatch
from spark_state_observer.settings import Settings

log = logging.getLogger("spark_state_observer")
FLUSH_ROWS = 2000
FLUSH_SECONDS = 1.0
RETENTION_SECONDS = 300.0
CLOSE_TIMEOUT_SECONDS = 10.0  # how long stop() lets the background writer finish before counting the rest dropped


class HistorySink:
    """Writes every event and signal to the history. A database problem drops (and counts) only its rows.

    Drops are counted in events (progress events and signals) under ``events_dropped_total{reason="history"}``;
    failed writes under ``export_failures_total{exporter="history"}``. If a SQLite file cannot even be
    opened, the sink stays off: the message is logged once and every event is counted as dropped.

    ``clock`` is where the retention window ends at the latest (``retention.window_end``): the wall clock
    unless a test pins it.
    """

    name = "history"

    def __init__(
        self,
        path: str,
        self_metrics: SelfMetrics,
        settings: Settings | None = None,
        app: AppContext | None = None,
        background: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        settings = settings or Settings()
        self.path = path
        self._metrics = self_metrics
        self._last_flush = time.monotonic()
        self._last_retention = 0.0
        self.error: str | None = None
        self.writer: BackgroundWriter | None = None
        self.close_timeout = CLOSE_TIMEOUT_SECONDS
        self.placement: PlacementFeed | None = None  # set by Observer.set_placement when placement is followed
        self.store: HistoryStore | None = None
        self._context: AppContext | None = None  # the application the rows are stamped with now (on_app_event)
        self._app = app or AppContext()  # the identity given here: rows of an unknown application keep it
        self._stamped: AppContext | None = None  # set by ``stamp``: wins over what the observer says
        self.dropped_rows = 0  # rows (or, with the store off, events) never written: replay reports them
        self.last_failure: str | None = None
        try:
            retention = RetentionPolicy.parse(settings.history_max_age_seconds, settings.history_retention)
            backend = open_backend(path)
            self.store = HistoryStore(
                path,
                settings.history_max_age_seconds,
                settings.history_max_bytes,
                app=app,
                retention=retention,
                backend=backend,
                clock=clock,
            )
            if backend.kind != "sqlite" or background:
                self.writer = BackgroundWriter(
                    backend,
                    settings.history_buffer_rows,
                    on_dropped=self._writer_dropped,
                    on_failure=lambda: self._metrics.count("export_failures", "history"),
                    retention=retention,
                    max_bytes=settings.history_max_bytes,
                    clock=clock,
                )
        except (HistoryError, RetentionError) as exc:
            self.store, self.error = None, str(exc)
            log.warning("spark-state-observer: %s; history is off for this run", exc)

    def _writer_dropped(self, events: int) -> None:
        """The background writer gave up on ``events`` (buffer full, the database away at shutdown, or rows it refused)."""
        self._metrics.count("dropped", "history", events)
        self.dropped_rows += events
        writer = self.writer
        self.last_failure = (writer.error or writer.last_refusal if writer is not None else None) or "the history could not take them"

    def _refused(self, part: PendingRows, message: str) -> None:
        """A row the database refused even written alone (``isolate``): counted; every other row was written."""
        lost = max(part.events, 1)  # a row that is neither a progress event nor a signal (placement, query) counts one
        self._metrics.count("dropped", "history", lost)
        self.dropped_rows += lost
        if self.last_failure != message:  # said once per reason, counted every time
            log.warning("spark-state-observer: %s; that row is dropped (counted), every other row is written", message)
        self.last_failure = message

    def on_event(self, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        if self.store is None:
            if event is not None:
                self._metrics.count("dropped", "history")
                self.dropped_rows += 1
            return
        if event is not None:
            self.store.add_event(event, received_at)
            if self.placement is not None and isinstance(event, QueryProgress):
                self._add_placement(event, self.placement.last, received_at)
        for signal in signals:
            self.store.add_signal(signal.kind, signal.query_id, signal.run_id, signal.timestamp, signal.attributes)
        self._maybe_flush()

    def on_app_event(self, app: AppContext, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        """``on_event`` with the rows stamped with ``app``: the watcher's one history sink serves every application it follows.

        An observer that knows nothing of its application (``app.known`` false) leaves the identity this
        sink was built with.
        """
        if self.store is not None and self._stamped is None and app is not self._context:
            self._context = app
            self.store.rows.app = app if app.known else self._app
        self.on_event(event, signals, received_at)

    def stamp(self, app: AppContext) -> None:
        """Stamp the rows added from now on with ``app``, whatever the observer's identity.

        A replay of several logs has one observer, whose identity is what the logs share (a name at best);
        each log's rows still belong to its own application, with its id, so the history tells them apart.
        """
        self._stamped = app
        if self.store is not None:
            self.store.rows.app = app

    def follow_placement(self, feed: PlacementFeed) -> None:
        """Also write where each state partition ran (``placements``), from the feed the observer runs."""
        self.placement = feed

    def _add_placement(self, progress: QueryProgress, batches: Sequence[OperatorBatch], received_at: float) -> None:
        assert self.store is not None
        ts = progress.timestamp or received_at  # as its batch row (``rows.RowBuilder``)
        for ob in batches:
            moved = {m.partition: m for m in ob.migrations}
            for r in ob.runs:
                m = moved.get(r.partition)
                load = r.load_ms / 1000.0 if r.load_ms is not None and r.load_ms >= 0 else None
                replay = r.replay_ms / 1000.0 if r.replay_ms is not None and r.replay_ms >= 0 else None
                self.store.add_row(
                    "placements",
                    (
                        ob.query_id,
                        r.run_id or progress.run_id,
                        ob.batch_id,
                        ts,
                        ob.operator,
                        r.partition,
                        r.executor_id,
                        r.host,
                        r.rows_total,
                        r.memory_bytes,
                        load,
                        replay,
                        r.changelog_files,
                        m.from_executor if m else None,
                        m.cause if m else None,
                        r.sst_bytes,
                    ),
                )

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
            store.flush(self._refused)
            if now - self._last_retention > RETENTION_SECONDS:
                self._last_retention = now
                store.enforce_retention()
        except HistoryError as exc:
            if isinstance(exc, PartlyWritten):  # the parts written before the database failed are not lost
                events = exc.rest.events
            self._metrics.count("dropped", "history", events)
            self.dropped_rows += events
            self.last_failure = str(exc)
            if self.error != str(exc).split(" (")[0]:
                log.warning("spark-state-observer: %s", exc)
            self.error = str(exc).split(" (")[0]
            raise
        self.error = None

    def flush(self) -> None:
        self._maybe_flush(force=True)

    def wait_written(self, timeout: float) -> bool:
        """Wait until everything handed over is in the database (with a background writer; else ``flush`` wrote it)."""
        self._maybe_flush(force=True)
        return self.writer.drain(timeout) if self.writer is not None else True

    def written_mark(self) -> int:
        """A mark for every row handed over so far: ``is_written(mark)`` says when they are all in the database."""
        return self.writer.offered if self.writer is not None else 0

    def is_written(self, mark: int) -> bool:
        """True once the rows handed over before ``written_mark`` returned ``mark`` are written or counted dropped.

        Without a background writer (SQLite for a listener or replay) ``flush`` has written or dropped them
        (always true); a background writer settles them later. Never, while the history is off: a watcher then
        keeps its saved positions, and its next start with a usable history writes these events.
        """
        if self.store is None:  # the history is off (it could not be opened): nothing is written, keep the positions
            return False
        return self.writer is None or self.writer.settled >= mark

    def close(self) -> None:
        try:
            self._maybe_flush(force=True)
        finally:
            if self.writer is not None:
                self.writer.close(self.close_timeout)
            elif self.store is not None:
                self.store.close()
