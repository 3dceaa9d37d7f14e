"""The history database's schema, as an ordered list of migrations shared by SQLite and PostgreSQL.

Each migration is written once with ``{real}``, ``{int}``, ``{serial}``, ``{clustered}`` and
``{batches_by_time}`` for what the two dialects spell or do differently (``render``). On SQLite ``PRAGMA user_version`` holds the number applied
(``migrate`` below); PostgreSQL keeps it in a table (``spark_state_observer.history.postgres``). Opening a database
applies the missing ones, so an older history is upgraded in place and a newer one is refused rather
than misread.
"""

from __future__ import annotations

import re
import sqlite3

MIGRATIONS: tuple[str, ...] = (
    # 1: the first schema
    """
    CREATE TABLE queries (
        query_id TEXT PRIMARY KEY, name TEXT, first_seen {real}, last_seen {real}
    );
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, query_id TEXT NOT NULL, started {real}, last_seen {real},
        ended {real}, outcome TEXT, exception TEXT
    );
    CREATE INDEX runs_query ON runs (query_id, started);
    CREATE TABLE batches (
        query_id TEXT NOT NULL, run_id TEXT NOT NULL, batch_id {int} NOT NULL, ts {real} NOT NULL,
        duration_ms {real}, input_rows {real}, input_rps {real}, processed_rps {real}, watermark {real},
        state_rows {real}, state_memory_bytes {real}, durations TEXT, progress TEXT,
        PRIMARY KEY (query_id, run_id, batch_id)
    );
    CREATE INDEX batches_query_ts ON batches (query_id, ts);
    CREATE TABLE operators (
        query_id TEXT NOT NULL, run_id TEXT NOT NULL, batch_id {int} NOT NULL, ts {real} NOT NULL,
        op_index {int} NOT NULL, op_name TEXT, provider TEXT, rows_total {real}, rows_updated {real},
        rows_removed {real}, rows_dropped_by_watermark {real}, memory_bytes {real}, commit_ms {real},
        store_instances {real}, shuffle_partitions {real},
        PRIMARY KEY (query_id, run_id, batch_id, op_index)
    );
    CREATE INDEX operators_query_ts ON operators (query_id, ts);
    CREATE TABLE partitions (
        query_id TEXT NOT NULL, run_id TEXT NOT NULL, batch_id {int} NOT NULL, ts {real} NOT NULL,
        op_index {int} NOT NULL, partition {int} NOT NULL, store TEXT NOT NULL, snapshot_version {real},
        PRIMARY KEY (query_id, run_id, batch_id, op_index, partition, store)
    );
    CREATE INDEX partitions_query_ts ON partitions (query_id, ts);
    CREATE TABLE events (
        id {serial}, query_id TEXT NOT NULL, run_id TEXT, ts {real} NOT NULL,
        kind TEXT NOT NULL, attributes TEXT
    );
    CREATE INDEX events_query_ts ON events (query_id, ts);
    """,
    # 2: application identity on every row, so many applications share one database (NULL on older rows)
    """
    ALTER TABLE queries ADD COLUMN app TEXT;
    ALTER TABLE queries ADD COLUMN app_labels TEXT;
    ALTER TABLE queries ADD COLUMN app_id TEXT;
    ALTER TABLE runs ADD COLUMN app TEXT;
    ALTER TABLE runs ADD COLUMN app_labels TEXT;
    ALTER TABLE runs ADD COLUMN app_id TEXT;
    ALTER TABLE batches ADD COLUMN app TEXT;
    ALTER TABLE batches ADD COLUMN app_labels TEXT;
    ALTER TABLE batches ADD COLUMN app_id TEXT;
    ALTER TABLE events ADD COLUMN app TEXT;
    ALTER TABLE events ADD COLUMN app_labels TEXT;
    ALTER TABLE events ADD COLUMN app_id TEXT;
    ALTER TABLE operators ADD COLUMN app TEXT;
    ALTER TABLE operators ADD COLUMN app_id TEXT;
    ALTER TABLE partitions ADD COLUMN app TEXT;
    ALTER TABLE partitions ADD COLUMN app_id TEXT;
    CREATE INDEX queries_app ON queries (app);
    """,
    # 3: where each state partition ran per batch, its size and, when it moved, from where and at what cost
    # (spark_state_observer.placement.tracker; sizes and load times only from event logs, NULL from live polling)
    """
    CREATE TABLE placements (
        query_id TEXT NOT NULL, run_id TEXT NOT NULL, batch_id {int} NOT NULL, ts {real} NOT NULL,
        op_index {int} NOT NULL, partition {int} NOT NULL, executor TEXT, host TEXT, rows_total {real},
        memory_bytes {real}, load_seconds {real}, replay_seconds {real}, changelog_files {real},
        moved_from TEXT, cause TEXT, app TEXT, app_id TEXT,
        PRIMARY KEY (query_id, run_id, batch_id, op_index, partition)
    );
    CREATE INDEX placements_query_ts ON placements (query_id, ts);
    """,
    # 4: operator and partition rows kept in (query, time) order in one B-tree (SQLite: WITHOUT ROWID; PostgreSQL:
    # the primary key is the one index): one structure written per row instead of three, and the browser's
    # reads (a query's time range) are range scans of it. ts is part of the key; a batch's rows share its ts,
    # so the key is as unique as (query, run, batch, ...) was (spark_state_observer.history.rows.KEYS). On SQLite the batches'
    # (query, ts) index also holds every column the browser's batch reads take but the raw progress, so those
    # reads never touch the table's pages (each holds several 4 kB progress documents)
    """
    CREATE TABLE operators_v4 (
        query_id TEXT NOT NULL, run_id TEXT NOT NULL, batch_id {int} NOT NULL, ts {real} NOT NULL,
        op_index {int} NOT NULL, op_name TEXT, provider TEXT, rows_total {real}, rows_updated {real},
        rows_removed {real}, rows_dropped_by_watermark {real}, memory_bytes {real}, commit_ms {real},
        store_instances {real}, shuffle_partitions {real}, app TEXT, app_id TEXT,
        PRIMARY KEY (query_id, ts, run_id, batch_id, op_index)
    ){clustered};
    INSERT INTO operators_v4 SELECT query_id, run_id, batch_id, ts, op_index, op_name, provider, rows_total, rows_updated,
        rows_removed, rows_dropped_by_watermark, memory_bytes, commit_ms, store_instances, shuffle_partitions, app, app_id
        FROM operators ORDER BY query_id, ts, run_id, batch_id, op_index;
    DROP TABLE operators;
    ALTER TABLE operators_v4 RENAME TO operators;
    CREATE TABLE partitions_v4 (
        query_id TEXT NOT NULL, run_id TEXT NOT NULL, batch_id {int} NOT NULL, ts {real} NOT NULL,
        op_index {int} NOT NULL, partition {int} NOT NULL, store TEXT NOT NULL, snapshot_version {real}, app TEXT, app_id TEXT,
        PRIMARY KEY (query_id, ts, run_id, batch_id, op_index, partition, store)
    ){clustered};
    INSERT INTO partitions_v4 SELECT query_id, run_id, batch_id, ts, op_index, partition, store, snapshot_version, app, app_id
        FROM partitions ORDER BY query_id, ts, run_id, batch_id, op_index, partition, store;
    DROP TABLE partitions;
    ALTER TABLE partitions_v4 RENAME TO partitions;
    {batches_by_time}
    """,
    # 5: each query's lasting lifecycle state (spark_state_observer.history.query_status): a failed or crash-looping query
    # outlives its application, a watcher started again restores it, and a retirement is recorded here
    """
    CREATE TABLE query_status (
        query_id TEXT PRIMARY KEY, name TEXT, app TEXT, app_labels TEXT, app_id TEXT, status TEXT NOT NULL,
        since {real} NOT NULL, updated {real} NOT NULL, run_id TEXT, retired_run TEXT
    );
    """,
    # 6: a query on a schedule lasts too (waiting for its next run): when its latest run started and its interval
    """
    ALTER TABLE query_status ADD COLUMN run_start {real};
    ALTER TABLE query_status ADD COLUMN schedule_seconds {real};
    """,
    # 7: each state partition's bytes (RocksDB SST files) beside its rows and memory: skew where the bytes are
    """
    ALTER TABLE placements ADD COLUMN sst_bytes {real};
    """,
)


class SchemaError(RuntimeError):
    """The file is not a history database this version can use."""


BATCH_READ_COLUMNS = "query_id, ts, run_id, batch_id, duration_ms, input_rows, input_rps, processed_rps, watermark, state_rows, state_memory_bytes, durations"
SQLITE_TYPES = {
    "real": "REAL",
    "int": "INTEGER",
    "serial": "INTEGER PRIMARY KEY AUTOINCREMENT",
    "clustered": " WITHOUT ROWID",
    "batches_by_time": f"DROP INDEX batches_query_ts; CREATE INDEX batches_query_ts ON batches ({BATCH_READ_COLUMNS});",
}
POSTGRES_TYPES = {"real": "DOUBLE PRECISION", "int": "BIGINT", "serial": "BIGSERIAL PRIMARY KEY", "clustered": "", "batches_by_time": ""}


def render(number: int, types: dict[str, str]) -> str:
    """Migration ``number`` (0-based) in one dialect."""
    return MIGRATIONS[number].format(**types)


def column_types() -> dict[str, str]:
    """Each column's type as the migrations write it (``{real}``, ``{int}`` or ``TEXT``): a name has one type in
    every table. PostgreSQL's binary ``COPY`` sends each value in its column's type."""
    types: dict[str, str] = {}
    for migration in MIGRATIONS:
        for name, kind in re.findall(r"(\w+) (\{real\}|\{int\}|TEXT)", migration):
            if types.setdefault(name, kind) != kind:
                raise SchemaError(f"column {name} is {types[name]} in one table and {kind} in another")
    return types


def newer_error(version: int) -> SchemaError:
    return SchemaError(
        f"history schema version {version} is newer than this observer knows ({len(MIGRATIONS)}); upgrade spark-state-observer"
    )


def migrate(conn: sqlite3.Connection) -> int:
    """Bring ``conn``'s database to the newest schema; returns the version it is at.

    The version is read again under the write lock (``BEGIN IMMEDIATE``), so writers opening a new file
    at the same moment apply each migration once: the others wait (busy timeout), then find it done.
    """
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise newer_error(version)
    if version == len(MIGRATIONS):
        return version
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise newer_error(version)
        for number in range(version, len(MIGRATIONS)):
            for statement in render(number, SQLITE_TYPES).split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite has already rolled back after some errors (a full disk)
            conn.execute("ROLLBACK")
        raise
    return len(MIGRATIONS)
