"""The browser's addresses: one URL path per page, the selection in the query string.

``/drilldown?query=ID&run=R&batch=7`` opens the same view for anyone it is pasted to. Views link to each
other through this module only (by path, never by importing another view), so a page can be moved or
renamed here without touching the pages that point at it. Links written before pages had paths
(``?page=Query+drilldown&query=ID``) still open their page (``legacy_redirect``).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, NoReturn

import streamlit as st

APPLICATIONS = "applications"
QUERIES = "queries"
DRILLDOWN = "drilldown"
RESTORES = "restores"
PARTITIONS = "partitions"
PLACEMENT = "placement"
RUNS = "runs"
CHECKPOINTS = "checkpoints"
STATE = "state"
RUNBOOK = "runbook"  # the verdicts' runbook links (spark_state_observer.browser.verdict.RUNBOOK_PAGE)

FLEET = "fleet"  # no query chosen: the fleet's pages
LIST = "list"  # the queries of the chosen application; a query may be chosen
QUERY = "query"  # one query and a time range
CHECKPOINT = "checkpoint"  # a checkpoint under the roots (works without a history)
DOC = "doc"  # a page of text: no selection, works without a history


@dataclass(frozen=True)
class Route:
    path: str
    title: str
    scope: str
    icon: str


ROUTES = (
    Route(APPLICATIONS, "Applications", FLEET, ":material/apps:"),
    Route(QUERIES, "Queries", LIST, ":material/list:"),
    Route(DRILLDOWN, "Query drilldown", QUERY, ":material/query_stats:"),
    Route(RESTORES, "Restores", QUERY, ":material/restore:"),
    Route(PARTITIONS, "Partitions", QUERY, ":material/grid_on:"),
    Route(PLACEMENT, "Placement", QUERY, ":material/lan:"),
    Route(RUNS, "Runs", QUERY, ":material/history:"),
    Route(CHECKPOINTS, "Checkpoint", CHECKPOINT, ":material/folder_open:"),
    Route(STATE, "State contents", CHECKPOINT, ":material/table_view:"),
    Route(RUNBOOK, "Runbook", DOC, ":material/menu_book:"),
)
BY_PATH = {r.path: r for r in ROUTES}
BY_TITLE = {r.title: r for r in ROUTES}
PAGES_KEY = "_nav_pages"  # this run's st.Page objects by path (switch_page needs the registered object)


HOME = "home"


def pages(render: Callable[[Route], Callable[[], None]], default: str) -> dict[str, Any]:
    """One ``st.Page`` per route, its body ``render(route)``, plus ``/`` (Streamlit's default page has no path
    of its own): a hidden page showing the ``default`` route, so that route keeps its path too. Remembered
    for ``go``."""
    built = {r.path: st.Page(render(r), title=r.title, url_path=r.path, icon=r.icon) for r in ROUTES}
    first = BY_PATH[default]
    built[HOME] = st.Page(render(first), title=first.title, url_path=HOME, icon=first.icon, default=True, visibility="hidden")
    st.session_state[PAGES_KEY] = built
    return built


def href(path: str, **params: Any) -> str:
    """A relative link to a page (it resolves under any base path the server is given), None values left out."""
    query = urllib.parse.urlencode({k: str(v) for k, v in params.items() if v is not None})
    return f"./{path}" + (f"?{query}" if query else "")


KEPT = ("app", "query", "range")  # the selection a page keeps when it opens another (run and batch are the drilldown's)


def go(path: str, **params: Any) -> NoReturn:
    """Open another page with the given selection (None clears a value, the application, query and range
    stay unless given); ends this run. The new URL is complete, so the page opened adds no second entry to
    the browser's history and one Back returns."""
    shown = st.session_state.get("_url") or {}
    params = {**{k: shown.get(k) for k in KEPT}, **params}
    st.session_state["_goto"] = params
    st.switch_page(st.session_state[PAGES_KEY][path], query_params={k: str(v) for k, v in params.items() if v is not None})


def legacy_redirect() -> None:
    """A link of the ``?page=Title`` form opens its page with the rest of its query string."""
    title = st.query_params.get("page")
    route = BY_TITLE.get(title) if title else None
    if route is None:
        return
    rest = {k: st.query_params.get_all(k) for k in st.query_params if k != "page"}
    st.switch_page(st.session_state[PAGES_KEY][route.path], query_params=rest)
