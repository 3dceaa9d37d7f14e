"""The pages, one module each with a ``render(ctx)`` function, by their path (``streamlit_app.nav``).

A view reads through ``streamlit_app.data``, shows shared pieces from ``streamlit_app.parts`` and links
to other pages through ``streamlit_app.nav``; it never imports another view.
"""

from __future__ import annotations

from typing import Callable

from streamlit_app import nav
from streamlit_app.context import Context
from streamlit_app.views import apps, checkpoint, drilldown, partitions, placement, queries, restores, runs, state

RENDER: dict[str, Callable[[Context], None]] = {
    nav.APPLICATIONS: apps.render,
    nav.QUERIES: queries.render,
    nav.DRILLDOWN: drilldown.render,
    nav.RESTORES: restores.render,
    nav.PARTITIONS: partitions.render,
    nav.PLACEMENT: placement.render,
    nav.RUNS: runs.render,
    nav.CHECKPOINTS: checkpoint.render,
    nav.STATE: state.render,
}
