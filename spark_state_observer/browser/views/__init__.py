"""The pages, one module each with a ``render(ctx)`` function, by their path (``spark_state_observer.browser.nav``).

A view reads through ``spark_state_observer.browser.data``, shows shared pieces from ``spark_state_observer.browser.parts`` and links
to other pages through ``spark_state_observer.browser.nav``; it never imports another view.
"""

from __future__ import annotations

from typing import Callable

from spark_state_observer.browser import nav
from spark_state_observer.browser.context import Context
from spark_state_observer.browser.views import apps, checkpoint, drilldown, partitions, placement, queries, restores, runbook, runs, state

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
    nav.RUNBOOK: runbook.render,
}
