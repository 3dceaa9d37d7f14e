"""Runs: every run of the query (a crash loop's too) with its outcome and root cause, then two runs
side by side (before/after a restart or a config change)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from spark_state_observer.browser import charts, data, fmt
from spark_state_observer.browser.context import Context, label
from spark_state_observer.browser.rootcause import root_cause
from spark_state_observer.model.signal_kinds import QUERY_RESTARTED, RESTORE

EVENT_MARGIN = 60.0  # seconds around the two runs in which their restart and restore events are looked for


def _end(run: pd.Series) -> float | None:
    """When the run ended; an end before its start (a history recorded before that was fixed) is unknown."""
    end = run.ended if not fmt.missing(run.ended) else run.last_seen
    if fmt.missing(end) or (not fmt.missing(run.started) and end < run.started):
        return None
    return float(end)


def run_list(runs: pd.DataFrame, terminations: pd.DataFrame) -> pd.DataFrame:
    """One row per run, newest first: start, end, batches, outcome and the root-cause line."""
    rows = []
    for run in runs.iloc[::-1].itertuples():
        attrs: dict[str, Any] = next(
            (a for rid, a in zip(terminations.run_id, terminations.attributes) if rid == run.run_id and a.get("outcome") == "exception"), {}
        )
        exception = None if fmt.missing(run.exception) else run.exception
        outcome = None if fmt.missing(run.outcome) else run.outcome
        rows.append(
            {
                "run": fmt.short_id(run.run_id),
                "started": fmt.when(run.started),
                "outcome": {"exception": "failed", "clean": "stopped"}.get(outcome or "", "running / unknown"),
                "root cause": root_cause(attrs, exception) or "-",
                "batches": int(run.batches),
                "batch ids": f"{int(run.first_batch_id):,}-{int(run.last_batch_id):,}"
                if run.batches
                else "none (failed at start)"
                if outcome == "exception"
                else "-",
                "ended": fmt.when(_end(run)),
                "run id": run.run_id,
            }
        )
    return pd.DataFrame(rows)


def run_summary(ctx: Context, run: pd.Series, events: pd.DataFrame) -> dict[str, Any]:
    """The figures to compare: duration, rates, state size, restore and restart of the run."""
    assert ctx.query_id is not None  # a query's page: app.py renders it only with a query chosen
    batches = data.batch_series(ctx.history, ctx.tok, ctx.query_id, None, None, run.run_id)
    mine = events[events.run_id == run.run_id]
    restores = mine[mine.kind == RESTORE].attributes.tolist()
    restart = mine[mine.kind == QUERY_RESTARTED].attributes.tolist()
    weights: Any = batches.batches if len(batches) else None
    exception = None if fmt.missing(run.exception) else run.exception
    ended: dict[str, Any] = next((a for a in mine[mine.kind == "query_terminated"].attributes if a.get("outcome") == "exception"), {})
    return {
        "started": fmt.when(run.started),
        "ended": fmt.when(_end(run)),
        "outcome": run.outcome or "running / unknown",
        "batches": int(batches.batches.sum()) if len(batches) else 0,
        "batch ids": f"{int(batches.batch_id.min())}-{int(batches.batch_id.max())}" if len(batches) else "-",
        "mean batch duration": fmt.duration(float((batches.duration_ms * weights).sum() / weights.sum()) / 1000) if len(batches) else None,
        "max batch duration": fmt.duration(batches.duration_max_ms.max() / 1000) if len(batches) else None,
        "mean input rows/s": fmt.number(batches.input_rps.mean(), 2) if len(batches) else None,
        "mean processed rows/s": fmt.number(batches.processed_rps.mean(), 2) if len(batches) else None,
        "final state rows": fmt.number(batches.state_rows.dropna().iloc[-1]) if batches.state_rows.notna().any() else None,
        "final state memory": fmt.size(batches.state_memory_bytes.dropna().iloc[-1]) if batches.state_memory_bytes.notna().any() else None,
        "restore seconds": round(sum(a.get("duration_seconds") or 0 for a in restores), 3) if restores else None,
        "restore method": ", ".join(sorted({str(a.get("method")) for a in restores})) or None,
        "restart downtime s": restart[0].get("downtime_seconds") if restart else None,
        "root cause": root_cause(ended, exception),
    }


def render(ctx: Context) -> None:
    assert ctx.query_id is not None  # a query's page: app.py renders it only with a query chosen
    st.header(f"Runs of {fmt.md(label(ctx.all_queries, ctx.query_id))}")
    runs = data.run_stats(ctx.history, ctx.tok, ctx.query_id)
    terminations = data.events_of(ctx.history, ctx.tok, ctx.query_id, ("query_terminated",))
    listing = run_list(runs, terminations)
    st.subheader(f"All {fmt.plural(len(runs), 'run')}" if len(runs) < 500 else "The newest 500 runs")
    st.dataframe(
        listing,
        hide_index=True,
        width="stretch",
        column_config={
            "root cause": st.column_config.TextColumn(width=480),
            "run id": st.column_config.TextColumn(width="small"),
            "ended": st.column_config.TextColumn(width="medium"),
            "batches": st.column_config.NumberColumn(format="localized"),
        },
    )
    failed = runs[runs.exception.notna()] if "exception" in runs else runs.iloc[0:0]
    if len(failed):
        newest = failed.iloc[-1]
        with st.expander(f"Full exception of run {fmt.md(fmt.short_id(newest.run_id))}"):
            st.code(newest.exception, language=None)
    ids = runs.run_id.tolist()
    if len(ids) < 2:
        st.info(f"This query has {fmt.plural(len(ids), 'run')} in the history; a comparison needs two (a restart starts a new run).")
        return
    started = dict(zip(runs.run_id, runs.started))

    def name(r: str) -> str:
        return f"{fmt.short_id(r)} started {fmt.when(started.get(r))}"

    st.subheader("Compare two runs")
    left, right = st.columns(2)
    with_batches = [r for r, n in zip(runs.run_id, runs.batches) if n and r != ids[-1]]
    default_before = ids.index(with_batches[-1]) if with_batches else max(0, len(ids) - 2)  # the last run that did work
    before = left.selectbox("Before", ids, index=default_before, format_func=name, key="run_before")
    after = right.selectbox("After", ids, index=len(ids) - 1, format_func=name, key="run_after")
    chosen = runs[runs.run_id.isin([before, after])]
    ends = chosen.ended.fillna(chosen.last_seen).fillna(chosen.started)
    events = data.events(ctx.history, ctx.tok, ctx.query_id, float(chosen.started.min()) - EVENT_MARGIN, float(ends.max()) + EVENT_MARGIN)
    table = pd.DataFrame(
        {
            f"{tag} ({fmt.short_id(run_id)})": run_summary(ctx, runs[runs.run_id == run_id].iloc[0], events)
            for tag, run_id in (("before", before), ("after", after))
        }
    )
    st.dataframe(table.map(lambda v: "-" if fmt.missing(v) else str(v)), width="stretch", height=35 * (len(table) + 1) + 3)
    series = []
    for tag, run_id in (("before", before), ("after", after)):
        frame = data.batch_series(ctx.history, ctx.tok, ctx.query_id, None, None, run_id)
        if len(frame):
            frame = frame.assign(run=f"{tag} ({fmt.short_id(run_id)})", seconds_into_run=frame.ts - frame.ts.min())
            series.append(frame)
    if series:
        both = pd.concat(series, ignore_index=True)
        st.caption("Aligned at each run's first batch (x: seconds into the run).")
        for field, title, unit in (
            ("duration_ms", "Batch duration", "ms"),
            ("processed_rps", "Processed rate", "rows/s"),
            ("state_rows", "State rows", "rows"),
        ):
            st.altair_chart(charts.run_overlay(both, field, title, unit), width="stretch")
