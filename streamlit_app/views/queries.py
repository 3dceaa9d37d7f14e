"""Queries: every query of the application with its verdict first (what is wrong, since when, the
runbook), then its health, newest figures, sparklines and last restart and restore. A row opens the
query's drilldown."""

from __future__ import annotations

import time
import urllib.parse

import pandas as pd
import streamlit as st

from streamlit_app import data, fmt
from streamlit_app.context import Context, clicked_row, go, label
from streamlit_app.health import LIFECYCLE_KINDS, derive_health, typical_interval
from streamlit_app.verdict import Verdict
from streamlit_app.views import verdicts as verdict_view

SPARK_POINTS = 60


def _downsample(values: pd.Series) -> list[float]:
    """At most SPARK_POINTS values for a sparkline (mean of equal chunks)."""
    clean = values.dropna().astype(float)
    if len(clean) <= SPARK_POINTS:
        return clean.tolist()
    return clean.groupby(pd.RangeIndex(len(clean)) * SPARK_POINTS // len(clean)).mean().tolist()


def restore_text(events: pd.DataFrame) -> str:
    """The newest restore, summed over its operators, naming the slowest: '6.8 s (2 operators, slowest stateStoreSave 6.4 s)'."""
    restores = events[events.kind == "restore"]
    if restores.empty:
        return "-"
    newest = restores[restores.ts == restores.ts.max()]
    seconds = [(a.get("operator") or "?", float(a.get("duration_seconds") or 0.0)) for a in newest.attributes]
    total = sum(s for _, s in seconds)
    text = f"{fmt.when(newest.ts.iloc[0])}: {fmt.duration(total)}"
    if len(seconds) > 1:
        slowest = max(seconds, key=lambda s: s[1])
        text += f" ({len(seconds)} operators, slowest {slowest[0]} {fmt.duration(slowest[1])})"
    return text


def restart_text(events: pd.DataFrame) -> str:
    restarts = events[events.kind == "query_restarted"]
    if restarts.empty:
        return "-"
    down = restarts.attributes.iloc[-1].get("downtime_seconds")
    return fmt.when(restarts.ts.iloc[-1]) + (f" ({fmt.duration(down)} down)" if down is not None else "")


def summary_row(ctx: Context, q: pd.Series, now: float, found: list[Verdict]) -> dict:
    """One line of the table: verdict (``found``, most severe first), health, newest figures, sparklines,
    last restart and restore."""
    recent = data.recent_batches(ctx.history, ctx.tok, q.query_id)
    span = data.span(ctx.history, ctx.tok, q.query_id)
    events = data.recent_events(ctx.history, ctx.tok, q.query_id)
    lifecycle = events[events.kind.isin(LIFECYCLE_KINDS)]
    last = recent.iloc[-1] if len(recent) else None
    health = derive_health(
        q.last_outcome,
        lifecycle.kind.iloc[-1] if len(lifecycle) else None,
        lifecycle.ts.iloc[-1] if len(lifecycle) else None,
        last.ts if last is not None else None,
        typical_interval(recent.ts.tolist()),
        now,
    )
    top = found[0]

    def value(column: str) -> float | None:
        return None if last is None or fmt.missing(last[column]) else float(last[column])

    return {
        "query": label(ctx.all_queries, q.query_id),
        "verdict": top.text,
        "since": fmt.when(top.since) if top.kind not in ("healthy", "stopped") else "-",
        "runbook": top.runbook(ctx.config.runbook_url),
        "health": health,
        "application": q.app,
        "last batch at": fmt.when(value("ts")),
        "batches": int(span["batches"]),
        "runs": int(q.runs),
        "batch duration": fmt.duration(None if value("duration_ms") is None else value("duration_ms") / 1000.0),  # type: ignore[operator]
        "batch ms trend": _downsample(recent.duration_ms),
        "processed rows/s": fmt.number(value("processed_rps"), 1),
        "processed rows/s trend": _downsample(recent.processed_rps),
        "input rows/s": fmt.number(value("input_rps"), 1),
        "state rows": fmt.number(value("state_rows")),
        "state rows trend": _downsample(recent.state_rows),
        "state memory": fmt.size(value("state_memory_bytes")),
        "last restart": restart_text(events),
        "last restore": restore_text(events),
        "last batch": fmt.number(q.last_batch_id),
        "query id": q.query_id,
    }


def table_for(ctx: Context, frame: pd.DataFrame, now: float, found: dict[str, list[Verdict]]) -> pd.DataFrame:
    return pd.DataFrame([summary_row(ctx, q, now, found[q.query_id]) for q in frame.itertuples()])


COLUMNS = {
    "verdict": st.column_config.TextColumn("verdict", width=520, help="what is wrong, from the observer's signals"),
    "runbook": st.column_config.LinkColumn("runbook", display_text="runbook", width="small"),
    "batches": st.column_config.NumberColumn("batches", format="localized"),
    "runs": st.column_config.NumberColumn("runs", format="localized"),
    "batch ms trend": st.column_config.LineChartColumn("batch duration (recent)", width="small"),
    "processed rows/s trend": st.column_config.LineChartColumn("processed rows/s (recent)", width="small"),
    "state rows trend": st.column_config.LineChartColumn("state rows (recent)", width="small"),
    "query id": st.column_config.TextColumn("query id", width="small", help="the full id"),
}


def render(ctx: Context) -> None:
    scope = ctx.app or "all applications"
    st.header("Queries")
    now = time.time()
    found = {qid: verdict_view.of_query(ctx, qid, now) for qid in ctx.queries.query_id}  # once per query and rerun
    table = table_for(ctx, ctx.queries, now, found)
    table["rank"] = [found[q][0].severity for q in table["query id"]]
    table = table.sort_values(["rank", "query"]).drop(columns=["rank"]).reset_index(drop=True)
    counts = table.health.value_counts()
    st.caption(
        f"{fmt.plural(len(table), 'query', 'queries')} of {fmt.md(scope)} in {fmt.code(ctx.history_display)}: "
        + ", ".join(f"{n} {fmt.md(h)}" for h, n in counts.items())
        + ". Click a row to open its drilldown."
    )
    attention = [(qid, v) for qid in table["query id"] for v in found[qid][:1] if v.severity <= 7]
    if attention:
        st.subheader("Needs attention")
        for qid, v in attention:
            link = "?" + urllib.parse.urlencode({"page": "Query drilldown", "query": qid})
            st.markdown(f"{v.icon} [{fmt.md(label(ctx.all_queries, qid))}](<{link}>): " + verdict_view.line(v, ctx.config.runbook_url))
    key = f"queries_table_{st.session_state.get('table_nonce', 0)}"
    shown = table if ctx.all_queries is None or ctx.all_queries.app.nunique() > 1 else table.drop(columns=["application"])
    st.dataframe(shown, hide_index=True, width="stretch", column_config=COLUMNS, on_select="rerun", selection_mode="single-row", key=key)
    row = clicked_row(key)
    if row is not None:
        st.session_state["table_nonce"] = st.session_state.get("table_nonce", 0) + 1  # a fresh table when we come back
        go("Query drilldown", query=table["query id"].iloc[row], run=None, batch=None)
        st.rerun()
    if ctx.query_id is not None:
        st.button(
            f"Open the drilldown of {fmt.md(label(ctx.all_queries, ctx.query_id))}",
            type="primary",
            on_click=go,
            args=("Query drilldown",),
            kwargs={"query": ctx.query_id, "run": None, "batch": None},
        )
