"""Partitions: snapshot lag per store instance over time (history) and state size per partition
(checkpoint), so skew and a stuck snapshot uploader show at a glance."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from spark_state_observer.browser import charts, checkpoints, data, fmt
from spark_state_observer.browser.context import Context, label
from spark_state_observer.browser.parts.inspection import inspect, partition_frame

BUCKETS = 60


def columns(frame: pd.DataFrame, count: int = BUCKETS) -> pd.DataFrame:
    """One heatmap column per equal slice of time (not per batch id: each store instance reports in
    different batches), the worst lag of each instance in it; instances in partition order."""
    lo, hi = float(frame.ts.min()), float(frame.ts.max())
    width = (hi - lo) / count or 1.0
    start = lo + ((frame.ts - lo) // width).clip(upper=count - 1) * width
    out = frame.assign(bucket=start.map(lambda t: fmt.when(t)[5:16]), order=start, instance=frame.partition.astype(str) + "/" + frame.store)
    out = out.groupby(["bucket", "order", "partition", "instance"], as_index=False).snapshot_lag.max()
    return out.sort_values(["order", "partition"])


def render(ctx: Context) -> None:
    assert ctx.query_id is not None  # a query's page: app.py renders it only with a query chosen
    st.header(f"Partitions of {fmt.md(label(ctx.all_queries, ctx.query_id))}")
    lag = data.partition_lag(ctx.history, ctx.tok, ctx.query_id, ctx.since, ctx.until, BUCKETS)
    if lag.empty:
        st.info(
            "The progress history holds no per-partition figures for this range (Spark reports "
            "SnapshotLastUploaded per store instance only with RocksDB on Spark 4.1 and later, for the "
            "most lagging instances)."
        )
    else:
        st.subheader("Snapshot lag (versions since the last uploaded snapshot), from the progress history")
        lag = charts.with_time(lag)
        for op_index, frame in lag.groupby("op_index"):
            st.altair_chart(
                charts.heatmap(
                    columns(frame), "bucket", "instance", "snapshot_lag", f"operator {op_index}", "time (UTC, start of each column)"
                ),
                width="stretch",
            )
        newest = lag[lag.ts == lag.groupby(["op_index", "partition", "store"]).ts.transform("max")]
        newest = newest.sort_values(["snapshot_lag", "partition"], ascending=[False, True])
        table = pd.DataFrame(
            {
                "partition": newest.partition,
                "store": newest.store,
                "snapshot lag (versions)": newest.snapshot_lag,
                "last uploaded snapshot": newest.snapshot_version.map(fmt.number),
                "batch": newest.batch_id,
                "operator": newest.op_index,
                "time": newest.ts.map(fmt.when),
            }
        )
        st.dataframe(
            table,
            hide_index=True,
            width="stretch",
            column_config={
                "batch": st.column_config.NumberColumn(format="localized"),
                "snapshot lag (versions)": st.column_config.NumberColumn(format="localized"),
            },
        )
    st.subheader("State size per partition, from the checkpoint")
    path = checkpoints.choose(ctx.config, "parts", ctx.query_id, ctx.all_queries)
    if path is None:
        return
    report = inspect(ctx, path)
    if report is None:
        return
    frame = partition_frame(report)
    if frame.empty:
        st.info("This checkpoint holds no state.")
        return
    st.altair_chart(
        charts.heatmap(frame, "operator", "partition", "state bytes", "State bytes per partition", "operator", unit="bytes"),
        width="stretch",
    )
    st.dataframe(
        frame.assign(**{"state bytes": frame["state bytes"].map(fmt.size), "restore bytes": frame["restore bytes"].map(fmt.size)}),
        hide_index=True,
        width="stretch",
    )
