"""The history database's schema, as an ordered list of migrations.

``PRAGMA user_version`` holds the number of migrations applied; opening a database applies the missing
ones in one transaction each, so an older history file is upgraded in place and a newer one is refused
rather than misread.
"""

from __future__ import annotations

import sqlite3

MIGRATIONS: tuple[str, ...] = (
    # 1: the first schema
    """
    CREATE TABLE queries (
        query_id TEXT PRIMARY KEY, name TEXT, first_seen REAL, last_seen REAL
    );
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, query_id TEXT NOT NULL, started REAL, last_seen REAL,
        ended REAL, outcome TEXT, exception TEXT
    );
    CREATE INDEX runs_query ON runs (query_id, started);
    CREATE TABLE batches (
        query_id TEXT NOT NULL, run_id TEXT NOT NULL, batch_id INTEGER NOT NULL, ts REAL NOT NULL,
        duration_ms REAL, input_rows REAL, input_rps REAL, processed_rps REAL, watermark REAL,
        state_rows REAL, state_memory_bytes REAL, durations TEXT, progress TEXT,
        PRIMARY KEY (query_id, run_id, batch_id)
    );
    CREATE INDEX batches_query_ts ON batches (query_id, ts);
    CREATE TABLE operators (
        query_id TEXT NOT NULL, run_id TEXT NOT NULL, batch_id INTEGER NOT NULL, ts REAL NOT NULL,
        op_index INTEGER NOT NULL, op_name TEXT, provider TEXT, rows_total REAL, rows_updated REAL,
        rows_removed REAL, rows_dropped_by_watermark REAL, memory_bytes REAL, commit_ms REAL,
        store_instances REAL, shuffle_partitions REAL,
        PRIMARY KEY (query_id, run_id, batch_id, op_index)
    );
    CREATE INDEX operators_query_ts ON operators (query_id, ts);
    CREATE TABLE partitions (
        query_id TEXT NOT NULL, run_id TEXT NOT NULL, batch_id INTEGER NOT NULL, ts REAL NOT NULL,
        op_index INTEGER NOT NULL, partition INTEGER NOT NULL, store TEXT NOT NULL, snapshot_version REAL,
        PRIMARY KEY (query_id, run_id, batch_id, op_index, partition, store)
    );
    CREATE INDEX partitions_query_ts ON partitions (query_id, ts);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT, query_id TEXT NOT NULL, run_id TEXT, ts REAL NOT NULL,
        kind TEXT NOT NULL, attributes TEXT
    );
    CREATE INDEX events_query_ts ON events (query_id, ts);
    """,
)


class SchemaError(RuntimeError):
    """The file is not a history database this version can use."""


def migrate(conn: sqlite3.Connection) -> int:
    """Bring ``conn``'s database to the newest schema; returns the version it is at."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise SchemaError(f"history schema version {version} is newer than this observer knows ({len(MIGRATIONS)}); upgrade spark-state-observer")
    for number in range(version, len(MIGRATIONS)):
        with conn:
            conn.executescript("BEGIN;" + MIGRATIONS[number] + f"PRAGMA user_version = {number + 1};")
    return len(MIGRATIONS)
