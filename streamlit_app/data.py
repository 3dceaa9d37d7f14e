"""The history as the pages read it: cached per file version, failures turned into messages.

Every loader opens the database read-only, so the browser never blocks the job writing it. Results
are cached under a token made of the database's and its WAL's size and mtime: a rerun after the
listener committed new batches misses the cache and shows them, a rerun without changes costs nothing.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any, Callable

import pandas as pd
import streamlit as st

from observer.history import browse, loaders
from observer.history.store import HistoryError
from observer.history.url import parse
from streamlit_app.health import typical_interval
from streamlit_app.verdict import Facts

SERVER_TOKEN_SECONDS = 5.0


class HistoryUnavailable(RuntimeError):
    """The history cannot be read; the message says why and what to do."""


def token(path: str) -> tuple:
    """Changes whenever the writer commits (WAL mode appends to ``-wal`` until a checkpoint); for a
    PostgreSQL history (many writers, no file to look at) every ``SERVER_TOKEN_SECONDS``."""
    if "://" in path and not path.startswith("sqlite:"):
        return ("server", int(time.time() // SERVER_TOKEN_SECONDS))
    if path.startswith("sqlite:"):
        path = parse(path).location
    parts = []
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
def queries(path: str, tok: tuple) -> pd.DataFrame:
    return _guard(loaders.load_queries, path)


@st.cache_data(max_entries=256, show_spinner=False)
def runs(path: str, tok: tuple, query_id: str, limit: int = 500) -> pd.DataFrame:
    """The newest ``limit`` runs: enough to choose from, bounded for a crash-looping query."""
    return _guard(loaders.load_recent_runs, path, query_id, limit)


@st.cache_data(max_entries=256, show_spinner=False)
def span(path: str, tok: tuple, query_id: str) -> dict:
    return _guard(loaders.load_span, path, query_id)


@st.cache_data(max_entries=256, show_spinner=False)
def recent_batches(path: str, tok: tuple, query_id: str, limit: int = 120) -> pd.DataFrame:
    return _guard(loaders.load_recent_batches, path, query_id, limit)


@st.cache_data(max_entries=64, show_spinner=False)
def batch_series(path: str, tok: tuple, query_id: str, since: float | None, until: float | None,
                 run_id: str | None = None, max_points: int = 2000) -> pd.DataFrame:
    return _guard(loaders.load_batch_series, path, query_id, since, until, run_id, max_points)


@st.cache_data(max_entries=64, show_spinner=False)
def operator_series(path: str, tok: tuple, query_id: str, since: float | None, until: float | None,
                    run_id: str | None = None, max_points: int = 2000) -> pd.DataFrame:
    return _guard(loaders.load_operator_series, path, query_id, since, until, run_id, max_points)


@st.cache_data(max_entries=64, show_spinner=False)
def partition_lag(path: str, tok: tuple, query_id: str, since: float | None, until: float | None, buckets: int = 60) -> pd.DataFrame:
    return _guard(loaders.load_partition_lag, path, query_id, since, until, None, buckets)


@st.cache_data(max_entries=32, show_spinner=False)
def placements(path: str, tok: tuple, query_id: str, since: float | None, until: float | None) -> pd.DataFrame:
    return _guard(loaders.load_placements, path, query_id, since, until)


@st.cache_data(max_entries=64, show_spinner=False)
def events(path: str, tok: tuple, query_id: str, since: float | None, until: float | None) -> pd.DataFrame:
    return _guard(loaders.load_events, path, query_id, since, until)


@st.cache_data(max_entries=64, show_spinner=False)
def progress_tail(path: str, tok: tuple, query_id: str, until: float | None, limit: int = 300) -> list[dict]:
    return _guard(loaders.load_progress_tail, path, query_id, until, limit)


def batch(path: str, query_id: str, run_id: str, batch_id: int) -> dict | None:
    """One batch's full progress (not cached: it is read once, on demand)."""
    return _guard(loaders.load_batch, path, query_id, run_id, batch_id)


@st.cache_data(max_entries=8, show_spinner=False)
def query_apps(path: str, tok: tuple) -> pd.DataFrame:
    return _guard(browse.load_query_apps, path)


@st.cache_data(max_entries=256, show_spinner=False)
def run_stats(path: str, tok: tuple, query_id: str, limit: int = 500) -> pd.DataFrame:
    return _guard(browse.load_run_stats, path, query_id, limit)


@st.cache_data(max_entries=256, show_spinner=False)
def recent_events(path: str, tok: tuple, query_id: str, limit: int = 2000) -> pd.DataFrame:
    return _guard(browse.load_recent_events, path, query_id, limit)


@st.cache_data(max_entries=64, show_spinner=False)
def events_of(path: str, tok: tuple, query_id: str, kinds: tuple[str, ...]) -> pd.DataFrame:
    return _guard(browse.load_events_of, path, query_id, kinds)


def facts(path: str, tok: tuple, query_id: str, now: float) -> Facts:
    """What the verdict rules read about one query (each part cached on its own)."""
    recent = recent_batches(path, tok, query_id)
    events = recent_events(path, tok, query_id)
    runs = run_stats(path, tok, query_id)
    return Facts(events=events.to_dict("records"), runs=runs.to_dict("records"),
                 last_batch_ts=float(recent.ts.iloc[-1]) if len(recent) else None,
                 interval=typical_interval(recent.ts.tolist()), now=now)
