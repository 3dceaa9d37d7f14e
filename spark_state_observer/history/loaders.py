"""pandas loaders over the history, for the browser and notebooks; SQLite or PostgreSQL alike.

``path`` is any history location (``spark_state_observer.history.url``). Each loader opens the database read-only
(SQLite ``mode=ro``, a PostgreSQL read-only session), so a browser never takes a write lock from the
job, and reads through the ``(query_id, ts)`` keys and indexes: the last hour of one query is a range
scan however many batches the database holds (on SQLite the batches' one also holds the columns read here
but the raw progress: schema migration 4). The SQL is the subset both dialects share; the two places
they differ (JSON fields, time buckets) come from the backend.
"""

from __future__ import annotations

from contextlib import closing
from typing import Any

import pandas as pd

from spark_state_observer.history.backend import Backend, open_backend
from spark_state_observer.model.bounded import stored_json

TIME_COLUMNS = ("ts", "started", "ended", "last_seen")


def frame_of(columns: list[str], rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """Rows as a frame whose times are numbers: a history is shared, and SQLite keeps text in any column, so a
    time that is not a number (a row written by hand or another tool) becomes missing, and a row without its
    ``ts`` is left out, rather than breaking every page that computes with the column."""
    frame = pd.DataFrame.from_records(rows, columns=columns, coerce_float=True)
    for column in TIME_COLUMNS:
        if column in frame.columns and frame[column].dtype == object:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    if "ts" in frame.columns and frame["ts"].isna().any():
        frame = frame[frame["ts"].notna()].reset_index(drop=True)
    return frame


def _frame(path: str, sql: str, params: tuple[Any, ...] = ()) -> pd.DataFrame:
    with closing(open_backend(path, readonly=True)) as backend:
        columns, rows = backend.rows(sql, params)
    return frame_of(columns, rows)


def _dialect(path: str) -> Backend:
    """The backend of ``path`` for its SQL spelling only (opening it does not connect)."""
    return open_backend(path, readonly=True)


def _range(query_id: str, since: float | None, until: float | None, run_id: str | None, child: bool = False) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause of a query's rows in a time range and run. ``child``: operators and partitions, keyed
    by (query, ts, run, ...) since schema 4, find a run's rows at its batches' times (a key seek each)
    instead of reading every row of the query."""
    where: list[str] = ["query_id = ?"]
    params: list[Any] = [query_id]
    if since is not None:
        where.append("ts >= ?")
        params.append(since)
    if until is not None:
        where.append("ts <= ?")
        params.append(until)
    if run_id is not None:
        where.append("run_id = ?")
        params.append(run_id)
        # batch_id >= the least long: always true; keeps the planner on the (query, run, batch) key, reading
        # the run's batches, rather than scanning every batch of the query in its ts index
        if child:
            where.append("ts IN (SELECT ts FROM batches WHERE query_id = ? AND run_id = ? AND batch_id >= ?)")
            params += [query_id, run_id, -(2**63)]
        else:
            where.append("batch_id >= ?")
            params.append(-(2**63))
    return " AND ".join(where), tuple(params)


def load_queries(path: str) -> pd.DataFrame:
    """Every query with its latest batch, run count and last run's outcome."""
    return _frame(
        path,
        """
        SELECT q.query_id, q.name, q.first_seen, q.last_seen,
               (SELECT COUNT(*) FROM runs r WHERE r.query_id = q.query_id) AS runs,
               (SELECT run_id FROM runs r WHERE r.query_id = q.query_id ORDER BY started DESC LIMIT 1) AS last_run_id,
               (SELECT outcome FROM runs r WHERE r.query_id = q.query_id ORDER BY started DESC LIMIT 1) AS last_outcome,
               (SELECT MAX(batch_id) FROM batches b WHERE b.query_id = q.query_id) AS last_batch_id
        FROM queries q ORDER BY q.last_seen DESC""",
    )


def load_runs(path: str, query_id: str) -> pd.DataFrame:
    return _frame(path, "SELECT * FROM runs WHERE query_id = ? ORDER BY started", (query_id,))


def load_batches(
    path: str, query_id: str, since: float | None = None, until: float | None = None, run_id: str | None = None, with_progress: bool = False
) -> pd.DataFrame:
    """One row per batch; ``durations`` is a dict of phase -> ms; ``progress`` (optional) the raw JSON."""
    where, params = _range(query_id, since, until, run_id)
    columns = (
        "*"
        if with_progress
        else "query_id, run_id, batch_id, ts, duration_ms, input_rows, input_rps, "
        "processed_rps, watermark, state_rows, state_memory_bytes, durations"
    )
    frame = _frame(path, f"SELECT {columns} FROM batches WHERE {where} ORDER BY ts", params)
    frame["durations"] = frame["durations"].map(lambda s: stored_json(s, {}))
    return frame


def load_batch(path: str, query_id: str, run_id: str, batch_id: int) -> dict[str, Any] | None:
    """The full progress JSON of one batch."""
    frame = _frame(path, "SELECT progress FROM batches WHERE query_id = ? AND run_id = ? AND batch_id = ?", (query_id, run_id, batch_id))
    return stored_json(frame["progress"].iloc[0], None) if len(frame) else None


def load_operators(
    path: str, query_id: str, since: float | None = None, until: float | None = None, run_id: str | None = None
) -> pd.DataFrame:
    where, params = _range(query_id, since, until, run_id, child=True)
    return _frame(path, f"SELECT * FROM operators WHERE {where} ORDER BY ts, op_index", params)


def load_partitions(
    path: str, query_id: str, since: float | None = None, until: float | None = None, run_id: str | None = None
) -> pd.DataFrame:
    where, params = _range(query_id, since, until, run_id, child=True)
    return _frame(path, f"SELECT * FROM partitions WHERE {where} ORDER BY ts, op_index, partition", params)


def load_placements(path: str, query_id: str, since: float | None = None, until: float | None = None, limit: int = 50_000) -> pd.DataFrame:
    """Where each state partition ran per batch (the newest ``limit`` rows in range, oldest first); empty for a
    history written before placements were recorded (schema 2, opened read-only) or without placement followed."""
    from spark_state_observer.history.backend import HistoryError

    where, params = _range(query_id, since, until, None)
    try:
        frame = _frame(
            path, f"SELECT * FROM placements WHERE {where} ORDER BY ts DESC, batch_id DESC, op_index, partition LIMIT {int(limit)}", params
        )
    except HistoryError as exc:
        if "placements" not in str(exc):
            raise
        return pd.DataFrame()
    return frame.iloc[::-1].reset_index(drop=True)


def load_events(path: str, query_id: str | None = None, since: float | None = None, until: float | None = None) -> pd.DataFrame:
    """Lifecycle events and derived signals; ``attributes`` is a dict."""
    if query_id is None:
        frame = _frame(path, "SELECT * FROM events WHERE ts >= ? AND ts <= ? ORDER BY ts", (since or 0.0, until or 1e18))
    else:
        where, params = _range(query_id, since, until, None)
        frame = _frame(path, f"SELECT * FROM events WHERE {where} ORDER BY ts", params)
    frame["attributes"] = frame["attributes"].map(lambda s: stored_json(s, {}))
    return frame


# --- aggregated reads for the browser: bounded in size however long the history is ----------------------
PHASES = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def load_span(path: str, query_id: str) -> dict[str, float | int | None]:
    """First and last batch time and the batch count of a query (index-only reads)."""
    frame = _frame(path, "SELECT MIN(ts) AS first, MAX(ts) AS last, COUNT(*) AS batches FROM batches WHERE query_id = ?", (query_id,))
    row = frame.iloc[0]
    return {"first": row["first"], "last": row["last"], "batches": int(row["batches"])}


def load_recent_batches(path: str, query_id: str, limit: int = 120) -> pd.DataFrame:
    """The ``limit`` newest batches, oldest first: the newest figures and the sparklines of the query list."""
    return _frame(
        path,
        """
        SELECT * FROM (SELECT run_id, batch_id, ts, duration_ms, input_rows, input_rps, processed_rps, watermark,
                              state_rows, state_memory_bytes
                       FROM batches WHERE query_id = ? ORDER BY ts DESC LIMIT ?) AS recent ORDER BY ts""",
        (query_id, limit),
    )


def _bucket(path: str, table: str, where: str, params: tuple[Any, ...], max_points: int) -> tuple[str, tuple[Any, ...]]:
    """A GROUP BY expression putting the rows of ``where`` into at most ``max_points`` equal time buckets."""
    span = _frame(path, f"SELECT MIN(ts) AS lo, MAX(ts) AS hi, COUNT(*) AS n FROM {table} WHERE {where}", params).iloc[0]
    if not span["n"] or span["n"] <= max_points or span["hi"] <= span["lo"]:
        return "+ts", ()  # unary + keeps the planner on the run's primary key when a run is asked for
    return _dialect(path).bucket(), (float(span["lo"]), (float(span["hi"]) - float(span["lo"])) / max_points * 1.000001)


def load_batch_series(
    path: str, query_id: str, since: float | None = None, until: float | None = None, run_id: str | None = None, max_points: int = 2000
) -> pd.DataFrame:
    """Batches of a range, downsampled to at most ``max_points`` time buckets, with one column per phase.

    A bucket holds its first time, newest batch id, batch count, the mean and max duration, the mean
    rates and phases, the summed input rows and the newest watermark and state figures.
    """
    where, params = _range(query_id, since, until, run_id)
    group, gparams = _bucket(path, "batches", where, params, max_points)
    dialect = _dialect(path)
    phases = ", ".join(f'AVG({dialect.json_number("durations", p)}) AS "{p}"' for p in PHASES)
    return _frame(
        path,
        f"""
        SELECT MIN(ts) AS ts, MAX(batch_id) AS batch_id, COUNT(*) AS batches, MAX(run_id) AS run_id,
               AVG(duration_ms) AS duration_ms, MAX(duration_ms) AS duration_max_ms, SUM(input_rows) AS input_rows,
               AVG(input_rps) AS input_rps, AVG(processed_rps) AS processed_rps, MAX(watermark) AS watermark,
               MAX(ts) - MAX(watermark) AS watermark_lag_s, MAX(state_rows) AS state_rows,
               MAX(state_memory_bytes) AS state_memory_bytes, {phases}
        FROM batches WHERE {where} GROUP BY {group} ORDER BY ts""",
        params + gparams,
    )


def load_operator_series(
    path: str, query_id: str, since: float | None = None, until: float | None = None, run_id: str | None = None, max_points: int = 2000
) -> pd.DataFrame:
    """Operator figures per time bucket: state rows and memory (max), rows updated/removed/dropped (sum)."""
    where, params = _range(query_id, since, until, run_id, child=True)
    group, gparams = _bucket(path, "operators", where, params, max_points)
    return _frame(
        path,
        f"""
        SELECT MIN(ts) AS ts, MAX(batch_id) AS batch_id, op_index, MAX(op_name) AS op_name, MAX(provider) AS provider,
               MAX(rows_total) AS rows_total, MAX(memory_bytes) AS memory_bytes, SUM(rows_updated) AS rows_updated,
               SUM(rows_removed) AS rows_removed, SUM(rows_dropped_by_watermark) AS rows_dropped_by_watermark,
               AVG(commit_ms) AS commit_ms, MAX(store_instances) AS store_instances
        FROM operators WHERE {where} GROUP BY op_index, {group} ORDER BY ts, op_index""",
        params + gparams,
    )


def load_partition_lag(
    path: str, query_id: str, since: float | None = None, until: float | None = None, run_id: str | None = None, buckets: int = 60
) -> pd.DataFrame:
    """Snapshot lag per store instance and time bucket: the versions since its last uploaded snapshot.

    The store's version after batch ``b`` is ``b + 1``; ``SnapshotLastUploaded`` is -1 before the first
    upload, so an instance that never uploaded lags by every version it has.
    """
    where, params = _range(query_id, since, until, run_id, child=True)
    group, gparams = _bucket(path, "partitions", where, params, buckets)
    return _frame(
        path,
        f"""
        SELECT MIN(ts) AS ts, MAX(batch_id) AS batch_id, op_index, partition, store,
               MAX(snapshot_version) AS snapshot_version,
               MAX(batch_id + 1 - CASE WHEN snapshot_version IS NULL OR snapshot_version < 0 THEN 0 ELSE snapshot_version END) AS snapshot_lag
        FROM partitions WHERE {where} GROUP BY op_index, partition, store, {group} ORDER BY ts, op_index, partition""",
        params + gparams,
    )


def load_progress_tail(path: str, query_id: str, until: float | None = None, limit: int = 300) -> list[dict[str, Any]]:
    """The raw progress of the ``limit`` newest batches up to ``until``, oldest first (for figures only
    the raw JSON holds, such as RocksDB's commit latency breakdown)."""
    frame = _frame(
        path,
        "SELECT progress FROM batches WHERE query_id = ? AND ts <= ? ORDER BY ts DESC LIMIT ?",
        (query_id, until if until is not None else 1e18, limit),
    )
    return [p for p in (stored_json(s, None) for s in reversed(frame["progress"].tolist())) if p is not None]


def load_recent_runs(path: str, query_id: str, limit: int = 500) -> pd.DataFrame:
    """The ``limit`` newest runs, oldest first (a crash-looping query can have thousands)."""
    return _frame(
        path,
        "SELECT * FROM (SELECT * FROM runs WHERE query_id = ? ORDER BY started DESC LIMIT ?) AS recent ORDER BY started",
        (query_id, limit),
    )
