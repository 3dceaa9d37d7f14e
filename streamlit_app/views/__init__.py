"""The pages, in sidebar order; QUERY_PAGES get the sidebar's query and time range, FLEET_PAGES no query."""

from __future__ import annotations

from typing import Callable

from streamlit_app.views import apps, checkpoint, drilldown, partitions, placement, queries, restores, runs, state

PAGES: dict[str, Callable] = {
    "Applications": apps.render,
    "Queries": queries.render,
    "Query drilldown": drilldown.render,
    "Restores": restores.render,
    "Partitions": partitions.render,
    "Placement": placement.render,
    "Runs": runs.render,
    "Checkpoint": checkpoint.render,
    "State contents": state.render,
}
QUERY_PAGES = frozenset({"Query drilldown", "Restores", "Partitions", "Placement", "Runs"})
FLEET_PAGES = frozenset({"Applications"})
