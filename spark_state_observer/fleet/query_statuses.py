"""The watcher's lasting query states: a failed or crash-looping query outlives its application, and so does a
query on a schedule between its runs (with its latest start and interval, so a run that does not come is seen).

An application's series go when the watcher forgets it (``--grace-seconds`` after it ended); a query that failed
there must not look healed then. ``QueryStatuses`` keeps, by query id, every query whose state
(``spark_state_observer.model.query_lifecycle``) is lasting, taken from the applications' trackers after each round, and the
watcher exports ``spark_streaming_query_lifecycle`` for those whose application it no longer follows. A state ends
when a later run of the query (same query id, so same checkpoint) runs or stops cleanly, when an operator retires
it (``spark-state-observer retire``, read from the history every ``SYNC_SECONDS``), or ``query_status_retention_days``
after it began; at most ``query_status_max_queries`` are kept (the oldest go first, counted in ``dropped``).

With a history, every change is written there (``spark_state_observer.history.query_status``) and a watcher started again on
it restores the states first. The history is the watcher's own network and disk: a failure to write is counted
(``spark_state_observer_export_failures_total{exporter="query_status"}``), logged once, and retried next round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from spark_state_observer.history import query_status
from spark_state_observer.history.backend import Backend, HistoryError, open_backend
from spark_state_observer.history.query_status import QueryStatusRow
from spark_state_observer.metrics.tracker import QueryLife
from spark_state_observer.model.identity import AppContext
from spark_state_observer.model.query_lifecycle import LASTING, LOST, RETIRED, SCHEDULED

log = logging.getLogger("spark_state_observer")
SYNC_SECONDS = 10.0  # how often retirements written by others are read, and expired states forgotten
EXPORTER = "query_status"  # the exporter label of its write failures


class QueryStatuses:
    """Lasting query states by query id, restored from and written to the history when there is one."""

    def __init__(
        self,
        retention_seconds: float,
        max_queries: int,
        history: str | None = None,
        on_failure: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.retention = retention_seconds
        self.max_queries = max_queries
        self._clock = clock
        self._on_failure = on_failure
        self._entries: dict[str, QueryStatusRow] = {}  # lasting or retired, by query id
        self._unsaved: dict[str, QueryStatusRow] = {}
        self._history = history
        self._backend: Backend | None = None
        self._failing = False
        self._last_sync = float("-inf")
        self.sync_seconds = SYNC_SECONDS
        self.dropped = 0  # lasting states forgotten over the cap
        self.exported: tuple[QueryStatusRow, ...] = ()  # the lasting states, as of the end of the last round

    # --- what the applications say --------------------------------------------------------------------
    def restore(self) -> None:
        """Read the states kept in the history (a watcher started again): before any application is read."""
        if self._history is None:
            return
        try:
            rows = query_status.load(self._open())
        except HistoryError as exc:
            self._failed(exc)
            return
        now = self._clock()
        cutoff = now - self.retention
        for row in query_status.bring_back(rows, now):
            if row.since >= cutoff and (row.status in LASTING or row.status == RETIRED):
                self._entries[row.query_id] = row
        self._bound()
        self.publish()

    def observe(self, app: AppContext, lives: Iterable[QueryLife]) -> None:
        """Take the states of ``app``'s queries (``MetricsView.lifecycles``) after it processed events; a change is
        published at once (the application may be forgotten before the round ends: its state must not blink)."""
        now = self._clock()
        changed = False
        for life in lives:
            known = self._entries.get(life.query_id)
            if known is not None and known.status == RETIRED and known.retired_run == life.run_id:
                continue  # the retired run itself, still followed: retired is retired
            if life.state in LASTING:
                if known is None or known.status != life.state or known.run_id != life.run_id:
                    changed = True
                    self._put(
                        QueryStatusRow(
                            life.query_id,
                            life.name,
                            app.name,
                            app.static,
                            app.app_id,
                            life.state,
                            # lost: since its driver's last sign of life (a log found long dead keeps its true time)
                            life.lost_since if life.state == LOST and life.lost_since is not None else now,
                            now,
                            life.run_id,
                            None,
                            life.run_start if life.state == SCHEDULED else None,
                            life.schedule_seconds if life.state == SCHEDULED else None,
                        )
                    )
            elif known is not None and life.run_id != known.run_id:  # a later run runs: the lasting state ends
                changed = True
                del self._entries[life.query_id]
                self._unsaved[life.query_id] = known._replace(status=life.state, since=now, updated=now, run_id=life.run_id)
        if changed:
            self._bound()
            self.publish()

    # --- once a round ---------------------------------------------------------------------------------
    def round(self) -> None:
        """Write what changed, read retirements and forget expired states every ``SYNC_SECONDS``, publish."""
        now = self._clock()
        if now >= self._last_sync + self.sync_seconds:
            self._last_sync = now
            cutoff = now - self.retention
            for query_id in [q for q, r in self._entries.items() if r.since < cutoff]:
                del self._entries[query_id]
            self._sync(now, cutoff)
        elif self._unsaved:
            self._write()
        self.publish()

    def publish(self) -> None:
        """Replace the exported tuple (scrapes read it from other threads: one reference, swapped whole)."""
        self.exported = tuple(r for r in self._entries.values() if r.status in LASTING)

    def close(self) -> None:
        """Write what is left and close the history connection."""
        if self._unsaved:
            self._write()
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    # --- internals ------------------------------------------------------------------------------------
    def _put(self, row: QueryStatusRow) -> None:
        self._entries[row.query_id] = self._unsaved[row.query_id] = row

    def _bound(self) -> None:
        over = len(self._entries) - self.max_queries
        if over > 0:
            for row in sorted(self._entries.values(), key=lambda r: r.since)[:over]:
                del self._entries[row.query_id]
                self._unsaved.pop(row.query_id, None)
            self.dropped += over
            log.warning(
                "spark-state-observer: more than %d lasting query states (query_status_max_queries): the %d oldest forgotten",
                self.max_queries,
                over,
            )

    def _sync(self, now: float, cutoff: float) -> None:
        """Write, forget the history's expired rows, take retirements. A row whose ``since`` is ahead of this clock (a
        writer whose clock runs fast) is written back with ``since`` now, so that it expires too."""
        if self._history is None:
            self._unsaved.clear()
            return
        if not self._write():
            return
        try:
            backend = self._open()
            query_status.delete_before(backend, cutoff)
            rows = query_status.load(backend)
            query_status.save(backend, [r for r in query_status.bring_back(rows, now) if r not in rows])
            for row in query_status.bring_back(rows, now):
                known = self._entries.get(row.query_id)
                retired = row.status == RETIRED and known is not None and known.status in LASTING and row.retired_run == known.run_id
                if retired and known is not None and row.updated >= known.updated:
                    self._entries[row.query_id] = row  # retired by `spark-state-observer retire`
        except HistoryError as exc:
            self._failed(exc)

    def _write(self) -> bool:
        if self._history is None:
            self._unsaved.clear()
            return True
        rows = list(self._unsaved.values())
        try:
            query_status.save(self._open(), rows)
        except HistoryError as exc:
            self._failed(exc)
            return False
        for row in rows:
            if self._unsaved.get(row.query_id) is row:
                del self._unsaved[row.query_id]
        if self._failing:
            self._failing = False
            log.info("spark-state-observer: query states written to the history again")
        return True

    def _open(self) -> Backend:
        if self._backend is None:
            assert self._history is not None
            self._backend = open_backend(self._history)
        return self._backend

    def _failed(self, exc: Exception) -> None:
        self._on_failure()
        if not self._failing:
            self._failing = True
            log.warning("spark-state-observer: query states not written to the history (retried each round): %s", exc)
        if self._backend is not None:  # a broken connection is opened again next time
            try:
                self._backend.close()
            finally:
                self._backend = None
