"""A background writer for a history that can be away: a bounded buffer, retries with backoff, drops counted.

A PostgreSQL server can be down, refuse the password or stop answering, a SQLite file's disk can fill
up (the watcher writes SQLite through this writer too); none of that may reach the
observer's worker (which serves /metrics and derives signals) or the job. The sink hands its rows to
``offer``, which only appends under a lock; this writer's own thread writes them, and on failure keeps
them and retries after a delay doubling from ``BACKOFF_MIN`` to ``BACKOFF_MAX`` seconds. While the
buffer is full, newly offered progress events and signals are dropped and counted (reason ``history``),
so what is lost is a contiguous stretch after the buffer filled and the rows of the outage's start all
arrive once the database is back. Query and run rows (one per query and run, merged) are never dropped.
Rows the database refuses for their values are isolated, not retried (``spark_state_observer.history.isolate``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Callable

from spark_state_observer.history.backend import Backend, HistoryDataError, HistoryError
from spark_state_observer.history.isolate import PartlyWritten, write_isolating
from spark_state_observer.history.retention import RetentionPolicy, window_end
from spark_state_observer.history.rows import PendingRows

log = logging.getLogger("spark_state_observer")
BACKOFF_MIN = 0.5
BACKOFF_MAX = 30.0
MAX_ROWS_PER_WRITE = 50_000
RETENTION_SECONDS = 300.0


class BackgroundWriter:
    """Owns one backend and the thread that writes to it."""

    def __init__(
        self,
        backend: Backend,
        capacity_rows: int,
        on_dropped: Callable[[int], None],
        on_failure: Callable[[], None],
        retention: RetentionPolicy | None = None,
        max_bytes: float = float("inf"),
        name: str = "spark-state-observer-history",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.backend = backend
        self._clock = clock  # where the retention window may end at the latest (``retention.window_end``)
        self.capacity = max(1, capacity_rows)
        self._on_dropped = on_dropped
        self._on_failure = on_failure
        self._retention = retention
        self._max_bytes = max_bytes
        self._buffer = PendingRows()
        self._writing = 0  # rows taken by the thread and not yet written or put back
        self._inflight_events = 0
        # offers are numbered: every offer up to ``settled`` is in the database or counted dropped (a watcher
        # saves its read positions only that far, so a kill re-reads what was still buffered)
        self.offered = 0
        self.settled = 0
        self._cond = threading.Condition()
        self._stop = False
        self._last_retention = 0.0
        self.backoff = 0.0  # seconds the thread waits before its next attempt (0 while writes succeed)
        self._backoff_base = 0.0
        self.error: str | None = None  # the last failure's message while failing, None once writes succeed
        self.last_refusal: str | None = None  # why the database last refused a row
        self.newest: float | None = None  # the newest time written, which retention counts back from
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # --- the caller's side: never waits on the database ---------------------------------------------
    @property
    def buffered_rows(self) -> int:
        with self._cond:
            return self._buffer.rows + self._writing

    def offer(self, rows: PendingRows) -> None:
        """Buffer ``rows`` for writing; when they do not fit, drop (and count) their events."""
        if not rows:
            return
        dropped = 0
        with self._cond:
            self.offered += 1
            fits = self._buffer.rows + self._writing + rows.rows <= self.capacity or not (self._buffer or self._writing)
            if not fits:
                dropped = rows.events
            self._buffer.absorb(rows, facts=fits)
            self._cond.notify()
        if dropped:
            self._on_dropped(dropped)

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until everything offered so far is written."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.notify()
            while self._buffer or self._writing:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def close(self, timeout: float) -> None:
        """Write what can be written within ``timeout``, count the rest as dropped, stop the thread."""
        self.drain(timeout)
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout + 1.0)
        with self._cond:  # a write still hanging (daemon thread) is counted as lost with the buffer
            left, self._buffer = self._buffer.events + self._inflight_events, PendingRows()
            self._inflight_events = 0
        if left:
            self._on_dropped(left)
            log.warning(
                "spark-state-observer: history %s: %d events not written at shutdown (%s)",
                self.backend.display,
                left,
                self.error or "timed out",
            )
        self.backend.close()

    # --- the writer thread ----------------------------------------------------------------------------
    def _take(self) -> PendingRows:
        """Up to ``MAX_ROWS_PER_WRITE`` rows (whole tables' prefixes), keeping the rest buffered."""
        buf = self._buffer
        if buf.rows <= MAX_ROWS_PER_WRITE:
            self._buffer = PendingRows()
            return buf
        chunk = PendingRows(queries=buf.queries, runs=buf.runs, restamped=buf.restamped)
        buf.queries, buf.runs, buf.restamped = {}, {}, []
        room = MAX_ROWS_PER_WRITE
        # a batch's operator and partition rows may go in a later write than the batch row: each write
        # is idempotent (keys replace), so a split costs nothing but order
        for table, rows in buf.facts.items():
            take = rows[:room]
            chunk.facts[table], buf.facts[table] = take, rows[len(take) :]
            room -= len(take)
        return chunk

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._buffer and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                chunk = self._take()
                upto = None if self._buffer else self.offered  # a part of the buffer settles nothing yet
                self._writing, self._inflight_events = chunk.rows, chunk.events
            rest = self._write(chunk)
            with self._cond:
                if rest is None and upto is not None:
                    self.settled = max(self.settled, upto)
                if rest is not None:
                    rest.absorb(self._buffer)  # retried first, before anything newer
                    self._buffer = rest
                self._writing = self._inflight_events = 0
                self._cond.notify_all()
                if rest is not None and self._cond.wait_for(lambda: self._stop, timeout=self.backoff):
                    return

    def _write(self, chunk: PendingRows) -> PendingRows | None:
        """Write ``chunk``: None once all of it is written (or, refused by the database, counted dropped),
        else the rows to try again after the backoff."""
        try:
            self.backend.write(chunk)
        except HistoryDataError:
            return self._isolate(chunk)
        except HistoryError as exc:
            self._failed(str(exc))
            return chunk
        except Exception as exc:  # a bug of ours or the driver's: the same treatment, never a dead thread
            self._failed(f"history {self.backend.display}: unexpected {type(exc).__name__}: {exc}")
            return chunk
        self._written(chunk)
        self._recovered()
        return None

    def _isolate(self, chunk: PendingRows) -> PendingRows | None:
        """The database refused a value of ``chunk``: write the rest of it, drop (and count) the rows at fault
        (``isolate.write_isolating``); a failure of the database itself meanwhile hands back what is left."""
        try:
            write_isolating(self.backend, chunk, self._written, self._refused)
        except PartlyWritten as exc:
            self._failed(str(exc))
            return exc.rest
        self._recovered()
        return None

    def _refused(self, part: PendingRows, message: str) -> None:
        """Count (and say, once per reason) a row the database refuses even written alone."""
        lost = max(part.events, 1)  # a row that is neither a progress event nor a signal (placement, query) counts one
        if message != self.last_refusal:
            log.warning("spark-state-observer: %s; that row is dropped (counted), every other row is written", message)
        self.last_refusal = message
        self._on_dropped(lost)

    def _written(self, part: PendingRows) -> None:
        times = [r[3] for r in part.facts["batches"]] + [r[2] for r in part.facts["events"]]
        if times:
            self.newest = max(times if self.newest is None else [*times, self.newest])

    def _recovered(self) -> None:
        if self.error is not None:
            log.warning("spark-state-observer: history %s is writable again", self.backend.display)
        self.error, self.backoff, self._backoff_base = None, 0.0, 0.0
        self._maybe_retain()

    def _failed(self, message: str) -> None:
        if message != self.error:
            log.warning("spark-state-observer: %s", message)
        self.error = message  # set before counting: whoever sees the count sees the message
        self.failures += 1
        self._on_failure()
        self._backoff_base = min(BACKOFF_MAX, max(BACKOFF_MIN, self._backoff_base * 2))
        self.backoff = self._backoff_base * random.uniform(0.8, 1.2)  # jitter: writers that failed together retry apart

    def _maybe_retain(self) -> None:
        now = time.monotonic()
        if self._retention is None or now - self._last_retention < RETENTION_SECONDS:
            return
        self._last_retention = now
        try:
            # relative to the newest data written, as ``HistoryStore.enforce_retention``: old logs read now keep their last max_age
            self.backend.enforce_retention(self._retention, self._max_bytes, window_end(self.newest, self._clock()))
        except HistoryError as exc:
            log.warning("spark-state-observer: history retention: %s", exc)
