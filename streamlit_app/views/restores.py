"""Restores and reloads: how long each restart's restore took per operator, and the reloads within
runs, on one time axis with the restarts; next to it the checkpoint inspector's estimate for the same
checkpoint (prediction vs outcome), when a checkpoint root holds this query's checkpoint."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from streamlit_app import charts, checkpoints, data, fmt
from streamlit_app.context import Context, label
from streamlit_app.views.checkpoint import inspect

KINDS = ("restore", "store_reload", "query_restarted", "executor_removed", "executor_added", "partitions_changed")


def points(events: pd.DataFrame) -> pd.DataFrame:
    """One row per restore or reload and operator: time, seconds, operator, what, details."""
    rows = []
    for e in events.itertuples():
        a = e.attributes
        if e.kind == "restore":
            seconds, what = a.get("duration_seconds"), "restore"
        elif e.kind == "store_reload":
            seconds, what = a.get("load_seconds"), "reload"
        else:
            continue
        detail = fmt.attrs({k: v for k, v in a.items() if k not in ("duration_seconds", "load_seconds", "operator", "operator_index")})
        rows.append(
            {
                "ts": e.ts,
                "seconds": float(seconds or 0.0),
                "series": f"{a.get('operator_index')} {a.get('operator')}",
                "what": what,
                "duration": fmt.duration(seconds),
                "detail": detail,
                "run_id": e.run_id,
            }
        )
    return charts.with_time(pd.DataFrame(rows)) if rows else pd.DataFrame()


def restart_table(events: pd.DataFrame) -> pd.DataFrame:
    """One row per restart: when, downtime, restore total and per operator, and how it was measured."""
    rows = []
    restores = events[events.kind == "restore"]
    for e in events[events.kind == "query_restarted"].itertuples():
        mine = restores[restores.run_id == e.run_id]
        per_op = {f"{a.get('operator_index')} {a.get('operator')}": a.get("duration_seconds") for a in mine.attributes}
        rows.append(
            {
                "restarted at": fmt.when(e.ts),
                "run": fmt.short_id(e.run_id),
                "down for": fmt.duration(e.attributes.get("downtime_seconds")),
                "restore (all operators)": fmt.duration(sum(float(v or 0) for v in per_op.values())) if per_op else "-",
                **{f"restore {op}": fmt.duration(v) for op, v in per_op.items()},
                "measured by": ", ".join(sorted({str(a.get("method")) for a in mine.attributes})) or "-",
            }
        )
    return pd.DataFrame(rows).fillna("-")


def render(ctx: Context) -> None:
    qid = ctx.query_id
    st.header(f"Restores and reloads of {label(ctx.all_queries, qid)}")
    events = data.events_of(ctx.history, ctx.tok, qid, KINDS)
    found = points(events)
    restarts = events[events.kind == "query_restarted"]
    measured = None
    if not found.empty and (found.what == "restore").any():
        last = found[found.what == "restore"]
        last = last[last.ts == last.ts.max()]
        measured = float(last.seconds.sum())
    cols = st.columns(4)
    cols[0].metric("restarts", f"{len(restarts):,}")
    cols[1].metric("restores measured", f"{int((found.what == 'restore').sum()) if len(found) else 0:,}")
    cols[2].metric("reloads within runs", f"{int((found.what == 'reload').sum()) if len(found) else 0:,}")
    cols[3].metric("last restore (all operators)", fmt.duration(measured))
    if found.empty:
        st.info(
            "No restore or reload in the history for this query: it has not been restarted from a checkpoint, and no "
            "state store was reloaded within a run."
        )
    else:
        marks = charts.event_frame(pd.DataFrame({"ts": restarts.ts, "kind": restarts.kind, "detail": restarts.attributes.map(fmt.attrs)}))
        dom = charts.domain(found, marks)
        st.altair_chart(charts.restore_points(found, dom, marks), width="stretch")
        table = restart_table(events)
        if not table.empty:
            st.subheader("Per restart")
            st.dataframe(table.iloc[::-1], hide_index=True, width="stretch")
    st.subheader("Prediction vs outcome")
    st.caption(
        "The checkpoint inspector's estimate of a restore from this checkpoint as it is now, next to the last "
        "restore measured for the query."
    )
    path = checkpoints.choose(ctx.config, "restores", qid, ctx.all_queries)
    if path is None:
        return
    report = inspect(ctx, path)
    if report is None or report.estimate is None:
        st.info("The inspector found no state to restore in this checkpoint.")
        return
    e = report.estimate
    cols = st.columns(3)
    cols[0].metric("inspector's estimate", fmt.duration(e.seconds), help=f"rates from {e.basis}; {e.stores} stores, {e.files} files")
    cols[1].metric("last measured restore", fmt.duration(measured))
    ratio = f"{measured / e.seconds:.1f}x the estimate" if measured and e.seconds else "-"
    cols[2].metric("outcome / prediction", ratio)
    st.caption(
        f"{fmt.plural(e.stores, 'store')}, {fmt.plural(e.files, 'file')}, {fmt.size(e.bytes)} to load; rates from "
        f"{e.basis}; slowest store instance {e.slowest_partition}" + (f" ({e.skew:.1f}x the median)" if e.skew else "")
    )
