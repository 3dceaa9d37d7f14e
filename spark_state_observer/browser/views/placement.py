"""Placement: which executor held each state partition batch by batch, where state moved and what the moves
cost, and how evenly each operator's state is spread (issue 14; from the history's ``placements``)."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from spark_state_observer.browser import capacity, charts, data, fmt
from spark_state_observer.browser.context import Context, label
from spark_state_observer.model.capacity import stores_per_operator
from spark_state_observer.placement.tracker import skew_ratio

MAX_BATCHES = 120  # newest batches drawn per operator: a readable map (cells stay wider than a pixel)
CAUSES = {
    "executor_removed": "its executor was removed",
    "executor_added": "a new executor took it",
    "locality_fallback": "locality fallback, both executors alive",
    "unknown": "cause unknown",
}


def _op_names(ctx: Context) -> dict[int, str]:
    assert ctx.query_id is not None  # a query's page: app.py renders it only with a query chosen
    ops = data.operator_series(ctx.history, ctx.tok, ctx.query_id, ctx.since, ctx.until)
    if ops.empty:
        return {}
    return {int(i): str(n) for i, n in zip(ops.op_index, ops.op_name.fillna("?"))}


def placement_map(frame: pd.DataFrame, title: str) -> alt.LayerChart | alt.FacetChart:
    """Partitions x batches coloured by executor; migrated cells carry a mark; hover for size and cost."""
    cells = frame.assign(
        moved=frame.moved_from.notna(),
        rows=frame.rows_total.map(fmt.number),
        memory=frame.memory_bytes.map(fmt.size),
        sst=frame.sst_bytes.map(fmt.size),
        load=frame.load_seconds.map(lambda s: "-" if fmt.missing(s) else fmt.duration(float(s))),
        move=[f"from executor {m} ({CAUSES.get(c, c)})" if isinstance(m, str) else "stayed" for m, c in zip(frame.moved_from, frame.cause)],
    )
    tooltip = [
        alt.Tooltip("batch_id:O", title="batch"),
        alt.Tooltip("partition:O"),
        alt.Tooltip("executor:N"),
        alt.Tooltip("host:N"),
        alt.Tooltip("move:N", title="move"),
        alt.Tooltip("load:N", title="store load"),
        alt.Tooltip("rows:N", title="state rows"),
        alt.Tooltip("memory:N", title="state memory"),
        alt.Tooltip("sst:N", title="state bytes (SST)"),
    ]
    rows = cells.partition.nunique()
    base = alt.Chart(cells).encode(
        x=alt.X("batch_id:O", title="batch", axis=alt.Axis(labelOverlap=True, labelAngle=0)),
        y=alt.Y(
            "partition:O", title="partition", axis=alt.Axis(labelOverlap=True, minExtent=charts.Y_AXIS_WIDTH, maxExtent=charts.Y_AXIS_WIDTH)
        ),
    )
    grid = base.mark_rect().encode(color=alt.Color("executor:N", title="executor", legend=charts.LEGEND), tooltip=tooltip)
    marks = base.transform_filter(alt.datum.moved).mark_point(shape="diamond", filled=True, color="black", size=60).encode(tooltip=tooltip)
    return alt.layer(grid, marks).properties(title=title, height=charts.row_step(rows))


def skew_chart(latest: pd.DataFrame, value: str, title: str, unit: str) -> alt.Chart:
    """The latest batch's state per partition, largest first: a hot partition stands out."""
    frame = latest.dropna(subset=[value]).sort_values(value, ascending=False)
    divisor, shown = charts.scale_unit(frame[value], unit)
    frame = frame.assign(shown=frame[value] / divisor)
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("partition:O", sort=list(frame.partition), title="partition"),
            y=alt.Y("shown:Q", title=shown),
            color=alt.Color("executor:N", legend=charts.LEGEND),
            tooltip=[alt.Tooltip("partition:O"), alt.Tooltip("executor:N"), alt.Tooltip("shown:Q", title=shown, format=",.1f")],
        )
        .properties(title=title, height=charts.HEIGHT)
    )


def render(ctx: Context) -> None:
    assert ctx.query_id is not None
    st.header(f"Placement of {fmt.md(label(ctx.all_queries, ctx.query_id))}")
    frame = data.placements(ctx.history, ctx.tok, ctx.query_id, ctx.since, ctx.until)
    if "sst_bytes" not in frame.columns:  # a history written before the bytes were recorded (schema 6, read-only)
        frame = frame.assign(sst_bytes=float("nan"))
    if frame.empty:
        st.info(
            "The history holds no per-partition placement for this query in this range. The observer records it when it "
            "follows placement: live with Spark's UI on (setting placement), or from event logs with `replay` / `watch` "
            "(only event logs carry per-partition sizes and load times)."
        )
        return
    names = _op_names(ctx)
    moved = frame[frame.moved_from.notna()]
    cols = st.columns(4)
    cols[0].metric("batches placed", f"{frame.batch_id.nunique():,}")
    cols[1].metric("partition moves", f"{len(moved):,}")
    cols[2].metric("batches with moves", f"{moved.groupby(['run_id', 'batch_id']).ngroups:,}")
    load = moved.load_seconds.dropna()
    cols[3].metric(
        "load time of moves",
        fmt.duration(float(load.sum())) if len(load) else "-",
        help="Store load time of the moved partitions (RocksDB 4.1+ task metric; event logs only). An aggregation's "
        "moves are under-reported: its tasks open the store twice and report the second, cheap load.",
    )
    st.caption(
        "Each cell is one state partition in one batch, coloured by the executor that ran it; a black diamond marks a "
        "partition that ran on another executor than in its previous batch (its store was loaded from the checkpoint). "
        "Hover for the executor, the cause and cost of a move, and the partition's state size."
    )
    for op_index, op in frame.groupby("op_index"):
        name = names.get(int(op_index), "?")
        st.subheader(f"Operator {fmt.md(op_index)} {fmt.md(name)}")
        newest = sorted(op.batch_id.unique())[-MAX_BATCHES:]
        shown = op[op.batch_id.isin(newest)]
        note = f" (newest {MAX_BATCHES} batches)" if op.batch_id.nunique() > MAX_BATCHES else ""
        st.altair_chart(placement_map(shown, f"Placement map: operator {op_index} {name}{note}"), width="stretch")
        latest = op[op.batch_id == op.batch_id.max()]
        rows_skew = skew_ratio([float(v) for v in latest.rows_total.fillna(0)]) if latest.rows_total.notna().any() else None
        memory_skew = skew_ratio([float(v) for v in latest.memory_bytes.dropna()])
        have_bytes = latest.sst_bytes.notna().any()
        bytes_skew = skew_ratio([float(v) for v in latest.sst_bytes.fillna(0)]) if have_bytes else None
        measures = (("bytes", bytes_skew), ("rows", rows_skew), ("memory", memory_skew))
        st.caption(
            f"Skew in batch {int(latest.batch_id.max())}: largest partition "
            + ", ".join(f"{'-' if v is None else f'{v:.1f}x'} the median by {what}" for what, v in measures)
            + ". Bytes (RocksDB SST files) are the state's size; memory is mostly fixed per store instance."
        )
        if have_bytes:
            st.altair_chart(
                skew_chart(
                    latest.assign(sst_bytes=latest.sst_bytes.fillna(0)),
                    "sst_bytes",
                    f"State bytes (SST) per partition, batch {int(latest.batch_id.max())}",
                    "bytes",
                ),
                width="stretch",
            )
        if latest.memory_bytes.notna().any():
            st.altair_chart(
                skew_chart(latest, "memory_bytes", f"State memory per partition, batch {int(latest.batch_id.max())}", "bytes"),
                width="stretch",
            )
        if latest.rows_total.notna().any():
            st.altair_chart(
                skew_chart(latest, "rows_total", f"State rows per partition, batch {int(latest.batch_id.max())}", "rows"), width="stretch"
            )
        per_executor = latest.groupby("executor", as_index=False).agg(
            partitions=("partition", "count"), memory=("memory_bytes", "sum"), sst=("sst_bytes", "sum")
        )
        st.dataframe(
            pd.DataFrame(
                {
                    "executor": per_executor.executor,
                    "partitions": per_executor.partitions,
                    "state memory": per_executor.memory.map(fmt.size),
                    "state bytes (SST)": per_executor.sst.map(fmt.size) if have_bytes else "-",
                }
            ),
            hide_index=True,
            width="stretch",
        )
    newest_batch = frame[frame.batch_id == frame.batch_id.max()]
    stores_of = {int(i): stores_per_operator(names.get(int(i), "")) for i in newest_batch.op_index.unique()}
    st.subheader("RocksDB memory per executor")
    state = capacity.conf_input("placement_capacity")
    st.dataframe(capacity.per_executor(newest_batch, stores_of, state), hide_index=True, width="stretch")
    st.caption(
        f"Batch {int(newest_batch.batch_id.max())}: the store instances each executor held, the memory Spark reported for them "
        "(event logs only; with bounded memory a share of the executor's shared total, SPARK-53002), and what they can grow to "
        "by the configuration above, against the executor's memoryOverhead."
    )
    capacity.what_if(
        "placement_whatif",
        partitions=int(newest_batch.partition.nunique()),
        operators=int(newest_batch.op_index.nunique()),
        stores=max(stores_of.values(), default=1),
        executors=int(newest_batch.executor.nunique()),
        rows=int(newest_batch.rows_total.sum()) if newest_batch.rows_total.notna().any() else None,
        bytes_per_row=None,
    )
    if not moved.empty:
        st.subheader("Moves")
        table = moved.sort_values(["ts", "op_index", "partition"], ascending=[False, True, True])
        st.dataframe(
            pd.DataFrame(
                {
                    "time": table.ts.map(fmt.when),
                    "batch": table.batch_id,
                    "operator": table.op_index.map(lambda i: f"{i} {names.get(int(i), '?')}"),
                    "partition": table.partition,
                    "from": table.moved_from,
                    "to": table.executor,
                    "cause": table.cause.map(lambda c: CAUSES.get(c, c)),
                    "load": table.load_seconds.map(lambda s: "-" if fmt.missing(s) else fmt.duration(float(s))),
                    "changelog files": table.changelog_files.map(fmt.number),
                }
            ),
            hide_index=True,
            width="stretch",
        )
