"""Entry point of the state browser (``streamlit run spark_state_observer/browser/app.py -- --history DB``).

Pages are ``st.Page``s with URL paths (``spark_state_observer.browser.nav``: ``/applications``, ``/drilldown?query=ID``,
...), each the ``render(ctx)`` of a module of ``spark_state_observer.browser.views``. The sidebar under the page list
picks the application, the query and the range, and offers refresh; the selection lives in the query
string (``context.write_url``), so every page, query, run and batch has a link and Back works.
Auto-refresh reruns only the page (a fragment), so the sidebar keeps its state while the charts follow
the job.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # started as a script: make the repository (or site) importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from typing import Callable

import streamlit as st

from spark_state_observer.browser import data, fmt, nav
from spark_state_observer.browser.config import load_config
from spark_state_observer.browser.context import (
    DEFAULT_RANGE,
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
from spark_state_observer.browser.views import RENDER
from spark_state_observer.history.url import redact

st.set_page_config(page_title="Spark state browser", page_icon="🗄️", layout="wide")
# a static table wraps a long word (an error class, a path) instead of letting it run out of its cell
st.html("<style>[data-testid='stTable'] td, [data-testid='stTable'] td * { overflow-wrap: anywhere !important; }</style>")

config = load_config()
sync_from_url()
apply_navigation()
ctx = Context(config, data.token(config.history))
everything = history_queries(ctx)  # says why when the history cannot be read or is empty
many_apps = everything is not None and everything.app.nunique() > 1
auto = {"every": "off"}


def body(route: nav.Route) -> Callable[[], None]:
    """The page's script: its view over the current selection, in a fragment when auto-refresh is on."""

    def render_page() -> None:
        RENDER[route.path](ctx.fresh())
        flush_url()

    def run() -> None:
        if auto["every"] == "off":
            render_page()
        else:
            st.fragment(run_every=float(auto["every"].split()[0]))(render_page)()

    return run


current = st.navigation(list(nav.pages(body, nav.APPLICATIONS if many_apps else nav.QUERIES).values()))
nav.legacy_redirect()
route = nav.BY_TITLE[current.title]
ctx.page = route.path
st.session_state["page"] = route.title  # the page shown, for whoever drives the session (tests, embedders)
st.sidebar.caption(fmt.TIME_NOTE)
refresh, every = st.sidebar.columns(2)
refresh.button("Refresh", help="read the history again (new batches appear as the job writes them)")
auto["every"] = every.selectbox("Auto", ["off", "5 s", "15 s", "60 s"], key="auto_refresh", help="auto-refresh interval")

if everything is None and route.scope not in (nav.CHECKPOINT, nav.DOC):
    flush_url()
    st.stop()
if everything is not None:
    ctx.all_queries = everything
    ctx.app = select_app(ctx, everything)
    ctx.queries = everything if ctx.app is None else everything[everything.app == ctx.app].reset_index(drop=True)
    if route.scope not in (nav.FLEET, nav.DOC):
        ctx.query_id = select_query(ctx, ctx.queries)
        if ctx.query_id is None and route.scope == nav.QUERY:
            write_url(app=ctx.app)
            flush_url()
            st.stop()
    if route.scope == nav.QUERY and ctx.query_id is not None:
        ctx.since, ctx.until, ctx.span = select_range(ctx, ctx.query_id)
st.sidebar.caption(f"History: {fmt.code(redact(config.history))}")
if config.checkpoint_roots:
    st.sidebar.caption("Checkpoint roots: " + ", ".join(fmt.code(r) for r in config.checkpoint_roots))
write_url(
    app=ctx.app,
    query=ctx.query_id,
    range=st.session_state.get("range") if route.scope == nav.QUERY and st.session_state.get("range") != DEFAULT_RANGE else None,
    **({} if route.path == nav.DRILLDOWN else {"run": None, "batch": None}),
)  # the drilldown writes its run and batch
current.run()
