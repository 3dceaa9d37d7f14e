"""Queries: every query of the application with its verdict first (what is wrong, since when, the
runbook), then its health, newest figures, sparklines and last restart and restore. A row opens the
query's drilldown."""

from __future__ import annotations

import dataclasses
import time

import streamlit as st

from spark_state_observer.browser import data, fmt, nav
from spark_state_observer.browser.context import Context, clicked_row, label
from spark_state_observer.browser.parts import verdicts as verdict_view
from spark_state_observer.browser.parts.summary import table_for
from spark_state_observer.browser.verdict import ATTENTION_UP_TO, headline

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
    assert ctx.queries is not None  # app.py renders a page only once the history has queries
    scope = ctx.app or "all applications"
    st.header("Queries")
    now = time.time()
    found = {qid: data.query_verdicts(ctx.history, ctx.tok, qid, now) for qid in ctx.queries.query_id}  # once per query and rerun
    table = table_for(ctx, ctx.queries, now, found)
    table["rank"] = [found[q][0].severity for q in table["query id"]]
    table = table.sort_values(["rank", "query"]).drop(columns=["rank"]).reset_index(drop=True)
    counts = table.health.value_counts()
    st.caption(
        f"{fmt.plural(len(table), 'query', 'queries')} of {fmt.md(scope)} in {fmt.code(ctx.history_display)}: "
        + ", ".join(f"{n} {fmt.md(h)}" for h, n in counts.items())
        + ". Click a row to open its drilldown."
    )
    # the top verdict, every executor loss in its line (``headline``): a second loss is not hidden behind the first
    attention = [
        (qid, dataclasses.replace(v, text=headline(found[qid])))
        for qid in table["query id"]
        for v in found[qid][:1]
        if v.severity <= ATTENTION_UP_TO
    ]
    if attention:
        st.subheader("Needs attention")
        for qid, v in attention:
            link = nav.href(nav.DRILLDOWN, query=qid)
            st.markdown(f"{v.icon} [{fmt.md(label(ctx.all_queries, qid))}](<{link}>): " + verdict_view.line(v, ctx.config.runbook_url))
    key = f"queries_table_{st.session_state.get('table_nonce', 0)}"
    shown = table if ctx.all_queries is None or ctx.all_queries.app.nunique() > 1 else table.drop(columns=["application"])
    st.dataframe(shown, hide_index=True, width="stretch", column_config=COLUMNS, on_select="rerun", selection_mode="single-row", key=key)
    row = clicked_row(key)
    if row is not None:
        st.session_state["table_nonce"] = st.session_state.get("table_nonce", 0) + 1  # a fresh table when we come back
        nav.go(nav.DRILLDOWN, query=table["query id"].iloc[row], run=None, batch=None)
    if ctx.query_id is not None and st.button(f"Open the drilldown of {fmt.md(label(ctx.all_queries, ctx.query_id))}", type="primary"):
        nav.go(nav.DRILLDOWN, query=ctx.query_id, run=None, batch=None)
