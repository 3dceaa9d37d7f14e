"""Queries: every query of the history with its health, newest figures, sparklines and last restart/restore."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from observer.signals.kinds import QUERY_RESTARTED, RESTORE
from streamlit_app import data, fmt
from streamlit_app.context import Context, history_queries, label
from streamlit_app.health import HEALTH_ICONS, LIFECYCLE_KINDS, derive_health, typical_interval

SPARK_POINTS = 60


def _downsample(values: pd.Series) -> list[float]:
    """At most SPARK_POINTS values for a sparkline (mean of equal chunks)."""
    clean = values.dropna().astype(float)
    if len(clean) <= SPARK_POINTS:
        return clean.tolist()
    return clean.groupby(pd.RangeIndex(len(clean)) * SPARK_POINTS // len(clean)).mean().tolist()


def summary_row(ctx: Context, q: pd.Series, now: float) -> dict:
    """One line of the table: health, newest figures, sparklines, last restart and restore."""
    recent = data.recent_batches(ctx.history, ctx.tok, q.query_id)
    span = data.span(ctx.history, ctx.tok, q.query_id)
    last_events = data.last_events(ctx.history, ctx.tok, q.query_id)
    lifecycle = last_events[last_events.kind.isin(LIFECYCLE_KINDS)].sort_values("ts")
    last = recent.iloc[-1] if len(recent) else None
    health = derive_health(q.last_outcome, lifecycle.kind.iloc[-1] if len(lifecycle) else None,
                           lifecycle.ts.iloc[-1] if len(lifecycle) else None, last.ts if last is not None else None,
                           typical_interval(recent.ts.tolist()), now)

    def latest(kind: str, attribute: str, unit: str) -> str:
        row = last_events[last_events.kind == kind]
        if row.empty:
            return "-"
        value = row.attributes.iloc[0].get(attribute)
        return fmt.when(row.ts.iloc[0]) + (f" ({value} {unit})" if value is not None else "")

    def value(column: str) -> float | None:
        return None if last is None else last[column]

    return {
        "query": label(ctx.queries, q.query_id), "health": HEALTH_ICONS[health], "runs": int(q.runs),
        "batches": span["batches"], "last batch at": fmt.when(value("ts")),
        "batch ms": value("duration_ms"), "batch ms trend": _downsample(recent.duration_ms),
        "processed rows/s": value("processed_rps"), "processed rows/s trend": _downsample(recent.processed_rps),
        "state rows": value("state_rows"), "state rows trend": _downsample(recent.state_rows),
        "state memory": fmt.size(value("state_memory_bytes")),
        "last restart": latest(QUERY_RESTARTED, "downtime_seconds", "s down"),
        "last restore": latest(RESTORE, "duration_seconds", "s"),
        "input rows/s": value("input_rps"), "last batch": None if pd.isna(q.last_batch_id) else int(q.last_batch_id),
        "query_id": q.query_id,
    }


def _open(query_id: str) -> None:
    st.session_state["page"] = "Query drilldown"
    st.session_state["query_id"] = query_id


def render(ctx: Context) -> None:
    st.header("Queries")
    ctx.queries = history_queries(ctx)
    if ctx.queries is None:
        return
    now = time.time()
    table = pd.DataFrame([summary_row(ctx, q, now) for q in ctx.queries.itertuples()])
    counts = table.health.value_counts()
    st.caption(f"{len(table)} queries in `{ctx.history_display}`: " + ", ".join(f"{n} {h.split()[-1]}" for h, n in counts.items()))
    st.dataframe(table.drop(columns=["query_id"]), hide_index=True, width="stretch", column_config={
        "batch ms trend": st.column_config.LineChartColumn("batch ms (recent)", width="small"),
        "processed rows/s trend": st.column_config.LineChartColumn("processed rows/s (recent)", width="small"),
        "state rows trend": st.column_config.LineChartColumn("state rows (recent)", width="small"),
        "input rows/s": st.column_config.NumberColumn(format="%.1f"),
        "processed rows/s": st.column_config.NumberColumn(format="%.1f"),
        "batch ms": st.column_config.NumberColumn(format="%.0f"),
        "state rows": st.column_config.NumberColumn(format="%.0f"),
    })
    pick, go = st.columns([3, 1], vertical_alignment="bottom")
    chosen = pick.selectbox("Query to open", table.query_id.tolist(), format_func=lambda q: label(ctx.queries, q), key="open_query")
    go.button("Open drilldown", type="primary", on_click=_open, args=(chosen,))
