"""Writing the history: rows built from events, written in one transaction per flush, retention.

``HistoryStore`` is the synchronous front over a backend (``spark_state_observer.history.backend``): SQLite for a
path or ``sqlite:///`` URL, PostgreSQL for a ``postgresql://`` URL. Every failure becomes a
``HistoryError`` whose message says which and what to do; the rows of that flush are dropped, and the
rows already committed stay where they are. The live sink (``spark_state_observer.history.sink``) puts a
background writer in front of PostgreSQL so that the network never blocks the observer.

Retention keeps a window of ``max_age`` ending at the newest data time written, at most ``clock()``
(``retention.window_end`` says why): a replay of a month-old log keeps its rows.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from spark_state_observer.history.backend import Backend, HistoryDataError, HistoryError, open_backend
from spark_state_observer.history.isolate import PartlyWritten, write_isolating
from spark_state_observer.history.retention import RetentionPolicy, window_end
from spark_state_observer.history.rows import PendingRows, RowBuilder
from spark_state_observer.history.sqlite import connect, explain
from spark_state_observer.model.events import Event
from spark_state_observer.model.identity import AppContext

__all__ = ["HistoryError", "HistoryStore", "connect", "explain"]


class HistoryStore:
    """Turns model events into rows and writes them in one transaction per flush."""

    def __init__(
        self,
        path: str,
        max_age_seconds: float = 7 * 86400,
        max_bytes: float = 1 << 30,
        app: AppContext | None = None,
        retention: RetentionPolicy | None = None,
        backend: Backend | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.clock = clock
        self.max_age = max_age_seconds
        self.max_bytes = max_bytes
        self.retention = retention or RetentionPolicy(max_age_seconds)
        self.backend = backend or open_backend(path)
        self.rows = RowBuilder(app)
        self.newest: float | None = None  # the newest time written, which retention counts back from

    @property
    def display(self) -> str:
        """The location as it may be shown (a URL without its password)."""
        return self.backend.display

    @property
    def pending(self) -> int:
        return self.rows.pending.rows

    def add_event(self, event: Event, received_at: float) -> None:
        """Rows for batches, operators, partitions and runs; lifecycle events arrive as signals."""
        self.rows.add_event(event, received_at)

    def add_signal(self, kind: str, query_id: str, run_id: str | None, ts: float, attributes: dict[str, Any]) -> None:
        self.rows.add_signal(kind, query_id, run_id, ts, attributes)

    def add_row(self, table: str, row: tuple[Any, ...]) -> None:
        self.rows.add_row(table, row)

    def take(self) -> PendingRows:
        """The pending rows, for a writer of its own (the store starts a new buffer)."""
        return self.rows.take()

    def flush(self, on_refused: Callable[[PendingRows, str], None] | None = None) -> int:
        """Write everything pending in one transaction; returns the rows written. Raises HistoryError.

        Rows the database refuses (``HistoryDataError``) cost only themselves: the rest is written part by part
        (``isolate.write_isolating``) and the refused parts go to ``on_refused``."""
        pending = self.rows.take()
        if not pending:
            return 0
        try:
            self.backend.write(pending)
        except HistoryDataError:
            refused: list[PendingRows] = []

            def note(part: PendingRows, message: str) -> None:
                refused.append(part)
                if on_refused is not None:
                    on_refused(part, message)

            try:
                write_isolating(self.backend, pending, self._written, note)
            except PartlyWritten as exc:
                raise PartlyWritten(f"{exc} ({exc.rest.rows} rows dropped)", exc.rest) from None
            return pending.rows - sum(p.rows for p in refused)
        except HistoryError as exc:
            raise HistoryError(f"{exc} ({pending.rows} rows dropped)") from None
        self._written(pending)
        return pending.rows

    def _written(self, part: PendingRows) -> None:
        times = [r[3] for r in part.facts["batches"]] + [r[2] for r in part.facts["events"]]
        if times:
            self.newest = max(times if self.newest is None else [*times, self.newest])

    def enforce_retention(self, now: float | None = None) -> None:
        """Delete what is older than its query's age before the newest data written (or ``now``, default
        ``clock()``, if earlier), then the oldest batches while over ``max_bytes``."""
        self.backend.enforce_retention(self.retention, self.max_bytes, window_end(self.newest, self.clock() if now is None else now))

    def close(self) -> None:
        self.backend.close()
