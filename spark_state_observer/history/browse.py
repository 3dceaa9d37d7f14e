"""Reads the state browser needs beyond ``loaders``: bounded per query, and tolerant of the schema's age.

Kept apart from ``loaders`` so the history's backends can grow there undisturbed. The application
columns (``app``, ``app_labels`` on ``queries``) are newer than some histories; they are detected at
read time, and a history without them reads as one unknown application.
"""

from __future__ import annotations

from contextlib import closing
from typing import Any

import pandas as pd

from spark_state_observer.history import query_status
from spark_state_observer.history.backend import HistoryError, open_backend
from spark_state_observer.history.loaders import frame_of
from spark_state_observer.model.bounded import stored_json
from spark_state_observer.model.query_lifecycle import LASTING, RETIRED

UNKNOWN_APP = "unknown application"


def _frame(path: str, sql: str, params: tuple[Any, ...] = ()) -> pd.DataFrame:
    with closing(open_backend(path, readonly=True)) as backend:
        names, rows = backend.rows(sql, params)
    return frame_of(names, rows)


def _attributes(frame: pd.DataFrame) -> pd.DataFrame:
    frame["attributes"] = frame["attributes"].map(lambda s: stored_json(s, {}))
    return frame


def columns(path: str, table: str) -> set[str]:
    """The columns ``table`` has in this history (older histories lack the newer ones)."""
    with closing(open_backend(path, readonly=True)) as backend:
        names, _ = backend.rows(f"SELECT * FROM {table} LIMIT 0")
    return set(names)


def load_query_apps(path: str) -> pd.DataFrame:
    """query_id, app, labels (a dict), app_id: the application each query belongs to (or UNKNOWN_APP) and
    its latest application id ("" when not recorded), which tells two applications of one name apart."""
    have = columns(path, "queries")
    app = "COALESCE(app, '')" if "app" in have else "''"
    labels = "app_labels" if "app_labels" in have else "NULL"
    app_id = "COALESCE(app_id, '')" if "app_id" in have else "''"
    frame = _frame(path, f"SELECT query_id, {app} AS app, {labels} AS app_labels, {app_id} AS app_id FROM queries")
    frame["app"] = frame["app"].map(lambda a: a or UNKNOWN_APP)
    frame["labels"] = frame.pop("app_labels").map(_labels)
    return frame


def load_lasting_states(path: str) -> dict[str, str]:
    """Query id -> its lasting lifecycle state or ``retired``, as the watcher keeps them (``spark_state_observer.history.query_status``).

    Empty for a history without them (one older than schema 5, or written by a job or replay alone): the
    browser's own health, from runs and signals, stands then."""
    with closing(open_backend(path, readonly=True)) as backend:
        try:
            rows = query_status.load(backend)
        except HistoryError:  # no query_status table in this history
            return {}
    return {r.query_id: r.status for r in rows if r.status in LASTING or r.status == RETIRED}


def _labels(text: Any) -> dict[str, str]:
    value = stored_json(text, {})
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def load_recent_events(path: str, query_id: str, limit: int = 2000) -> pd.DataFrame:
    """The query's ``limit`` newest events, oldest first; ``attributes`` is a dict."""
    return _attributes(
        _frame(
            path,
            """
        SELECT * FROM (SELECT ts, kind, run_id, attributes FROM events WHERE query_id = ? ORDER BY ts DESC LIMIT ?) AS recent
        ORDER BY ts""",
            (query_id, limit),
        )
    )


def load_run_stats(path: str, query_id: str, limit: int = 500) -> pd.DataFrame:
    """The ``limit`` newest runs, oldest first, each with its batch count and batch id range (primary-key reads)."""
    return _frame(
        path,
        """
        SELECT r.*, (SELECT COUNT(*) FROM batches b WHERE b.query_id = r.query_id AND b.run_id = r.run_id) AS batches,
               (SELECT MIN(batch_id) FROM batches b WHERE b.query_id = r.query_id AND b.run_id = r.run_id) AS first_batch_id,
               (SELECT MAX(batch_id) FROM batches b WHERE b.query_id = r.query_id AND b.run_id = r.run_id) AS last_batch_id
        FROM (SELECT * FROM runs WHERE query_id = ? ORDER BY started DESC LIMIT ?) r ORDER BY r.started""",
        (query_id, limit),
    )


def load_events_of(path: str, query_id: str, kinds: tuple[str, ...], limit: int = 5000) -> pd.DataFrame:
    """The query's newest ``limit`` events of the given kinds, oldest first."""
    marks = ", ".join("?" for _ in kinds)
    return _attributes(
        _frame(
            path,
            f"""
        SELECT * FROM (SELECT ts, kind, run_id, attributes FROM events WHERE query_id = ? AND kind IN ({marks})
                       ORDER BY ts DESC LIMIT ?) AS recent ORDER BY ts""",
            (query_id, *kinds, limit),
        )
    )


def load_run_progress(path: str, query_id: str, run_id: str, limit: int = 120) -> list[dict[str, Any]]:
    """The raw progress of a run's first ``limit`` batches, oldest first: how a restart caught up (Kafka backlog)."""
    frame = _frame(path, "SELECT progress FROM batches WHERE query_id = ? AND run_id = ? ORDER BY ts LIMIT ?", (query_id, run_id, limit))
    return [p for p in (stored_json(s, None) for s in frame["progress"].tolist()) if isinstance(p, dict)]
