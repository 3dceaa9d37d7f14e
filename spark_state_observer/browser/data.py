"""Everything the pages read, loaded and cached in this one module: the history (cached per file
version, failures turned into messages), the checkpoints under the roots, and the state readers.

Views call these functions and never open a file, a database or a Spark session themselves. Every
history loader opens the database read-only, so the browser never blocks the job writing it. Results
are cached under a token made of the database's and its WAL's size and mtime: a rerun after the
listener committed new batches misses the cache and shows them, a rerun without changes costs nothing.
Checkpoint reads are cached per checkpoint version (the mtime of its ``commits`` folder).
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from typing import Any, Callable

import pandas as pd
import streamlit as st

from spark_state_observer.browser.health import typical_interval
from spark_state_observer.browser.kafka_restart import KafkaRestart, kafka_restart
from spark_state_observer.browser.paths import list_checkpoints
from spark_state_observer.browser.verdict import Facts, Verdict, kafka_lag_of, verdicts
from spark_state_observer.history import browse, loaders, query_status
from spark_state_observer.history.backend import open_backend
from spark_state_observer.history.store import HistoryError
from spark_state_observer.history.url import parse
from spark_state_observer.offline import state_reader
from spark_state_observer.offline.checkpoint import inspect_checkpoint
from spark_state_observer.offline.checkpoint.report import CheckpointReport
from spark_state_observer.offline.checkpoint.restore import rates_from_history

SERVER_TOKEN_SECONDS = 5.0
STATE_PAGE_SIZE = 25


class HistoryUnavailable(RuntimeError):
    """The history cannot be read; the message says why and what to do."""


def token(path: str) -> tuple[Any, ...]:
    """Changes whenever the writer commits (WAL mode appends to ``-wal`` until a checkpoint); for a
    PostgreSQL history (many writers, no file to look at) every ``SERVER_TOKEN_SECONDS``."""
    if "://" in path and not path.startswith("sqlite:"):
        return ("server", int(time.time() // SERVER_TOKEN_SECONDS))
    if path.startswith("sqlite:"):
        path = parse(path).location
    parts: list[tuple[int, int] | None] = []
    for name in (path, path + "-wal"):
        try:
            st_ = os.stat(name)
            parts.append((st_.st_mtime_ns, st_.st_size))
        except OSError:
            parts.append(None)
    return tuple(parts)


def _guard(fn: Callable[..., Any], path: str, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(path, *args, **kwargs)
    except HistoryError as exc:
        raise HistoryUnavailable(str(exc)) from None
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise HistoryUnavailable(f"history database {path} cannot be read ({exc}); is it a spark-state-observer history?") from None


@st.cache_data(max_entries=64, show_spinner=False)
def queries(path: str, tok: tuple[Any, ...]) -> pd.DataFrame:
    return _guard(loaders.load_queries, path)


@st.cache_data(max_entries=64, show_spinner=False)
def lasting_states(path: str, tok: tuple[Any, ...]) -> dict[str, str]:
    return _guard(browse.load_lasting_states, path)


def retire(path: str, query_id: str) -> bool:
    """Retire ``query_id``'s lasting state in the history (the browser's one write); whether there was one."""

    def write(location: str) -> bool:
        with closing(open_backend(location)) as backend:
            return bool(query_status.retire(backend, query_id).retired)

    done = bool(_guard(write, path))
    lasting_states.clear()
    return done


@st.cache_data(max_entries=256, show_spinner=False)
def runs(path: str, tok: tuple[Any, ...], query_id: str, limit: int = 500) -> pd.DataFrame:
    """The newest ``limit`` runs: enough to choose from, bounded for a crash-looping query."""
    return _guard(loaders.load_recent_runs, path, query_id, limit)


@st.cache_data(max_entries=256, show_spinner=False)
def span(path: str, tok: tuple[Any, ...], query_id: str) -> dict[str, Any]:
    return _guard(loaders.load_span, path, query_id)


@st.cache_data(max_entries=256, show_spinner=False)
def recent_batches(path: str, tok: tuple[Any, ...], query_id: str, limit: int = 120) -> pd.DataFrame:
    return _guard(loaders.load_recent_batches, path, query_id, limit)


@st.cache_data(max_entries=64, show_spinner=False)
def batch_series(
    path: str,
    tok: tuple[Any, ...],
    query_id: str,
    since: float | None,
    until: float | None,
    run_id: str | None = None,
    max_points: int = 2000,
) -> pd.DataFrame:
    return _guard(loaders.load_batch_series, path, query_id, since, until, run_id, max_points)


@st.cache_data(max_entries=64, show_spinner=False)
def operator_series(
    path: str,
    tok: tuple[Any, ...],
    query_id: str,
    since: float | None,
    until: float | None,
    run_id: str | None = None,
    max_points: int = 2000,
) -> pd.DataFrame:
    return _guard(loaders.load_operator_series, path, query_id, since, until, run_id, max_points)


@st.cache_data(max_entries=64, show_spinner=False)
def partition_lag(
    path: str, tok: tuple[Any, ...], query_id: str, since: float | None, until: float | None, buckets: int = 60
) -> pd.DataFrame:
    return _guard(loaders.load_partition_lag, path, query_id, since, until, None, buckets)


@st.cache_data(max_entries=32, show_spinner=False)
def placements(path: str, tok: tuple[Any, ...], query_id: str, since: float | None, until: float | None) -> pd.DataFrame:
    return _guard(loaders.load_placements, path, query_id, since, until)


@st.cache_data(max_entries=64, show_spinner=False)
def events(path: str, tok: tuple[Any, ...], query_id: str, since: float | None, until: float | None) -> pd.DataFrame:
    return _guard(loaders.load_events, path, query_id, since, until)


@st.cache_data(max_entries=64, show_spinner=False)
def progress_tail(path: str, tok: tuple[Any, ...], query_id: str, until: float | None, limit: int = 300) -> list[dict[str, Any]]:
    return _guard(loaders.load_progress_tail, path, query_id, until, limit)


def batch(path: str, query_id: str, run_id: str, batch_id: int) -> dict[str, Any] | None:
    """One batch's full progress (not cached: it is read once, on demand)."""
    return _guard(loaders.load_batch, path, query_id, run_id, batch_id)


@st.cache_data(max_entries=8, show_spinner=False)
def query_apps(path: str, tok: tuple[Any, ...]) -> pd.DataFrame:
    return _guard(browse.load_query_apps, path)


@st.cache_data(max_entries=256, show_spinner=False)
def run_stats(path: str, tok: tuple[Any, ...], query_id: str, limit: int = 500) -> pd.DataFrame:
    return _guard(browse.load_run_stats, path, query_id, limit)


@st.cache_data(max_entries=256, show_spinner=False)
def recent_events(path: str, tok: tuple[Any, ...], query_id: str, limit: int = 2000) -> pd.DataFrame:
    return _guard(browse.load_recent_events, path, query_id, limit)


@st.cache_data(max_entries=64, show_spinner=False)
def events_of(path: str, tok: tuple[Any, ...], query_id: str, kinds: tuple[str, ...]) -> pd.DataFrame:
    return _guard(browse.load_events_of, path, query_id, kinds)


@st.cache_data(max_entries=256, show_spinner=False)
def newest_kafka_lag(path: str, tok: tuple[Any, ...], query_id: str) -> dict[str, float]:
    """Records behind the latest per topic at the query's newest batch (none without a Kafka source)."""
    try:
        tail = _guard(loaders.load_progress_tail, path, query_id, None, 1)
    except (ValueError, RecursionError):  # a stored progress that is not JSON (written by hand): no lag, not a broken page
        return {}
    return kafka_lag_of(tail[-1]) if tail and isinstance(tail[-1], dict) else {}


@st.cache_data(max_entries=256, show_spinner=False)
def kafka_restart_of(path: str, tok: tuple[Any, ...], query_id: str, run_id: str) -> KafkaRestart | None:
    """The Kafka backlog and catch-up of a restarted run (None without a Kafka source)."""
    try:
        return kafka_restart(_guard(browse.load_run_progress, path, query_id, run_id))
    except (ValueError, RecursionError):  # a stored progress that is not JSON: no figures, not a broken page
        return None


def facts(path: str, tok: tuple[Any, ...], query_id: str, now: float) -> Facts:
    """What the verdict rules read about one query (each part cached on its own)."""
    recent = recent_batches(path, tok, query_id)
    events = recent_events(path, tok, query_id)
    runs = run_stats(path, tok, query_id)
    return Facts(
        events=events.to_dict("records"),
        runs=runs.to_dict("records"),
        last_batch_ts=float(recent.ts.iloc[-1]) if len(recent) else None,
        interval=typical_interval(recent.ts.tolist()),
        now=now,
        kafka_lag=newest_kafka_lag(path, tok, query_id),
        kafka_restart=kafka_restart_of(path, tok, query_id, restarted) if (restarted := restarted_run(events)) else None,
    )


def restarted_run(events: pd.DataFrame) -> str | None:
    """The run the newest restart started (None: never restarted)."""
    restarts = events[events.kind == "query_restarted"] if len(events) else events
    run = restarts.run_id.iloc[-1] if len(restarts) else None
    return run if isinstance(run, str) and run else None


def query_verdicts(path: str, tok: tuple[Any, ...], query_id: str, now: float | None = None) -> list[Verdict]:
    """Every verdict of the query, most severe first (the rules are cheap; their inputs are cached)."""
    return verdicts(facts(path, tok, query_id, time.time() if now is None else now))


# --- checkpoints under the roots ------------------------------------------------------------------


@st.cache_data(ttl=30, show_spinner=False)
def checkpoints_under(roots: tuple[str, ...]) -> list[str]:
    return list_checkpoints(roots)


def checkpoint_version(path: str) -> float:
    """Changes when the query commits a batch, so cached reads follow the checkpoint."""
    commits = os.path.join(path, "commits")
    return os.path.getmtime(commits) if os.path.isdir(commits) else 0.0


@st.cache_data(max_entries=16, show_spinner="Inspecting the checkpoint...")
def checkpoint_report(path: str, version: float, history: str, tok: tuple[Any, ...]) -> CheckpointReport:
    """The inspector's report, its restore estimated with the history's observed rates when it has some
    (raises the inspector's errors; nothing is cached for them)."""
    report = inspect_checkpoint(path)
    if report.query_id:
        try:
            rates = rates_from_history(history, report.query_id)
        except HistoryError:
            rates = None
        if rates:
            report = inspect_checkpoint(path, rates)
    return report


# --- state contents, through Spark's state readers ---------------------------------------------------


@st.cache_resource(show_spinner="Starting a local Spark session (first use only)...")
def spark_session() -> Any:
    """A local session for the state readers, started on first use of the State contents page only; an
    already active session in the process (a notebook, a test) is reused rather than a second one started."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    return (
        SparkSession.builder.master("local[1]")
        .appName("spark-state-browser")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )


@st.cache_data(max_entries=32, show_spinner="Reading state metadata...")
def state_operators(path: str, version: float) -> list[dict[str, Any]]:
    return state_reader.operators(spark_session(), path)


@st.cache_data(max_entries=32, show_spinner="Reading the store's schema...")
def state_schema(path: str, version: float, operator_id: int, store: str) -> str:
    return state_reader.schema(spark_session(), path, operator_id, store)


@st.cache_data(max_entries=32, show_spinner="Counting rows per partition...")
def state_rows(path: str, version: float, operator_id: int, store: str) -> dict[int, int]:
    return state_reader.rows_per_partition(spark_session(), path, operator_id, store)


@st.cache_data(max_entries=64, show_spinner="Reading a page of state rows...")
def state_sample(
    path: str, version: float, operator_id: int, store: str, key: str, partition: int | None, page: int
) -> list[dict[str, Any]]:
    return state_reader.sample(
        spark_session(),
        path,
        operator_id,
        store,
        key_contains=key or None,
        partition=partition,
        offset=page * STATE_PAGE_SIZE,
        limit=STATE_PAGE_SIZE,
    )
