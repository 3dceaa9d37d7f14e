"""pandas loaders over the history, for the browser and notebooks.

Each opens the database read-only (``mode=ro``), so a browser never takes a write lock from the job,
and reads through the ``(query_id, ts)`` indexes: the last hour of one query is a range scan however
many batches the file holds.
"""

from __future__ import annotations

import json
from contextlib import closing
from typing import Any

import pandas as pd

from observer.history.store import connect


def _frame(path: str, sql: str, params: tuple[Any, ...] = ()) -> pd.DataFrame:
    with closing(connect(path, readonly=True)) as conn:
        return pd.read_sql_query(sql, conn, params=params)


def _range(query_id: str, since: float | None, until: float | None, run_id: str | None) -> tuple[str, tuple]:
    where, params = ["query_id = ?"], [query_id]
    if since is not None:
        where.append("ts >= ?")
        params.append(since)
    if until is not None:
        where.append("ts <= ?")
        params.append(until)
    if run_id is not None:
        where.append("run_id = ?")
        params.append(run_id)
    return " AND ".join(where), tuple(params)


def load_queries(path: str) -> pd.DataFrame:
    """Every query with its latest batch, run count and last run's outcome."""
    return _frame(path, """
        SELECT q.query_id, q.name, q.first_seen, q.last_seen,
               (SELECT COUNT(*) FROM runs r WHERE r.query_id = q.query_id) AS runs,
               (SELECT run_id FROM runs r WHERE r.query_id = q.query_id ORDER BY started DESC LIMIT 1) AS last_run_id,
               (SELECT outcome FROM runs r WHERE r.query_id = q.query_id ORDER BY started DESC LIMIT 1) AS last_outcome,
               (SELECT MAX(batch_id) FROM batches b WHERE b.query_id = q.query_id) AS last_batch_id
        FROM queries q ORDER BY q.last_seen DESC""")


def load_runs(path: str, query_id: str) -> pd.DataFrame:
    return _frame(path, "SELECT * FROM runs WHERE query_id = ? ORDER BY started", (query_id,))


def load_batches(path: str, query_id: str, since: float | None = None, until: float | None = None,
                 run_id: str | None = None, with_progress: bool = False) -> pd.DataFrame:
    """One row per batch; ``durations`` is a dict of phase -> ms; ``progress`` (optional) the raw JSON."""
    where, params = _range(query_id, since, until, run_id)
    columns = "*" if with_progress else "query_id, run_id, batch_id, ts, duration_ms, input_rows, input_rps, " \
                                        "processed_rps, watermark, state_rows, state_memory_bytes, durations"
    frame = _frame(path, f"SELECT {columns} FROM batches WHERE {where} ORDER BY ts", params)
    frame["durations"] = frame["durations"].map(lambda s: json.loads(s) if isinstance(s, str) else {})
    return frame


def load_batch(path: str, query_id: str, run_id: str, batch_id: int) -> dict[str, Any] | None:
    """The full progress JSON of one batch."""
    frame = _frame(path, "SELECT progress FROM batches WHERE query_id = ? AND run_id = ? AND batch_id = ?", (query_id, run_id, batch_id))
    return json.loads(frame["progress"].iloc[0]) if len(frame) else None


def load_operators(path: str, query_id: str, since: float | None = None, until: float | None = None,
                   run_id: str | None = None) -> pd.DataFrame:
    where, params = _range(query_id, since, until, run_id)
    return _frame(path, f"SELECT * FROM operators WHERE {where} ORDER BY ts, op_index", params)


def load_partitions(path: str, query_id: str, since: float | None = None, until: float | None = None,
                    run_id: str | None = None) -> pd.DataFrame:
    where, params = _range(query_id, since, until, run_id)
    return _frame(path, f"SELECT * FROM partitions WHERE {where} ORDER BY ts, op_index, partition", params)


def load_events(path: str, query_id: str | None = None, since: float | None = None, until: float | None = None) -> pd.DataFrame:
    """Lifecycle events and derived signals; ``attributes`` is a dict."""
    if query_id is None:
        frame = _frame(path, "SELECT * FROM events WHERE ts >= ? AND ts <= ? ORDER BY ts", (since or 0.0, until or 1e18))
    else:
        where, params = _range(query_id, since, until, None)
        frame = _frame(path, f"SELECT * FROM events WHERE {where} ORDER BY ts", params)
    frame["attributes"] = frame["attributes"].map(lambda s: json.loads(s) if isinstance(s, str) else {})
    return frame
