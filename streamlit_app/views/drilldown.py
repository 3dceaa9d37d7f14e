"""Query drilldown: batches, phases, state per operator, evictions, watermark lag, RocksDB commit
latency and the event timeline on one time axis; any batch's full progress on demand."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from observer.model.phases import PHASES
from streamlit_app import charts, data, fmt
from streamlit_app.context import Context, label

COMMIT_METRICS = ("rocksdbCommitWriteBatchLatency", "rocksdbCommitFlushLatency", "rocksdbCommitCompactLatency",
                  "rocksdbCommitPauseLatency", "rocksdbCommitCheckpointLatency", "rocksdbCommitFileSyncLatencyMs")
PROGRESS_TAIL = 300


def event_frame(events: pd.DataFrame) -> pd.DataFrame:
    """Events with a ``time`` column and their attributes as one ``detail`` string."""
    out = charts.with_time(events)
    out["detail"] = out["attributes"].map(fmt.attrs)
    return out[["time", "ts", "kind", "run_id", "detail"]]


def rocksdb_commit(progress: list[dict]) -> pd.DataFrame:
    """Commit latency breakdown per batch and operator, from the raw progress (only RocksDB reports it)."""
    rows = []
    for p in progress:
        ts = pd.Timestamp(p.get("timestamp")).timestamp() if p.get("timestamp") else None
        for i, op in enumerate(p.get("stateOperators", [])):
            custom = op.get("customMetrics", {})
            if ts is not None and any(m in custom for m in COMMIT_METRICS):
                rows.append({"ts": ts, "operator": f"{i} {op.get('operatorName')}", **{m: custom.get(m) for m in COMMIT_METRICS}})
    return charts.with_time(pd.DataFrame(rows)) if rows else pd.DataFrame()


def render(ctx: Context) -> None:
    qid = ctx.query_id
    st.header(f"Query {label(ctx.queries, qid)}")
    batches = charts.with_time(data.batch_series(ctx.history, ctx.tok, qid, ctx.since, ctx.until))
    if batches.empty:
        st.info("This query has no batches in the chosen range; widen the time range in the sidebar.")
        return
    ops = charts.with_time(data.operator_series(ctx.history, ctx.tok, qid, ctx.since, ctx.until))
    events = event_frame(data.events(ctx.history, ctx.tok, qid, ctx.since, ctx.until))
    dom = charts.domain(batches, events)
    cols = st.columns(5)
    cols[0].metric("batches in range", f"{int(batches.batches.sum()):,}")
    cols[1].metric("newest batch", int(batches.batch_id.iloc[-1]))
    cols[2].metric("mean batch duration", f"{batches.duration_ms.mean():,.0f} ms")
    cols[3].metric("state rows", f"{batches.state_rows.iloc[-1]:,.0f}" if pd.notna(batches.state_rows.iloc[-1]) else "-")
    cols[4].metric("events in range", len(events))
    if int(batches.batches.max()) > 1:
        st.caption(f"Charts show {len(batches):,} time buckets (up to {int(batches.batches.max())} batches each; means, sums of rows).")

    if not events.empty:
        st.altair_chart(charts.event_strip(events, dom), width="stretch")
    st.altair_chart(charts.lines(batches, [p for p in PHASES if p in batches], "Batch phases (stacked)", "ms", dom, events,
                                 stacked=True), width="stretch")
    st.altair_chart(charts.lines(batches, ["input_rps", "processed_rps"], "Rates", "rows/s", dom, events), width="stretch")
    if not ops.empty:
        ops["operator"] = ops.op_index.astype(str) + " " + ops.op_name.fillna("?")
        left, right = st.columns(2)
        left.altair_chart(charts.lines(ops, ["rows_total"], "State rows per operator", "rows", dom, events, series="operator"),
                          width="stretch")
        right.altair_chart(charts.lines(ops, ["memory_bytes"], "State memory per operator", "bytes", dom, events, series="operator"),
                           width="stretch")
        churn = ops.melt(id_vars=["time", "operator"], value_vars=["rows_updated", "rows_removed"], var_name="what", value_name="rows")
        churn["series"] = churn.operator + ": " + churn.what.map({"rows_updated": "added/updated", "rows_removed": "evicted"})
        st.altair_chart(charts.lines(churn, ["rows"], "Additions (rows updated) vs evictions (rows removed)", "rows", dom, events,
                                     series="series"), width="stretch")
    lagged = batches[batches.watermark.fillna(0) > 0]
    if not lagged.empty:
        st.altair_chart(charts.lines(lagged, ["watermark_lag_s"], "Watermark lag (batch time - watermark)", "s", dom, events),
                        width="stretch")
    commit = rocksdb_commit(data.progress_tail(ctx.history, ctx.tok, qid, ctx.until, PROGRESS_TAIL))
    if not commit.empty:
        summed = commit.groupby("time", as_index=False)[list(COMMIT_METRICS)].sum()
        st.altair_chart(charts.lines(summed, list(COMMIT_METRICS), f"RocksDB commit latency (all operators, newest {PROGRESS_TAIL} batches)",
                                     "ms", dom, events, stacked=True), width="stretch")
    st.subheader("Events")
    if events.empty:
        st.caption("No events in this range.")
    else:
        st.dataframe(events.drop(columns=["ts"]).iloc[::-1], hide_index=True, width="stretch")
    batch_detail(ctx, batches)


def batch_detail(ctx: Context, batches: pd.DataFrame) -> None:
    """The full progress JSON of one batch (``load_batch``)."""
    st.subheader("Batch progress")
    runs = data.runs(ctx.history, ctx.tok, ctx.query_id)
    started = dict(zip(runs.run_id, runs.started))
    left, right = st.columns(2)
    run_id = left.selectbox("Run", runs.run_id.tolist()[::-1], format_func=lambda r: f"{r[:8]} (started {fmt.when(started.get(r))})",
                            key="batch_run")
    batch_id = right.number_input("Batch id", min_value=0, value=int(batches.batch_id.iloc[-1]), step=1, key="batch_id")
    progress = data.batch(ctx.history, ctx.query_id, run_id, int(batch_id))
    if progress is None:
        st.info(f"Run {run_id[:8]} has no batch {batch_id} in the history (retention may have removed it).")
    else:
        st.json(progress, expanded=1)
