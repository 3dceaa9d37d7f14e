"""Checkpoint: the inspector's layout and restore estimate, with restore rates from the history."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from spark_state_observer.browser import capacity, checkpoints, fmt
from spark_state_observer.browser.context import Context
from spark_state_observer.browser.parts.inspection import inspect, partition_frame
from spark_state_observer.offline.checkpoint.render import printable, render_text


def render(ctx: Context) -> None:
    st.header("Checkpoint")
    path = checkpoints.choose(ctx.config, "ckpt", ctx.query_id, ctx.all_queries)
    if path is None:
        return
    report = inspect(ctx, path)
    if report is None:
        return
    cols = st.columns(4)
    cols[0].metric("last committed batch", report.last_committed_batch if report.last_committed_batch is not None else "-")
    cols[1].metric("planned, not committed", report.uncommitted_batch if report.uncommitted_batch is not None else "-")
    cols[2].metric("provider", fmt.md(report.provider) if report.provider else "-")
    cols[3].metric("shuffle partitions", report.shuffle_partitions or "-")
    st.caption(f"query id {fmt.code(report.query_id)}; path {fmt.code(printable(report.path))}")
    e = report.estimate
    if e:
        st.subheader("Restore estimate")
        cols = st.columns(4)
        cols[0].metric("restore time (estimate)", fmt.duration(e.seconds), help="summed over stores, as Spark's load metrics report it")
        cols[1].metric("stores", f"{e.stores:,}")
        cols[2].metric("files / bytes", f"{e.files:,} / {fmt.size(e.bytes)}")
        cols[3].metric("skew (slowest / median)", f"{e.skew:.1f}x" if e.skew else "-")
        st.caption(f"This is {e.described()}. Slowest store instance {fmt.md(e.slowest_partition)}.")
    for problem in report.problems:
        st.warning(fmt.md(printable(problem)))
    st.subheader("Operators and stores")
    st.dataframe(
        pd.DataFrame(
            [
                {"operator": op.operator_id, "name": op.name, "stores": ", ".join(op.stores), "partitions": op.num_partitions}
                for op in report.operators
            ]
        ),
        hide_index=True,
    )
    parts = partition_frame(report)
    st.dataframe(
        parts,
        hide_index=True,
        width="stretch",
        column_config={
            "state bytes": st.column_config.NumberColumn(format="bytes"),
            "restore bytes": st.column_config.NumberColumn(format="bytes"),
        },
    )
    if report.footprint:
        st.subheader("Footprint in the checkpoint's storage")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "operator": f"{f.operator_id} {f.name or '?'}",
                        "total": fmt.size(f.total_bytes),
                        "snapshots": fmt.size(f.snapshot_bytes),
                        "SSTs": fmt.size(f.sst_bytes),
                        "deltas / changelogs": fmt.size(f.replay_bytes),
                        "after newest snapshots": fmt.size(f.since_snapshot_bytes),
                        "versions kept": f.retained_versions,
                    }
                    for f in report.footprint
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    partitions = report.shuffle_partitions or max((op.num_partitions or 0 for op in report.operators), default=0)
    capacity.what_if(
        "checkpoint_whatif",
        partitions=partitions,
        operators=len(report.operators),
        stores=max((len(op.stores) for op in report.operators), default=1),
        executors=1,
        rows=None,
        bytes_per_row=None,
    )
    with st.expander("Inspector report (text)"):
        st.code(render_text(report), language=None)
