"""The pages, in sidebar order; QUERY_PAGES get the sidebar's query and time range."""

from __future__ import annotations

from typing import Callable

from streamlit_app.views import checkpoint, drilldown, partitions, queries, runs, state

PAGES: dict[str, Callable] = {
    "Queries": queries.render,
    "Query drilldown": drilldown.render,
    "Partitions": partitions.render,
    "Runs": runs.render,
    "Checkpoint": checkpoint.render,
    "State contents": state.render,
}
QUERY_PAGES = frozenset({"Query drilldown", "Partitions", "Runs"})
