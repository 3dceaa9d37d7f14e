"""Applications: the fleet at a glance, one row per query with its application (name, static labels and latest id: two applications of one name differ there)
and its own verdict, most severe first. A fleet restarts queries as new applications and runs several
queries per application: one verdict per application would hide all but one of them.

Every cell is shown whole (a static table that wraps, never an ellipsis): a verdict's root cause is what
the on-call engineer reads first. The query opens its drilldown, the application its Queries page.
A history written before applications were recorded (no ``app`` column) shows as one group,
'unknown application'.
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from spark_state_observer.browser import data, fmt, nav
from spark_state_observer.browser.context import Context
from spark_state_observer.browser.parts.summary import table_for

HEALTH = ["failed", "stalled", "running", "idle", "stopped", "retired"]


def fleet_table(ctx: Context, queries: pd.DataFrame, now: float) -> pd.DataFrame:
    """One row per query (plain text): application, labels, query, verdict, since, health, last batch,
    batches, and ``severity``, ``query id``, ``runbook`` for sorting and links; most severe first."""
    found = {qid: data.query_verdicts(ctx.history, ctx.tok, qid, now) for qid in queries.query_id}
    rows = table_for(ctx, queries, now, found)
    out = pd.DataFrame(
        {
            "application": queries.app.tolist(),
            "labels": [", ".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or "-" for labels in queries.labels],
            "application id": [a if isinstance(a, str) and a else "-" for a in queries.get("app_id", pd.Series("", index=queries.index))],
            "query": rows["query"],
            "verdict": rows["verdict"],
            "since": rows["since"],
            "health": rows["health"],
            "last batch at": rows["last batch at"],
            "batches": rows["batches"],
            "severity": [found[q][0].severity for q in rows["query id"]],
            "icon": [found[q][0].icon for q in rows["query id"]],
            "runbook": rows["runbook"],
            "query id": rows["query id"],
        }
    )
    return out.sort_values(["severity", "application", "query"]).reset_index(drop=True)


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """The table as markdown cells, every text from data escaped: the query links to its drilldown, the
    application to its queries, the verdict carries its icon and runbook link."""
    return pd.DataFrame(
        {
            "application": [f"[{fmt.md(a)}]({nav.href(nav.QUERIES, app=a)})" for a in table.application],
            "labels": table.labels.map(fmt.md),
            "application id": table["application id"].map(fmt.md),
            "query": [f"[{fmt.md(q)}]({nav.href(nav.DRILLDOWN, query=qid)})" for q, qid in zip(table["query"], table["query id"])],
            "verdict": [
                f"{icon} {fmt.md(v)}" + (f" · [runbook]({link})" if isinstance(link, str) and link else "")
                for icon, v, link in zip(table.icon, table.verdict, table.runbook)
            ],
            "since": table.since.map(fmt.md),
            "health": table.health.map(fmt.md),
            "last batch at": table["last batch at"].map(fmt.md),
            "batches": table.batches.map(lambda n: fmt.md(fmt.number(n))),
        }
    )


def render(ctx: Context) -> None:
    st.header("Applications")
    queries = ctx.all_queries
    if queries is None:
        return
    if queries.app.eq("unknown application").all():
        st.caption("This history does not record which application wrote each query (no `app` column): all its queries form one group.")
    left, right = st.columns([2, 1])
    text = left.text_input("Filter", key="app_filter", placeholder="application, label or query, e.g. cluster=prod")
    only = right.multiselect("Health", HEALTH, key="app_health", help="queries in these states")
    table = fleet_table(ctx, queries, time.time())
    if text:
        needle = text.lower()
        hit = pd.Series(False, index=table.index)
        for column in ("application", "labels", "application id", "query"):
            hit |= table[column].str.lower().str.contains(needle, regex=False)
        table = table[hit]
    if only:
        table = table[table.health.isin(only)]
    apps = table.application.nunique()
    st.caption(
        f"{fmt.plural(len(table), 'query', 'queries')} in {fmt.plural(apps, 'application')}, most severe first. "
        "A query opens its drilldown, an application its queries."
    )
    if len(table):
        st.table(shown(table), hide_index=True)
        pick = st.selectbox("Application", sorted(table.application.unique()), key="open_app", format_func=str)
        if st.button("Show its queries", type="primary"):
            nav.go(nav.QUERIES, app=pick, query=None)
    elif ctx.app is not None and st.button("Show all applications"):
        nav.go(nav.APPLICATIONS, app=None)
