"""The shared history on PostgreSQL (psycopg 3): many writers, one schema, short timeouts.

Many listeners and watchers write one database at once. Each flush is one transaction: queries and
runs are upserted in key order (so two writers touching the same query cannot deadlock), fact rows and
signal events are ``COPY``'d straight into their tables; when a batch is written again (a replayed log,
a restarted watcher) that table's ``COPY`` is undone to a savepoint and its rows go through a
per-session staging table and one ``INSERT ... ON CONFLICT`` instead, so the newer row replaces the
older as on SQLite. Migrations run under a transaction-scoped advisory lock, so writers starting
together apply each migration once. The connection is made lazily and with short timeouts: the caller
of ``write`` is the background writer thread (``spark_state_observer.history.writer``), never the job.
"""

from __future__ import annotations

import operator
from contextlib import contextmanager
from typing import Any, ClassVar, Iterator

import psycopg
from psycopg import conninfo

from spark_state_observer.history.backend import (
    RESTAMPED_TABLES,
    Backend,
    HistoryDataError,
    HistoryError,
    restamp_params,
    restamp_sql,
    upsert_sql,
)
from spark_state_observer.history.rows import COLUMNS, KEYS, PendingRows
from spark_state_observer.history.schema import MIGRATIONS, POSTGRES_TYPES, column_types, newer_error, render
from spark_state_observer.history.url import HistoryTarget, scrub

CONNECT_TIMEOUT_SECONDS = 5
STATEMENT_TIMEOUT_MS = 60_000
MIGRATION_LOCK = 0x5350_4B48_0001  # advisory lock keys of this project ("SPKH")
RETENTION_LOCK = 0x5350_4B48_0002
STAGED = ("batches", "operators", "partitions", "placements")
# binary COPY: numbers travel as 8 bytes instead of decimal text (no float formatting in the writer, no parsing
# on the server: a fifth less server CPU and a third less writer CPU per progress event, bench/history_pg.py)
_COPY_TYPES = {"{real}": "float8", "{int}": "int8", "TEXT": "text"}
_DEFAULTS = {
    "connect_timeout": str(CONNECT_TIMEOUT_SECONDS),
    "application_name": "spark-state-observer",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "3",
    "keepalives_count": "3",
    "tcp_user_timeout": str(CONNECT_TIMEOUT_SECONDS * 4 * 1000),  # a write stuck on a dead peer fails, not hangs
    "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS} -c lock_timeout={STATEMENT_TIMEOUT_MS // 2}",
}


# refused values: text with NUL or a lone surrogate, numbers out of range, NULL in a key (raised by the driver's
# dumpers as Python errors, or by the server as data or integrity errors)
_REFUSED = (psycopg.DataError, psycopg.IntegrityError, ValueError, OverflowError, TypeError)


def explain(exc: BaseException, target: HistoryTarget) -> str:
    """A message an operator can act on, from libpq's; never with the password in it."""
    text = str(exc).strip()
    where = f"history database {target.display}"
    lower = text.lower()
    if "password authentication failed" in lower or "no password supplied" in lower:
        message = f"{where} refused the password (check the user and password of the history URL); rows stay buffered and are retried"
    elif "timeout expired" in lower or "timed out" in lower or isinstance(exc, psycopg.errors.QueryCanceled):
        message = f"{where} did not answer in time ({text.splitlines()[0]}); rows stay buffered and are retried"
    elif "connection refused" in lower or "could not connect" in lower or "no route to host" in lower:
        message = f"{where} is not reachable (is the server running?); rows stay buffered and are retried"
    elif "does not exist" in lower and "database" in lower:
        message = f"{where}: the database does not exist; create it (CREATE DATABASE ...) or fix the URL"
    elif isinstance(exc, psycopg.errors.InsufficientPrivilege):
        message = f"{where}: the user may not create or write the history tables ({text.splitlines()[0]})"
    elif isinstance(exc, psycopg.OperationalError):
        message = f"{where}: connection failed or was lost ({' '.join(text.split())}); rows stay buffered and are retried"
    else:
        message = f"{where}: {' '.join(text.split())}"
    return scrub(message, target.location)


class PostgresBackend(Backend):
    """A PostgreSQL history. Connects on first use; after a failure the next call reconnects."""

    kind = "postgresql"
    size_passes = 1  # deleted rows free space only after (auto)vacuum: one estimated cut per enforcement
    _UPSERT: ClassVar[dict[str, str]] = {t: upsert_sql(t, "GREATEST").replace("?", "%s") for t in ("queries", "runs")}

    def __init__(self, target: HistoryTarget, readonly: bool = False) -> None:
        super().__init__(target)
        self.readonly = readonly
        self.conn: psycopg.Connection | None = None
        try:
            params = conninfo.conninfo_to_dict(target.location)
            for key, value in _DEFAULTS.items():
                params.setdefault(key, value)
            self._conninfo = conninfo.make_conninfo("", **params)
        except psycopg.Error as exc:
            reason = scrub(str(exc).strip(), target.location)
            raise HistoryError(f"history database {target.display}: not a usable PostgreSQL URL ({reason})") from None
        cols = {t: ", ".join(COLUMNS[t]) for t in COLUMNS}
        self._key_of = {t: operator.itemgetter(*(COLUMNS[t].index(c) for c in KEYS[t])) for t in STAGED}
        types = column_types()
        self._types = {t: [_COPY_TYPES[types[c]] for c in COLUMNS[t]] for t in STAGED + ("events",)}
        self._copy = {t: f"COPY stage_{t} ({cols[t]}) FROM STDIN (FORMAT BINARY)" for t in STAGED + ("events",)}
        self._direct = {t: f"COPY {t} ({cols[t]}) FROM STDIN (FORMAT BINARY)" for t in STAGED}
        # a signal row already there (a watcher killed after writing, before saving its positions, reads it
        # again) is not written twice: its query, run, time, kind and attributes are the same
        self._new_events = (
            f"INSERT INTO events ({cols['events']}) SELECT DISTINCT {cols['events']} FROM stage_events s WHERE NOT EXISTS "
            "(SELECT 1 FROM events e WHERE e.query_id = s.query_id AND e.ts = s.ts AND e.kind = s.kind "
            "AND e.run_id IS NOT DISTINCT FROM s.run_id AND e.attributes IS NOT DISTINCT FROM s.attributes)"
        )
        self._merge = {}
        for t in STAGED:
            key = ", ".join(KEYS[t])
            rest = ", ".join(f"{c}=excluded.{c}" for c in COLUMNS[t] if c not in KEYS[t])
            self._merge[t] = (
                f"INSERT INTO {t} ({cols[t]}) SELECT {cols[t]} FROM stage_{t} ORDER BY {key} ON CONFLICT ({key}) DO UPDATE SET {rest}"
            )

    # --- connection -----------------------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection:
        if self.conn is not None and not self.conn.closed and not self.conn.broken:
            return self.conn
        self.close()
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise HistoryError(explain(exc, self.target)) from None
        try:
            if self.readonly:
                conn.read_only = True
            else:
                self._migrate(conn)
                try:  # the raw progress JSON compresses 3-4x faster with lz4 than with the default pglz
                    conn.execute("SET default_toast_compression = 'lz4'")
                except psycopg.Error:
                    pass  # a server built without lz4 (or before PostgreSQL 14) keeps its default
                for t in STAGED:
                    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS stage_{t} (LIKE {t}) ON COMMIT DELETE ROWS")
                events = ", ".join(COLUMNS["events"])  # not its serial id
                conn.execute(
                    f"CREATE TEMP TABLE IF NOT EXISTS stage_events ON COMMIT DELETE ROWS AS SELECT {events} FROM events WITH NO DATA"
                )
        except HistoryError:
            conn.close()
            raise
        except psycopg.Error as exc:
            conn.close()
            raise HistoryError(explain(exc, self.target)) from None
        self.conn = conn
        return conn

    def _migrate(self, conn: psycopg.Connection) -> None:
        """Apply the missing migrations under an advisory lock held until this transaction ends."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS history_schema (version INTEGER NOT NULL)")
            row = conn.execute("SELECT MAX(version) FROM history_schema").fetchone()
            version = row[0] if row and row[0] is not None else 0
            if version > len(MIGRATIONS):
                raise HistoryError(f"history database {self.target.display}: {newer_error(version)}")
            for number in range(version, len(MIGRATIONS)):
                for statement in render(number, POSTGRES_TYPES).split(";"):
                    if statement.strip():
                        conn.execute(statement)
            if version < len(MIGRATIONS):
                conn.execute("DELETE FROM history_schema")
                conn.execute("INSERT INTO history_schema (version) VALUES (%s)", (len(MIGRATIONS),))

    def _fail(self, exc: BaseException) -> HistoryError:
        if isinstance(exc, psycopg.OperationalError) or (self.conn is not None and self.conn.broken):
            self.close()  # reconnect next time
        return HistoryError(explain(exc, self.target))

    # --- writing --------------------------------------------------------------------------------------
    def write(self, pending: PendingRows) -> None:
        conn = self._connect()
        try:
            with conn.transaction(), conn.cursor() as cur:
                if pending.queries:
                    cur.executemany(self._UPSERT["queries"], sorted(pending.queries.values()))
                if pending.runs:
                    cur.executemany(self._UPSERT["runs"], sorted(pending.run_rows(), key=operator.itemgetter(0)))
                if pending.restamped:
                    for t in RESTAMPED_TABLES:
                        cur.executemany(restamp_sql(t).replace("?", "%s"), restamp_params(pending))
                for t in STAGED:
                    if pending.facts[t]:
                        self._write_facts(conn, cur, t, pending.facts[t])
                if pending.facts["events"]:
                    self._copy_rows(cur, self._copy["events"], pending.facts["events"])
                    cur.execute(self._new_events)
        except _REFUSED as exc:  # a value the server or the driver cannot hold: the rows are at fault, not the server
            if self.conn is not None and self.conn.broken:
                raise self._fail(exc) from None
            raise HistoryDataError(explain(exc, self.target)) from None
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    def _write_facts(self, conn: psycopg.Connection[Any], cur: psycopg.Cursor[Any], table: str, rows: list[tuple[Any, ...]]) -> None:
        """``COPY`` straight into ``table``; if some row is there already (a batch written again: a replayed
        log, a restarted watcher), undo that and merge through the staging table instead, newest row winning."""
        try:
            with conn.transaction():  # a savepoint
                self._copy_rows(cur, self._direct[table], rows)
            return
        except psycopg.errors.UniqueViolation:
            pass
        key = self._key_of[table]
        unique = list({key(r): r for r in rows}.values())  # ON CONFLICT may touch a row once per statement
        self._copy_rows(cur, self._copy[table], unique)
        cur.execute(self._merge[table])

    def _copy_rows(self, cur: psycopg.Cursor[Any], sql: str, rows: list[tuple[Any, ...]]) -> None:
        with cur.copy(sql) as copy:
            copy.set_types(self._types[sql.split()[1].removeprefix("stage_")])
            write = copy.write_row
            for row in rows:
                write(row)

    def execute(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        conn = self._connect()
        try:
            with conn.transaction():
                for sql, params in statements:
                    conn.execute(sql.replace("?", "%s"), params)
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    @contextmanager
    def retention_turn(self) -> Iterator[bool]:
        conn = self._connect()
        try:
            got = bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (RETENTION_LOCK,)).fetchone()[0])  # type: ignore[index]
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        try:
            yield got
        finally:
            if got and self.conn is not None and not self.conn.broken:
                try:
                    self.conn.execute("SELECT pg_advisory_unlock(%s)", (RETENTION_LOCK,))
                except psycopg.Error:
                    self.close()  # a closed session releases its advisory locks

    def used_bytes(self) -> float:
        """Table and index bytes scaled by the share of live rows (dead ones are reused after vacuum)."""
        _, rows = self.rows("""
            SELECT COALESCE(SUM(pg_total_relation_size(s.relid) * CASE WHEN s.n_live_tup + s.n_dead_tup > 0
                   THEN s.n_live_tup::float / (s.n_live_tup + s.n_dead_tup) ELSE 1 END), 0) AS used
            FROM pg_stat_user_tables s
            WHERE s.schemaname = current_schema() AND s.relname IN ('queries', 'runs', 'batches', 'operators', 'partitions', 'events', 'placements')""")
        return float(rows[0][0])

    # --- reading --------------------------------------------------------------------------------------
    def json_number(self, column: str, key: str) -> str:
        return f"CAST(({column}::json ->> '{key}') AS DOUBLE PRECISION)"

    def bucket(self) -> str:
        return "FLOOR((ts - ?) / ?)"

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql.replace("%", "%%").replace("?", "%s"), params)
                return [d.name for d in cur.description or ()], cur.fetchall()
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass
