"""Applications: the fleet at a glance, one row per application (its name and static labels), with its
queries' health and the worst verdict among them; a row scopes every other page to that application.

A history written before applications were recorded (no ``app`` column) shows as one group, 'unknown
application'.
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from streamlit_app import fmt
from streamlit_app.context import ALL_APPS, Context, clicked_row, go
from streamlit_app.views import verdicts as verdict_view
from streamlit_app.views.queries import table_for


def fleet_table(ctx: Context, queries: pd.DataFrame, now: float) -> pd.DataFrame:
    """One row per application: labels, queries, health counts, the worst verdict and its query."""
    found = {qid: verdict_view.of_query(ctx, qid, now) for qid in queries.query_id}
    per_query = table_for(ctx, queries, now, found)
    per_query["severity"] = [found[q][0].severity for q in per_query["query id"]]
    per_query["app"] = queries.app.tolist()
    per_query["labels"] = [", ".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) for labels in queries.labels]
    rows = []
    for app, group in per_query.groupby("app", sort=True):
        worst = group.sort_values("severity").iloc[0]
        health = group.health.value_counts()
        rows.append(
            {
                "application": app,
                "labels": group.labels.iloc[0] or "-",
                "worst verdict": f"{worst.query}: {worst.verdict}",
                "queries": len(group),
                "health": ", ".join(f"{n} {h}" for h, n in health.items()),
                "last batch at": max((t for t in group["last batch at"] if t != "-"), default="-"),
                "batches": int(group.batches.sum()),
                "severity": int(worst.severity),
            }
        )
    return pd.DataFrame(rows).sort_values(["severity", "application"]).reset_index(drop=True)


def render(ctx: Context) -> None:
    st.header("Applications")
    queries = ctx.all_queries
    if queries is None:
        return
    if queries.app.eq("unknown application").all():
        st.caption("This history does not record which application wrote each query (no `app` column): all its queries form one group.")
    left, right = st.columns([2, 1])
    text = left.text_input("Filter applications", key="app_filter", placeholder="name or label, e.g. cluster=prod")
    only = right.multiselect(
        "Health",
        ["failed", "stalled", "running", "idle", "stopped"],
        key="app_health",
        help="applications with at least one query in this state",
    )
    now = time.time()
    table = fleet_table(ctx, queries, now)
    if text:
        needle = text.lower()
        table = table[
            table.application.str.lower().str.contains(needle, regex=False) | table.labels.str.lower().str.contains(needle, regex=False)
        ]
    if only:
        table = table[table.health.map(lambda h: any(word in h for word in only))]
    st.caption(
        f"{fmt.plural(len(table), 'application')}, {fmt.plural(int(table.queries.sum()) if len(table) else 0, 'query', 'queries')}. "
        "Click a row to see its queries."
    )
    key = f"apps_table_{st.session_state.get('table_nonce', 0)}"
    st.dataframe(
        table.drop(columns=["severity"]).reset_index(drop=True),
        hide_index=True,
        width="stretch",
        key=key,
        on_select="rerun",
        selection_mode="single-row",
        column_config={
            "worst verdict": st.column_config.TextColumn(width="large"),
            "batches": st.column_config.NumberColumn(format="localized"),
        },
    )
    row = clicked_row(key)
    if row is not None:
        st.session_state["table_nonce"] = st.session_state.get("table_nonce", 0) + 1
        go("Queries", app=table.application.iloc[row], query=None)
        st.rerun()
    if len(table):
        pick = st.selectbox("Application", table.application.tolist(), key="open_app")
        st.button("Show its queries", type="primary", on_click=go, args=("Queries",), kwargs={"app": pick, "query": None})
    elif ctx.app is not None:
        st.button("Show all applications", on_click=go, args=("Applications",), kwargs={"app": ALL_APPS})
