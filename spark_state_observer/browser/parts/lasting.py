"""A query's lasting state in the drilldown, and the button that retires it.

The watcher keeps a failed or crash-looping query failed across applications (``spark_state_observer.fleet.query_statuses``)
until a later run runs, and a query on a schedule waiting for its next run; a query that will never run again (its job removed, its checkpoint deleted) is retired
here, as ``spark-state-observer retire`` does: the one write the browser makes, into the history's
``query_status`` table, which every watcher on that history reads within seconds.
"""

from __future__ import annotations

import streamlit as st

from spark_state_observer.browser import data, fmt
from spark_state_observer.browser.context import Context
from spark_state_observer.model.query_lifecycle import LASTING, RETIRED, SCHEDULED


def show(ctx: Context, query_id: str) -> None:
    """The lasting state's line and, while it lasts, the retire button; nothing for a query without one."""
    state = data.lasting_states(ctx.history, ctx.tok).get(query_id)
    if state == RETIRED:
        st.caption("Retired: the watchers no longer report this query as failed; a later run of it is followed as usual.")
    elif state in LASTING:
        left, right = st.columns([4, 1])
        if state == SCHEDULED:
            left.info(
                "This query runs on a schedule: between its runs the watchers keep it, and alert when its next run is late "
                "(SparkStreamingScheduledRunOverdue). If its schedule was removed, retire it."
            )
        else:
            left.warning(
                f"This query is {fmt.md(state.replace('_', ' '))} across applications: the watchers report it (and its alert fires) "
                "until a later run of it runs. If it will never run again, retire it."
            )
        if right.button(
            "Retire this query", key="retire_query", help="records the retirement in the history (spark-state-observer retire)"
        ):
            try:
                retired = data.retire(ctx.history, query_id)
            except data.HistoryUnavailable as exc:
                st.error(f"Not retired: {fmt.md(str(exc))}")
                return
            st.success("Retired." if retired else "Nothing to retire: its state changed meanwhile.")
