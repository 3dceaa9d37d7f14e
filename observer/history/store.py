"""Writing the history: batched inserts, WAL mode, retention, and failures that cost nothing else.

Every failure (locked, read-only, corrupt or full database) becomes a ``HistoryError`` whose message
says which and what to do; the rows of that flush are counted as dropped, and the rows already
committed stay where they are. A locked database is retried a few times with backoff first: another
writer's transaction (a second job, a ``replay --history``) usually ends within a second.

Retention is relative to the newest data this store has written, not to the clock: ``max_age`` is how
much of a job's own past is kept. A live job writes data of now, so nothing changes there; a replay of
event logs older than ``max_age`` keeps its last ``max_age`` of them instead of deleting everything right
after writing it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.parse
from typing import Any

from observer.history.schema import SchemaError, migrate
from observer.model.events import Event, QueryIdle, QueryProgress, QueryStarted, QueryTerminated
from observer.model.fields import SNAPSHOT_LAST_UPLOADED
from observer.model.kinds import CLEAN, EXCEPTION

LOCKED_RETRY_SECONDS = (0.05, 0.2, 0.5)  # pauses between attempts at a locked database (each waits its busy timeout too)


def _locked(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


class HistoryError(RuntimeError):
    """The history database cannot be written (or opened); the message says why."""


def explain(exc: BaseException, path: str) -> str:
    """A message an operator can act on, from SQLite's terse error."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return f"history database {path} is locked by another process; rows of this flush are dropped, later flushes retry"
    if "readonly" in text or "read-only" in text or "attempt to write" in text:
        return f"history database {path} is read-only; give the job a writable history_path"
    if "disk is full" in text or "database or disk is full" in text:
        return f"history database {path}: the disk is full; free space or lower history_max_bytes"
    if "not a database" in text or "malformed" in text or "file is encrypted" in text:
        return f"history database {path} is corrupt or not a history file; move it away to start a new one"
    if "unable to open" in text:
        return f"history database {path} cannot be opened (missing directory or no permission)"
    return f"history database {path}: {text}"


def connect(path: str, readonly: bool = False, timeout: float = 0.5) -> sqlite3.Connection:
    """Open (and for writers, migrate) the history database."""
    try:
        if readonly:
            if not os.path.exists(path):
                raise HistoryError(f"history database {path} does not exist (run the job with the observer attached, or `replay --history`)")
            uri = f"file:{urllib.parse.quote(os.path.abspath(path))}"  # a '?' or '#' in a path is not the URI's
            try:
                conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout, check_same_thread=False)
                conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            except sqlite3.OperationalError:
                # a WAL database on read-only media cannot create its shared-memory file: read it as immutable
                conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=timeout, check_same_thread=False)
        else:
            parent = os.path.dirname(os.path.abspath(path))
            os.makedirs(parent, exist_ok=True)
            conn = sqlite3.connect(path, timeout=timeout, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA cache_size=-65536")  # 64 MiB: index pages of large histories stay cached
            migrate(conn)
        return conn
    except (sqlite3.Error, OSError, SchemaError) as exc:
        raise HistoryError(explain(exc, path)) from None


class HistoryStore:
    """Turns model events into rows and writes them in one transaction per flush."""

    def __init__(self, path: str, max_age_seconds: float = 7 * 86400, max_bytes: float = 1 << 30) -> None:
        self.path = path
        self.max_age = max_age_seconds
        self.max_bytes = max_bytes
        self.conn = connect(path)
        self._rows: dict[str, list[tuple]] = {"batches": [], "operators": [], "partitions": [], "events": []}
        self._queries: dict[str, tuple] = {}
        self._runs: dict[str, list] = {}
        self.pending = 0
        self.newest: float | None = None  # the newest time written, which retention counts back from

    # --- turning events into rows ---------------------------------------------------------------------
    def add_event(self, event: Event, received_at: float) -> None:
        """Rows for batches, operators, partitions and runs; lifecycle events arrive as signals."""
        if isinstance(event, QueryProgress):
            self._progress(event, received_at)
        elif isinstance(event, QueryStarted):
            ts = event.timestamp or received_at
            self._query(event.query_id, event.name, ts)
            self._run(event.query_id, event.run_id, ts)[1] = ts
        elif isinstance(event, QueryIdle):
            ts = event.timestamp or received_at
            self._run(event.query_id, event.run_id, ts)[2] = ts
        elif isinstance(event, QueryTerminated):
            ts = received_at
            run = self._run(event.query_id, event.run_id, ts)
            run[3], run[4], run[5] = ts, EXCEPTION if event.exception else CLEAN, event.exception

    def add_signal(self, kind: str, query_id: str, run_id: str | None, ts: float, attributes: dict[str, Any]) -> None:
        self.add_row("events", (query_id, run_id, ts, kind, json.dumps(attributes, default=str)))

    def add_row(self, table: str, row: tuple) -> None:
        self._rows[table].append(row)
        self.pending += 1

    def _query(self, query_id: str, name: str | None, ts: float) -> None:
        known = self._queries.get(query_id)
        self._queries[query_id] = (query_id, name or (known[1] if known else None), known[2] if known else ts, ts)
        self.pending += 1

    def _run(self, query_id: str, run_id: str, ts: float) -> list:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = [query_id, None, ts, None, None, None]  # query, started, last_seen, ended, outcome, exception
            self.pending += 1
        run[2] = max(run[2] or ts, ts)
        return run

    def _progress(self, p: QueryProgress, received_at: float) -> None:
        ts = p.timestamp or received_at
        self._query(p.query_id, p.name, ts)
        run = self._run(p.query_id, p.run_id, ts)
        if run[1] is None:
            run[1] = ts
        rows = [o.rows_total for o in p.operators if o.rows_total is not None]
        memory = [o.memory_bytes for o in p.operators if o.memory_bytes is not None]
        self.add_row("batches", (p.query_id, p.run_id, p.batch_id, ts, p.batch_duration_ms, p.input_rows,
                                 p.input_rows_per_second, p.processed_rows_per_second, p.watermark,
                                 sum(rows) if rows else None, sum(memory) if memory else None,
                                 json.dumps(dict(p.duration_ms)), p.raw_text or json.dumps(p.raw, separators=(",", ":"))))
        for op in p.operators:
            self.add_row("operators", (p.query_id, p.run_id, p.batch_id, ts, op.index, op.name, op.provider, op.rows_total,
                                       op.rows_updated, op.rows_removed, op.rows_dropped_by_watermark, op.memory_bytes,
                                       op.commit_ms, op.store_instances, op.shuffle_partitions))
            for m in op.instances:
                if m.prefix == SNAPSHOT_LAST_UPLOADED:
                    self.add_row("partitions", (p.query_id, p.run_id, p.batch_id, ts, op.index, m.partition, m.store, m.value))

    # --- writing --------------------------------------------------------------------------------------
    def flush(self) -> int:
        """Write everything pending in one transaction; returns the rows written. Raises HistoryError."""
        if not self.pending:
            return 0
        rows, queries, runs, n = self._rows, list(self._queries.values()), self._runs, self.pending
        self._rows = {k: [] for k in rows}
        self._queries, self._runs, self.pending = {}, {}, 0
        for attempt, pause in enumerate(LOCKED_RETRY_SECONDS + (None,)):
            try:
                self._write(rows, queries, runs)
                break
            except (sqlite3.Error, ValueError, OverflowError) as exc:  # ValueError: text SQLite cannot encode
                if pause is None or not isinstance(exc, sqlite3.Error) or not _locked(exc):
                    raise HistoryError(explain(exc, self.path) + f" ({n} rows dropped"
                                       + (f" after {attempt + 1} attempts)" if attempt else ")")) from None
                time.sleep(pause)
        times = [r[3] for r in rows["batches"]] + [r[2] for r in rows["events"]]
        if times:
            self.newest = max(times if self.newest is None else [*times, self.newest])
        return n

    def _write(self, rows: dict[str, list[tuple[Any, ...]]], queries: list[tuple[Any, ...]], runs: dict[str, list[Any]]) -> None:
        """One transaction: all of a flush's rows, or none of them."""
        with self.conn:
            c = self.conn
            c.executemany("INSERT INTO queries VALUES (?,?,?,?) ON CONFLICT(query_id) DO UPDATE SET "
                          "name=COALESCE(excluded.name, name), last_seen=MAX(last_seen, excluded.last_seen)", queries)
            c.executemany("INSERT INTO runs VALUES (?,?,?,?,?,?,?) ON CONFLICT(run_id) DO UPDATE SET "
                          "started=COALESCE(started, excluded.started), last_seen=MAX(COALESCE(last_seen,0), excluded.last_seen), "
                          "ended=COALESCE(excluded.ended, ended), outcome=COALESCE(excluded.outcome, outcome), "
                          "exception=COALESCE(excluded.exception, exception)",
                          [(run_id, *values) for run_id, values in runs.items()])
            c.executemany("INSERT OR REPLACE INTO batches VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows["batches"])
            c.executemany("INSERT OR REPLACE INTO operators VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows["operators"])
            c.executemany("INSERT OR REPLACE INTO partitions VALUES (?,?,?,?,?,?,?,?)", rows["partitions"])
            c.executemany("INSERT INTO events (query_id, run_id, ts, kind, attributes) VALUES (?,?,?,?,?)", rows["events"])

    def enforce_retention(self, now: float | None = None) -> None:
        """Delete what is older than ``max_age`` before the newest data written (or ``now``, if earlier),
        then the oldest batches while the file is over ``max_bytes``."""
        now = time.time() if now is None else now
        cutoff = (now if self.newest is None else min(now, self.newest)) - self.max_age
        try:
            with self.conn:
                for table in ("batches", "operators", "partitions", "events"):
                    self.conn.execute(f"DELETE FROM {table} WHERE ts < ?", (cutoff,))
            for _ in range(20):
                pages, size = (self.conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size"))
                free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
                if (pages - free) * size <= self.max_bytes:
                    break
                oldest = self.conn.execute("SELECT ts FROM batches ORDER BY ts LIMIT 1 OFFSET "
                                           "(SELECT COUNT(*) / 10 FROM batches)").fetchone()
                if oldest is None:
                    break
                with self.conn:
                    for table in ("batches", "operators", "partitions", "events"):
                        self.conn.execute(f"DELETE FROM {table} WHERE ts < ?", (oldest[0],))
        except sqlite3.Error as exc:
            raise HistoryError(explain(exc, self.path)) from None

    def close(self) -> None:
        self.conn.close()

