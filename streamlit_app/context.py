"""What every page gets: the configuration, the history's freshness token, the chosen query and range.

The query and the time range live in the sidebar and in the URL (``?page=...&query=...``), so a link
pasted into an incident channel opens the same view.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
import streamlit as st

from observer.history.url import redact
from streamlit_app import data
from streamlit_app.config import AppConfig

RANGES = {"last 15 min": 900.0, "last hour": 3600.0, "last 6 hours": 6 * 3600.0, "last day": 86400.0,
          "last week": 7 * 86400.0, "everything": None}
DEFAULT_RANGE = "last 6 hours"


@dataclass
class Context:
    config: AppConfig
    tok: tuple
    queries: pd.DataFrame | None = None
    query_id: str | None = None
    since: float | None = None
    until: float | None = None
    span: dict | None = None

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


def history_queries(ctx: Context) -> pd.DataFrame | None:
    """The history's queries, or None after telling the user why there are none to show."""
    try:
        frame = data.queries(ctx.history, ctx.tok)
    except data.HistoryUnavailable as exc:
        st.error(f"{exc}")
        st.info("Point the browser at a history: `spark-state-observer ui --history PATH`. A job writes one when the "
                "observer is attached (setting `history_path`); `spark-state-observer replay LOGS --history PATH` "
                "writes one from recorded Spark event logs.")
        return None
    if frame.empty:
        st.info(f"The history {ctx.history_display} is empty: no query has reported a batch yet. Start a streaming query with "
                "the observer attached (or replay event logs with `--history`), then press Refresh.")
        return None
    return frame


def label(frame: pd.DataFrame, query_id: str) -> str:
    row = frame[frame.query_id == query_id]
    name = row["name"].iloc[0] if len(row) else None
    return f"{name} ({query_id[:8]})" if isinstance(name, str) and name else query_id


def select_query(ctx: Context, frame: pd.DataFrame) -> str | None:
    """The query chosen in the sidebar; an unknown one (from a link) is reported, not guessed."""
    ids = frame.query_id.tolist()
    wanted = st.session_state.get("query_id")
    if wanted is not None and wanted not in ids:
        del st.session_state["query_id"]
        st.session_state["unknown_query"] = wanted
    chosen = st.sidebar.selectbox("Query", ids, key="query_id", format_func=lambda q: label(frame, q))
    unknown = st.session_state.pop("unknown_query", None)
    if unknown is not None:
        st.error(f"Unknown query {unknown!r}: the history {ctx.history_display} has no query with that id. "
                 f"Pick one of its {len(ids)} queries in the sidebar.")
        return None
    if chosen is not None:
        st.query_params["query"] = chosen
    return chosen


def select_range(ctx: Context, query_id: str) -> tuple[float | None, float | None, dict]:
    """(since, until) measured back from the query's newest batch, so a replayed history reads like a live one."""
    span = data.span(ctx.history, ctx.tok, query_id)
    choice = st.sidebar.selectbox("Time range", list(RANGES), index=list(RANGES).index(DEFAULT_RANGE), key="range")
    width = RANGES[choice]
    if span["last"] is None or width is None:
        return None, None, span
    return float(span["last"]) - width, None, span
