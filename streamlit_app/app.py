"""Entry point of the state browser (``streamlit run streamlit_app/app.py -- --history DB``).

The sidebar picks the page, the query and the range, and offers refresh; each page is a module of
``streamlit_app.views`` with a ``render(ctx)`` function. Auto-refresh reruns only the page (a
fragment), so the sidebar keeps its state while the charts follow the job.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # started as a script: make the repository (or site) importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import streamlit as st

from observer.history.url import redact
from streamlit_app import data
from streamlit_app.config import load_config
from streamlit_app.context import Context, history_queries, select_query, select_range
from streamlit_app.views import PAGES, QUERY_PAGES

st.set_page_config(page_title="Spark state browser", page_icon="🗄️", layout="wide")

config = load_config()
if "page" not in st.session_state:  # a deep link: ?page=Partitions&query=<id>
    linked = st.query_params.get("page")
    st.session_state["page"] = linked if linked in PAGES else "Queries"
    if st.query_params.get("query"):
        st.session_state["query_id"] = st.query_params["query"]

st.sidebar.title("Spark state browser")
page = st.sidebar.radio("Page", list(PAGES), key="page")
st.query_params["page"] = page
refresh, auto = st.sidebar.columns(2)
refresh.button("Refresh", help="read the history again (new batches appear as the job writes them)")
every = auto.selectbox("Auto", ["off", "5 s", "15 s", "60 s"], key="auto_refresh", help="auto-refresh interval")

ctx = Context(config, data.token(config.history))
if page in QUERY_PAGES:
    ctx.queries = history_queries(ctx)
    if ctx.queries is None:
        st.stop()
    ctx.query_id = select_query(ctx, ctx.queries)
    if ctx.query_id is None:
        st.stop()
    ctx.since, ctx.until, ctx.span = select_range(ctx, ctx.query_id)
st.sidebar.caption(f"History: `{redact(config.history)}`")
if config.checkpoint_roots:
    st.sidebar.caption("Checkpoint roots: " + ", ".join(f"`{r}`" for r in config.checkpoint_roots))


def render_page() -> None:
    PAGES[page](ctx.fresh())


if every == "off":
    render_page()
else:
    st.fragment(run_every=float(every.split()[0]))(render_page)()
