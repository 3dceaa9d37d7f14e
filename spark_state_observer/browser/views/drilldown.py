"""Query drilldown: the verdict and root cause first, then the effective state configuration, batches,
phases, rates and the event timeline on one time axis, the commit summary (min / avg / max); any batch's
full progress on demand (an event row opens the batch it concerns). Reached by URL: ``/drilldown?query=ID``.

The first paint holds what a person reads first. State per operator, evictions, watermark lag, RocksDB
commit latency and the per-window commit history are in expanders that read and draw their part only
once opened (each chart costs the server its spec and the browser a Vega compile and draw)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from spark_state_observer.browser import charts, commits, data, effective, fmt, nav
from spark_state_observer.browser.context import Context, clicked_row, label, write_url
from spark_state_observer.browser.parts import kafka_offsets, lasting
from spark_state_observer.browser.parts import verdicts as verdict_view
from spark_state_observer.model.phases import PHASES
from spark_state_observer.model.signal_kinds import PARTITION_MIGRATED

COMMIT_METRICS = commits.COMMIT_LATENCIES
COMMIT_NAMES = {
    "rocksdbCommitWriteBatchLatency": "write batch",
    "rocksdbCommitFlushLatency": "flush",
    "rocksdbCommitCompactLatency": "compaction",
    "rocksdbCommitPauseLatency": "pause background work",
    "rocksdbCommitCheckpointLatency": "checkpoint",
    "rocksdbCommitFileSyncLatencyMs": "file sync",
}
RATE_NAMES = {"input_rps": "input", "processed_rps": "processed"}
PROGRESS_TAIL = 300
CHART_POINTS = 1000  # time buckets per chart: about one per pixel of a chart's width on a wide screen


def event_table(events: pd.DataFrame) -> pd.DataFrame:
    """Events with their time, plain-words kind and details (attributes with units)."""
    out = pd.DataFrame({"ts": events["ts"], "kind": events["kind"], "run_id": events["run_id"]})
    out["detail"] = events["attributes"].map(fmt.attrs)
    out["batch"] = events["attributes"].map(lambda a: a.get("batch_id"))
    return out


def rocksdb_commit(progress: list[dict[str, Any]]) -> pd.DataFrame:
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
    assert ctx.query_id is not None  # a query's page: app.py renders it only with a query chosen
    qid = ctx.query_id
    st.header(f"Query {fmt.md(label(ctx.all_queries, qid))}")
    runs = data.run_stats(ctx.history, ctx.tok, qid)
    newest = f" · newest run {fmt.code(runs.run_id.iloc[-1])}" if len(runs) else ""
    st.caption(f"query id {fmt.code(qid)}{newest}")
    verdict_view.show(ctx, data.query_verdicts(ctx.history, ctx.tok, qid))
    lasting.show(ctx, qid)
    progress = data.progress_tail(ctx.history, ctx.tok, qid, ctx.until, PROGRESS_TAIL)
    config_panel(progress)
    batches = charts.with_time(data.batch_series(ctx.history, ctx.tok, qid, ctx.since, ctx.until, max_points=CHART_POINTS))
    if batches.empty:
        if (ctx.span or {}).get("batches"):
            st.info("This query has no batches in the chosen range; widen the time range in the sidebar.")
        else:
            failed = int((runs.outcome == "exception").sum()) if len(runs) else 0
            st.info(
                f"This query has not completed a batch: {fmt.plural(len(runs), 'run')} in the history, "
                f"{failed} ended with an exception before its first batch. The verdict above has the cause; "
                "the Runs page lists every run."
            )
        return
    raw_events = data.events(ctx.history, ctx.tok, qid, ctx.since, ctx.until)
    table = event_table(raw_events)
    events = charts.event_frame(table)
    dom = charts.domain(batches, events)
    cols = st.columns(5)
    cols[0].metric("batches in range", f"{int(batches.batches.sum()):,}")
    cols[1].metric("newest batch", f"{int(batches.batch_id.iloc[-1]):,}")
    cols[2].metric("mean batch duration", fmt.duration(batches.duration_ms.mean() / 1000.0))
    cols[3].metric("state rows", fmt.compact(batches.state_rows.iloc[-1]), help=fmt.number(batches.state_rows.iloc[-1]))
    cols[4].metric("events in range", f"{len(raw_events):,}")
    shown = f"From {fmt.when(batches.ts.iloc[0])} to {fmt.when(batches.ts.iloc[-1])}."
    if int(batches.batches.max()) > 1:
        shown += f" Charts show {len(batches):,} time buckets (up to {int(batches.batches.max()):,} batches each; means, sums of rows)."
    st.caption(shown)
    moves = raw_events[raw_events.kind == PARTITION_MIGRATED] if len(raw_events) else raw_events
    if st.button(
        f"Placement map: where each state partition ran{f' ({len(moves)} batches with moves)' if len(moves) else ''}",
        key="to_placement",
    ):
        nav.go(nav.PLACEMENT, query=qid)

    if not events.empty:
        st.altair_chart(charts.event_strip(events, dom), width="stretch")
    st.altair_chart(
        charts.lines(batches, [p for p in PHASES if p in batches], "Batch phases (stacked)", "ms", dom, events, stacked=True),
        width="stretch",
    )
    st.altair_chart(
        charts.lines(batches, ["input_rps", "processed_rps"], "Rates", "rows/s", dom, events, names=RATE_NAMES), width="stretch"
    )
    with st.expander("State per operator: rows, memory, additions and evictions", key="more_state", on_change="rerun") as box:
        if box.open:
            state_charts(ctx, dom, events)
    with st.expander("Watermark lag and RocksDB commit latency", key="more_lag", on_change="rerun") as box:
        if box.open:
            lag_charts(batches, progress, dom, events)
    commit_history(progress)
    restarted = data.restarted_run(data.recent_events(ctx.history, ctx.tok, qid))
    kafka_offsets.show(progress, data.kafka_restart_of(ctx.history, ctx.tok, qid, restarted) if restarted else None)
    st.subheader("Events")
    if table.empty:
        st.caption("No events in this range.")
    else:
        shown = table.iloc[::-1].reset_index(drop=True)
        view = pd.DataFrame(
            {
                "time": shown.ts.map(fmt.when),
                "event": shown.kind.map(fmt.kind),
                "details": shown.detail,
                "run": shown.run_id.map(fmt.short_id),
                "batch": shown.batch.map(fmt.number),
            }
        )
        key = f"events_{st.session_state.get('table_nonce', 0)}"
        st.caption("Click an event to show the batch it concerns below.")
        st.dataframe(
            view,
            hide_index=True,
            width="stretch",
            key=key,
            on_select="rerun",
            selection_mode="single-row",
            column_config={"details": st.column_config.TextColumn(width="large")},
        )
        row = clicked_row(key)
        if row is not None:
            event = shown.iloc[row]
            st.session_state["table_nonce"] = st.session_state.get("table_nonce", 0) + 1
            st.session_state["_event_batch"] = (event.run_id, event.batch, float(event.ts))
            st.rerun()
    batch_detail(ctx)


def state_charts(ctx: Context, dom: list[str] | None, events: pd.DataFrame) -> None:
    """State rows, memory and churn per operator (read and drawn only while their expander is open)."""
    assert ctx.query_id is not None  # a query's page: app.py renders it only with a query chosen
    ops = charts.with_time(data.operator_series(ctx.history, ctx.tok, ctx.query_id, ctx.since, ctx.until, max_points=CHART_POINTS))
    if ops.empty:
        st.caption("No stateful operator reported in this range.")
        return
    ops["operator"] = ops.op_index.astype(str) + " " + ops.op_name.fillna("?")
    st.altair_chart(charts.lines(ops, ["rows_total"], "State rows per operator", "rows", dom, events, series="operator"), width="stretch")
    st.altair_chart(
        charts.lines(ops, ["memory_bytes"], "State memory per operator", "bytes", dom, events, series="operator"), width="stretch"
    )
    churn = ops.melt(
        id_vars=["ts", "time", "at", "operator"], value_vars=["rows_updated", "rows_removed"], var_name="what", value_name="rows"
    )
    churn["series"] = churn.operator + ": " + churn.what.map({"rows_updated": "added/updated", "rows_removed": "evicted"})
    st.altair_chart(
        charts.lines(churn, ["rows"], "Additions (rows updated) vs evictions (rows removed)", "rows", dom, events, series="series"),
        width="stretch",
    )


def lag_charts(batches: pd.DataFrame, progress: list[dict[str, Any]], dom: list[str] | None, events: pd.DataFrame) -> None:
    """Watermark lag and the RocksDB commit latency breakdown (drawn only while their expander is open)."""
    lagged = batches[batches.watermark.fillna(0) > 0]
    commit = rocksdb_commit(progress)
    if lagged.empty and commit.empty:
        st.caption("No watermark and no RocksDB commit latency reported in this range.")
    if not lagged.empty:
        st.altair_chart(
            charts.lines(
                lagged,
                ["watermark_lag_s"],
                "Watermark lag (batch time - watermark)",
                "s",
                dom,
                events,
                names={"watermark_lag_s": "watermark lag"},
            ),
            width="stretch",
        )
    if not commit.empty:
        summed = commit.groupby(["ts", "time", "at"], as_index=False)[list(COMMIT_METRICS)].sum()
        st.altair_chart(
            charts.lines(
                summed,
                list(COMMIT_METRICS),
                f"RocksDB commit latency (all operators, newest {PROGRESS_TAIL} batches)",
                "ms",
                dom,
                events,
                stacked=True,
                names=COMMIT_NAMES,
            ),
            width="stretch",
        )


def config_panel(progress: list[dict[str, Any]]) -> None:
    """The effective state configuration of the newest run, each value with where it was read."""
    with st.expander("Effective configuration", expanded=True):
        if not progress:
            st.caption("No batch in the history yet: nothing reports the configuration.")
            return
        st.table(effective.effective_config(progress).map(fmt.md), hide_index=True)


def commit_history(progress: list[dict[str, Any]]) -> None:
    """Every batch is a commit: min / avg / max of its figures, then per window of batches (newest first)."""
    batches = commits.per_batch(progress)
    st.subheader("Commits")
    if batches.empty:
        st.caption("No batch progress in the history for this range.")
        return
    st.caption(
        f"The newest {fmt.plural(len(batches), 'batch', 'batches')} (each commits its state), summed over the stateful "
        "operators: min / avg / max over them, then (folded) per window of consecutive batches of one run, newest first."
    )
    st.table(commits.summary(batches).map(fmt.md), hide_index=True)
    with st.expander("Commit history: min / avg / max per window of consecutive batches", key="more_commits", on_change="rerun") as box:
        if box.open:  # a table of some 200 cells, each drawn as markdown: not on the first paint
            st.table(commits.history(batches).map(fmt.md), hide_index=True)


def _event_target(runs: pd.DataFrame) -> tuple[str, int] | None:
    """The (run, batch) an event row asked for: its batch, else the run's first batch at or after it."""
    wanted = st.session_state.pop("_event_batch", None)
    if wanted is None:
        return None
    run_id, batch, ts = wanted
    row = runs[runs.run_id == run_id]
    if row.empty or not row.batches.iloc[0]:
        return None
    if fmt.missing(batch):
        batch = row.last_batch_id.iloc[0] if ts >= (row.last_seen.iloc[0] or 0) else row.first_batch_id.iloc[0]
    return run_id, int(batch)


def batch_detail(ctx: Context) -> None:
    """The full progress JSON of one batch (``load_batch``); the newest run's newest batch by default."""
    assert ctx.query_id is not None  # a query's page: app.py renders it only with a query chosen
    st.subheader("Batch progress")
    runs = data.run_stats(ctx.history, ctx.tok, ctx.query_id)
    with_batches = runs[runs.batches > 0].iloc[::-1]
    if with_batches.empty:
        st.info("No run of this query completed a batch.")
        return
    last_batch = dict(zip(with_batches.run_id, with_batches.last_batch_id.astype(int)))
    started = dict(zip(with_batches.run_id, with_batches.started))
    target = _event_target(runs)
    if target is not None:
        st.session_state["batch_run"], st.session_state["batch_id"] = target
    if st.session_state.get("batch_run") not in last_batch:
        st.session_state["batch_run"] = with_batches.run_id.iloc[0]
        st.session_state["batch_id"] = last_batch[with_batches.run_id.iloc[0]]
    if "batch_id" not in st.session_state:
        st.session_state["batch_id"] = last_batch[st.session_state["batch_run"]]

    def newest_of_run() -> None:
        st.session_state["batch_id"] = last_batch[st.session_state["batch_run"]]

    left, right = st.columns(2)
    run_id = left.selectbox(
        "Run",
        list(last_batch),
        key="batch_run",
        on_change=newest_of_run,
        format_func=lambda r: f"{fmt.short_id(r)} (started {fmt.when(started.get(r))}, last batch {last_batch[r]:,})",
    )
    batch_id = right.number_input("Batch id", min_value=0, step=1, key="batch_id")
    newest = run_id == with_batches.run_id.iloc[0] and int(batch_id) == last_batch[run_id]
    write_url(run=None if newest else run_id, batch=None if newest else int(batch_id))  # no run and batch: the newest
    progress = data.batch(ctx.history, ctx.query_id, run_id, int(batch_id))
    if progress is None:
        row = runs[runs.run_id == run_id].iloc[0]
        st.info(
            f"Run {fmt.code(fmt.short_id(run_id))} has no batch {int(batch_id):,} in the history: its batches there are "
            f"{int(row.first_batch_id):,} to {int(row.last_batch_id):,}."
        )
    else:
        st.json(progress, expanded=1)
