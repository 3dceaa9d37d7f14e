"""What every page gets: the configuration, the history's freshness token, the chosen application,
query and range, and the URL that holds them.

The URL is the source of truth for what is shown: its path names the page (``spark_state_observer.browser.nav``), its
query string the selection (``?app=...&query=...&run=...&batch=...&range=...``). A link pasted into an
incident channel opens the same view, and the browser's Back button, which restores an older URL,
restores that view. Widgets keep their values in the session between reruns; whenever the URL differs
from the one this session last wrote, the URL wins.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
import streamlit as st

from spark_state_observer.browser import data, fmt
from spark_state_observer.browser.config import AppConfig
from spark_state_observer.history import browse
from spark_state_observer.history.url import redact

RANGES = {
    "last 15 min": 900.0,
    "last hour": 3600.0,
    "last 6 hours": 6 * 3600.0,
    "last day": 86400.0,
    "last week": 7 * 86400.0,
    "everything": None,
}
DEFAULT_RANGE = "last 6 hours"
ALL_APPS = "all applications"
# URL parameter -> the session key of the widget that shows it
URL_KEYS = {"app": "app", "query": "query_id", "run": "batch_run", "batch": "batch_id", "range": "range"}


@dataclass
class Context:
    config: AppConfig
    tok: tuple[Any, ...]
    page: str = ""  # the page's path (``spark_state_observer.browser.nav``)
    queries: pd.DataFrame | None = None  # the queries of the chosen application
    all_queries: pd.DataFrame | None = None
    app: str | None = None  # None: every application
    query_id: str | None = None
    since: float | None = None
    until: float | None = None
    span: dict[str, Any] | None = None

    def fresh(self) -> Context:
        """The same selection over the history as it is now (auto-refresh reruns only the page)."""
        return replace(self, tok=data.token(self.config.history))

    @property
    def history(self) -> str:
        return self.config.history

    @property
    def history_display(self) -> str:
        """The history as shown on a page: a URL without its password."""
        return redact(self.config.history)


def _url_now() -> dict[str, str | None]:
    return {name: st.query_params.get(name) for name in URL_KEYS}


def sync_from_url() -> None:
    """Copy the URL into the widgets' state when it changed outside this session (a link, Back, Forward).

    Such a run leaves the URL as it is: writing to it would push a new entry into the browser's history,
    and Back would then land on the same view again instead of the one before.
    """
    url = _url_now()
    st.session_state["_url_pending"] = {}
    if st.session_state.get("_url") == url or all(v is None for v in url.values()):
        # unchanged, or a page opened from the page list (which drops the query string): the session's
        # selection stays and goes into the URL
        st.session_state["_url_load_run"] = False
        return
    st.session_state["_url_load_run"] = True
    for name, key in URL_KEYS.items():
        value: Any = url[name]
        if value is None:
            continue
        if name == "batch":
            try:
                value = int(value)
            except ValueError:
                continue
        if name == "range" and value not in RANGES:
            continue
        st.session_state[key] = value
    st.session_state["_url"] = url


def write_url(**values: Any) -> None:
    """The shown view, for the URL (None removes a parameter); ``flush_url`` writes it once per run."""
    st.session_state.setdefault("_url_pending", {}).update(values)


def flush_url() -> None:
    """Put the view into the URL in one change (one new entry in the browser's history), unless this run
    was started by the URL itself."""
    pending = st.session_state.pop("_url_pending", {})
    if st.session_state.pop("_url_load_run", False):
        return
    current = {name: st.query_params.get(name) for name in st.query_params}
    desired: dict[str, str] = {name: value for name, value in current.items() if value is not None}
    for name, value in pending.items():
        if value is None:
            desired.pop(name, None)
        else:
            desired[name] = str(value)
    if desired != current:
        st.query_params.from_dict(desired)
    st.session_state["_url"] = {name: desired.get(name) for name in URL_KEYS}


def apply_navigation() -> None:
    """Apply the selection ``nav.go`` asked for (None removes a value) before any widget exists (a widget's
    value cannot change once it is drawn)."""
    pending = st.session_state.pop("_goto", None)
    for name, value in (pending or {}).items():
        key = URL_KEYS[name]
        if value is None:
            st.session_state.pop(key, None)
        else:
            st.session_state[key] = value


def history_queries(ctx: Context) -> pd.DataFrame | None:
    """The history's queries with their application, or None after telling the user why there are none."""
    try:
        frame = data.queries(ctx.history, ctx.tok)
        apps = data.query_apps(ctx.history, ctx.tok)
    except data.HistoryUnavailable as exc:
        st.error(fmt.md(exc))
        st.info(
            "Point the browser at a history: `spark-state-observer ui --history PATH`. A job writes one when the "
            "observer is attached (setting `history_path`); `spark-state-observer replay LOGS --history PATH` "
            "writes one from recorded Spark event logs."
        )
        return None
    if frame.empty:
        st.info(
            f"The history {fmt.code(ctx.history_display)} is empty: no query has reported a batch yet. Start a streaming query with "
            "the observer attached (or replay event logs with `--history`), then press Refresh."
        )
        return None
    return frame.merge(apps, on="query_id", how="left").assign(app=lambda f: f.app.fillna(browse.UNKNOWN_APP))


def _label(query_id: str, name: object) -> str:
    return f"{name} ({fmt.short_id(query_id)})" if isinstance(name, str) and name else fmt.short_id(query_id)


def label(frame: pd.DataFrame | None, query_id: str) -> str:
    """``name (1a2b3c4d)``: the name and the short id (the full id is in the URL and on hover)."""
    row = frame[frame.query_id == query_id] if frame is not None else pd.DataFrame()
    return _label(query_id, row["name"].iloc[0] if len(row) else None)


def labels(frame: pd.DataFrame) -> dict[str, str]:
    """``label`` of every query of the frame at once (a selectbox formats each option on every run)."""
    out: dict[str, str] = {}
    for query_id, name in zip(frame.query_id.tolist(), frame["name"].tolist()):
        out.setdefault(query_id, _label(query_id, name))
    return out


def select_app(ctx: Context, frame: pd.DataFrame) -> str | None:
    """The application the pages are scoped to (None: all)."""
    apps = sorted(frame.app.unique())
    options = [ALL_APPS, *apps]
    if st.session_state.get("app") not in options:
        st.session_state["app"] = ALL_APPS
    chosen = st.sidebar.selectbox(
        "Application", options, key="app", help="every page shows the queries of this application (the history's `app` column)"
    )
    return None if chosen == ALL_APPS else chosen


def select_query(ctx: Context, frame: pd.DataFrame) -> str | None:
    """The query chosen in the sidebar; an unknown one (from a link) is reported, not guessed."""
    ids = frame.query_id.tolist()
    wanted = st.session_state.get("query_id")
    unknown = None
    if wanted is not None and wanted not in ids:
        del st.session_state["query_id"]
        unknown = wanted
    shown = labels(frame)
    chosen = st.sidebar.selectbox(
        "Query", ids, key="query_id", format_func=shown.__getitem__, help="the query every page shows; its full id is in the URL"
    )
    if unknown is not None:
        known = ctx.all_queries is not None and unknown in ctx.all_queries.query_id.tolist()
        where = "the chosen application has" if known else f"the history {fmt.code(ctx.history_display)} has"
        st.error(
            f"Unknown query {fmt.code(unknown)}: {where} no query with that id. Pick one of its "
            f"{fmt.plural(len(ids), 'query', 'queries')} in the sidebar."
        )
        return None
    return chosen


def select_range(ctx: Context, query_id: str) -> tuple[float | None, float | None, dict[str, Any]]:
    """(since, until) measured back from the query's newest batch, so a replayed history reads like a live one."""
    span = data.span(ctx.history, ctx.tok, query_id)
    if st.session_state.get("range") not in RANGES:
        st.session_state["range"] = DEFAULT_RANGE
    choice = st.sidebar.selectbox("Time range", list(RANGES), key="range", help="measured back from the query's newest batch")
    width = RANGES[choice]
    if span["last"] is None or width is None:
        return None, None, span
    return float(span["last"]) - width, None, span


def clicked_row(key: str) -> int | None:
    """The row the user clicked in the table ``key`` (its selection), or None."""
    event = st.session_state.get(key)
    rows = getattr(getattr(event, "selection", None), "rows", None) if event is not None else None
    if rows is None and isinstance(event, dict):
        rows = event.get("selection", {}).get("rows")
    return rows[0] if rows else None
