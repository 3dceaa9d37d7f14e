"""The embedded history: one SQLite file in WAL mode, written in one transaction per flush.

A flush only appends to the write-ahead log; copying the log into the file (a checkpoint, with its two
fsyncs) is done by a thread of the backend's own (``Checkpointer``), so the thread that writes, the
observer's worker, neither copies nor waits on the disk. With ``synchronous=NORMAL`` a commit is not
fsynced: a power loss (not a crash of the process) can lose the transactions since the last checkpoint,
at most ``CHECKPOINT_ROWS`` rows or ``CHECKPOINT_SECONDS``; it cannot corrupt the file.

Every failure (locked, read-only, corrupt or full database) becomes a ``HistoryError`` whose message
says which and what to do. Readers open the file read-only (``mode=ro``), so a browser never takes a
write lock from the job.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import urllib.parse
from contextlib import closing
from typing import Any, ClassVar

from spark_state_observer.history.backend import (
    RESTAMPED_TABLES,
    Backend,
    HistoryDataError,
    HistoryError,
    restamp_params,
    restamp_sql,
    upsert_sql,
)
from spark_state_observer.history.rows import COLUMNS, PendingRows
from spark_state_observer.history.schema import SchemaError, migrate
from spark_state_observer.history.url import HistoryTarget


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


MIGRATION_WAIT_SECONDS = 30.0
# a batch row (its raw progress: ~4 kB for two operators) fits a 32 KiB page several times: no overflow page
# per row, and a sixth fewer bytes and a third less CPU per progress event than 4 KiB pages
# (bench/history_bench.py; README "History store")
PAGE_SIZE = 32768
CHECKPOINT_ROWS = 20_000  # rows committed since the last checkpoint that start the next one
CHECKPOINT_SECONDS = 30.0  # ... or this long since it, with anything committed
WAL_LIMIT_BYTES = 256 << 20  # a log this long (checkpoints falling behind a writer that never pauses) is
# restarted by the writer itself, waiting for the checkpoint, so the log stays bounded
log = logging.getLogger("spark_state_observer")
LOCKED_RETRY_SECONDS = (0.05, 0.2, 0.5)  # pauses between attempts at a locked database (each waits its busy timeout too)


_REFUSED = (ValueError, OverflowError, TypeError, sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.DataError)


def _with_event_key(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Signal rows with the parameters of their "not written yet" check (query, time, kind, run, attributes)."""
    return [(*r, r[0], r[2], r[3], r[1], r[4]) for r in rows]


def _locked(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


def connect(path: str, readonly: bool = False, timeout: float = 0.5) -> sqlite3.Connection:
    """Open (and for writers, migrate) the history database."""
    try:
        if readonly:
            if not os.path.exists(path):
                raise HistoryError(
                    f"history database {path} does not exist (run the job with the observer attached, or `replay --history`)"
                )
            uri = f"file:{urllib.parse.quote(os.path.abspath(path))}"  # a '?' or '#' in a path is not the URI's
            try:
                conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout, check_same_thread=False)
                conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            except sqlite3.OperationalError:
                # a WAL database on read-only media cannot create its shared-memory file: read it as immutable
                conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=timeout, check_same_thread=False)
        else:
            conn = _open_writer(path, timeout)
        return conn
    except (sqlite3.Error, OSError, SchemaError, ValueError) as exc:  # ValueError: a path no file system takes
        raise HistoryError(explain(exc, path)) from None


def _open_writer(path: str, timeout: float) -> sqlite3.Connection:
    """Open, switch to WAL and migrate. Writers opening a new file at once contend for it: switching the
    journal mode fails at once with "locked" rather than waiting, so the whole opening is tried again
    for up to ``MIGRATION_WAIT_SECONDS``; once open, a write waits at most ``timeout`` (``write`` retries)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    deadline = time.monotonic() + MIGRATION_WAIT_SECONDS
    pause = 0.02
    while True:
        conn = sqlite3.connect(path, timeout=MIGRATION_WAIT_SECONDS, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # takes effect on a new file only
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA cache_size=-65536")  # 64 MiB: index pages of large histories stay cached
            migrate(conn)
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            if not _locked(exc) or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


def _insert(table: str, verb: str = "INSERT OR REPLACE") -> str:
    cols = COLUMNS[table]
    return f"{verb} INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"


class Checkpointer:
    """Copies the write-ahead log into the database file when asked, on a thread with a connection of its own.

    A passive checkpoint never blocks the writer or readers; a failure (a full disk, a read-only file) is
    logged once and tried again at the next request: the log keeps every committed row meanwhile."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._wake = threading.Event()
        self._stop = False
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="spark-state-observer-history-checkpoint", daemon=True)
        self._thread.start()

    def request(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop:
                break
            try:
                if conn is None:
                    conn = sqlite3.connect(self.path, timeout=MIGRATION_WAIT_SECONDS, check_same_thread=False)
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                self.error = None
            except sqlite3.Error as exc:
                if self.error != str(exc):
                    log.warning("spark-state-observer: history checkpoint: %s", explain(exc, self.path))
                self.error = str(exc)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join()


class SQLiteBackend(Backend):
    """A history file; writers open (and migrate) it at once, readers per read."""

    kind = "sqlite"
    _UPSERT: ClassVar[dict[str, str]] = {t: upsert_sql(t, "MAX") for t in ("queries", "runs")}
    _RESTAMP: ClassVar[list[str]] = [restamp_sql(t) for t in RESTAMPED_TABLES]
    _FACTS: ClassVar[dict[str, str]] = {
        "batches": _insert("batches"),
        "operators": _insert("operators"),
        "partitions": _insert("partitions"),
        # a signal row already there (a watcher killed after writing, before saving its positions, reads it
        # again) is not written twice: its query, run, time, kind and attributes are the same
        "events": f"INSERT INTO events ({', '.join(COLUMNS['events'])}) SELECT {', '.join('?' for _ in COLUMNS['events'])} "
        "WHERE NOT EXISTS (SELECT 1 FROM events WHERE query_id = ? AND ts = ? AND kind = ? AND run_id IS ? AND attributes IS ?)",
        "placements": _insert("placements"),
    }

    def __init__(self, target: HistoryTarget, readonly: bool = False) -> None:
        super().__init__(target)
        self.path = target.location
        self.readonly = readonly
        self.conn: sqlite3.Connection | None = None if readonly else connect(self.path)
        self.checkpointer: Checkpointer | None = None
        self._uncheckpointed_rows = 0
        self._last_checkpoint = time.monotonic()
        if self.conn is not None:
            self.conn.execute("PRAGMA wal_autocheckpoint=0")  # the Checkpointer's job
            self.checkpointer = Checkpointer(self.path)

    def _writer(self) -> sqlite3.Connection:
        if self.conn is None:
            raise HistoryError(f"history database {self.path} was opened read-only")
        return self.conn

    def write(self, pending: PendingRows) -> None:
        """One transaction; a locked database (another writer's transaction) is tried again a few times."""
        c = self._writer()
        for attempt, pause in enumerate((*LOCKED_RETRY_SECONDS, None)):
            try:
                with c:
                    c.executemany(self._UPSERT["queries"], list(pending.queries.values()))
                    c.executemany(self._UPSERT["runs"], pending.run_rows())
                    if pending.restamped:
                        for sql in self._RESTAMP:
                            c.executemany(sql, restamp_params(pending))
                    for table, sql in self._FACTS.items():
                        c.executemany(sql, pending.facts[table] if table != "events" else _with_event_key(pending.facts[table]))
                self._committed(pending.rows)
                return
            except _REFUSED as exc:  # a value SQLite cannot hold (text it cannot encode, an integer beyond 64 bits, NULL in a key)
                raise HistoryDataError(explain(exc, self.path)) from None
            except sqlite3.Error as exc:
                if pause is None or not _locked(exc):
                    raise HistoryError(explain(exc, self.path) + (f" (after {attempt + 1} attempts)" if attempt else "")) from None
                time.sleep(pause)

    def _committed(self, rows: int) -> None:
        """Ask for a checkpoint after enough rows or time; restart an overlong log here (see WAL_LIMIT_BYTES)."""
        self._uncheckpointed_rows += rows
        now = time.monotonic()
        if self._uncheckpointed_rows < CHECKPOINT_ROWS and now - self._last_checkpoint < CHECKPOINT_SECONDS:
            return
        self._uncheckpointed_rows, self._last_checkpoint = 0, now
        assert self.checkpointer is not None and self.conn is not None
        try:
            too_long = os.path.getsize(self.path + "-wal") > WAL_LIMIT_BYTES
        except OSError:
            too_long = False
        if too_long:
            try:
                self.conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
            except sqlite3.Error as exc:
                log.warning("spark-state-observer: history checkpoint: %s", explain(exc, self.path))
        else:
            self.checkpointer.request()

    def execute(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        c = self._writer()
        try:
            with c:
                for sql, params in statements:
                    c.execute(sql, params)
        except sqlite3.Error as exc:
            raise HistoryError(explain(exc, self.path)) from None

    def used_bytes(self) -> float:
        c = self._writer()
        pages, size, free = (c.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size", "freelist_count"))
        return float((pages - free) * size)

    def json_number(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    def bucket(self) -> str:
        return "CAST((ts - ?) / ? AS INTEGER)"  # ts >= origin, so truncation is floor

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        if self.conn is not None:
            return _read(self.conn, sql, params, self.path)
        with closing(connect(self.path, readonly=True)) as conn:
            return _read(conn, sql, params, self.path)

    def close(self) -> None:
        """Stop the checkpointer, then close the writer: SQLite checkpoints the rest of the log then."""
        if self.checkpointer is not None:
            self.checkpointer.close()
            self.checkpointer = None
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _read(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...], path: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    try:
        cur = conn.execute(sql, params)
        return [d[0] for d in cur.description or ()], cur.fetchall()
    except sqlite3.Error as exc:
        raise HistoryError(explain(exc, path)) from None
