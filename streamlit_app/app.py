"""Entry point of the state browser (``streamlit run streamlit_app/app.py -- --history DB``).

The sidebar picks the page, the application, the query and the range, and offers refresh; each page
is a module of ``streamlit_app.views`` with a ``render(ctx)`` function. The view lives in the URL
(``context.write_url``), so every page, query, run and batch has a link and Back works. Auto-refresh
reruns only the page (a fragment), so the sidebar keeps its state while the charts follow the job.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # started as a script: make the repository (or site) importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import streamlit as st

from observer.history.url import redact
from streamlit_app import data, fmt
from streamlit_app.config import load_config
from streamlit_app.context import (
    Context,
    apply_navigation,
    flush_url,
    history_queries,
    select_app,
    select_query,
    select_range,
    sync_from_url,
    write_url,
)
from streamlit_app.views import FLEET_PAGES, PAGES, QUERY_PAGES

st.set_page_config(page_title="Spark state browser", page_icon="🗄️", layout="wide")

config = load_config()
sync_from_url(list(PAGES))
apply_navigation()
ctx = Context(config, data.token(config.history))
st.sidebar.title("Spark state browser")
st.sidebar.caption(fmt.TIME_NOTE)
everything = history_queries(ctx)  # says why when the history cannot be read or is empty
if "page" not in st.session_state or st.session_state["page"] not in PAGES:
    many_apps = everything is not None and everything.app.nunique() > 1
    st.session_state["page"] = "Applications" if many_apps else "Queries"
page = st.sidebar.radio("Page", list(PAGES), key="page")
refresh, auto = st.sidebar.columns(2)
refresh.button("Refresh", help="read the history again (new batches appear as the job writes them)")
every = auto.selectbox("Auto", ["off", "5 s", "15 s", "60 s"], key="auto_refresh", help="auto-refresh interval")

if everything is None and page not in ("Checkpoint", "State contents"):
    write_url(page=page)
    flush_url()
    st.stop()
if everything is not None:
    ctx.all_queries = everything
    ctx.app = select_app(ctx, everything)
    ctx.queries = everything if ctx.app is None else everything[everything.app == ctx.app].reset_index(drop=True)
    if page not in FLEET_PAGES:
        ctx.query_id = select_query(ctx, ctx.queries)
        if ctx.query_id is None and page in QUERY_PAGES:
            write_url(page=page, app=ctx.app)
            flush_url()
            st.stop()
    if page in QUERY_PAGES and ctx.query_id is not None:
        ctx.since, ctx.until, ctx.span = select_range(ctx, ctx.query_id)
st.sidebar.caption(f"History: {fmt.code(redact(config.history))}")
if config.checkpoint_roots:
    st.sidebar.caption("Checkpoint roots: " + ", ".join(fmt.code(r) for r in config.checkpoint_roots))
write_url(
    page=page,
    app=ctx.app,
    query=ctx.query_id,
    range=st.session_state.get("range") if page in QUERY_PAGES else None,
    **({} if page == "Query drilldown" else {"run": None, "batch": None}),
)  # the drilldown writes its run and batch


def render_page() -> None:
    PAGES[page](ctx.fresh())
    flush_url()


if every == "off":
    render_page()
else:
    st.fragment(run_every=float(every.split()[0]))(render_page)()
