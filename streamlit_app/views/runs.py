"""Runs: two runs of one query side by side (before/after a restart or a config change)."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from observer.signals.kinds import QUERY_RESTARTED, RESTORE
from streamlit_app import charts, data, fmt
from streamlit_app.context import Context, label

EVENT_MARGIN = 60.0  # seconds around the two runs in which their restart and restore events are looked for


def run_summary(ctx: Context, run: pd.Series, events: pd.DataFrame) -> dict:
    """The figures to compare: duration, rates, state size, restore and restart of the run."""
    batches = data.batch_series(ctx.history, ctx.tok, ctx.query_id, None, None, run.run_id)
    mine = events[events.run_id == run.run_id]
    restores = mine[mine.kind == RESTORE].attributes.tolist()
    restart = mine[mine.kind == QUERY_RESTARTED].attributes.tolist()
    weights = batches.batches if len(batches) else None
    return {
        "started": fmt.when(run.started), "ended": fmt.when(run.ended), "outcome": run.outcome or "running / unknown",
        "batches": int(batches.batches.sum()) if len(batches) else 0,
        "batch ids": f"{int(batches.batch_id.min())}-{int(batches.batch_id.max())}" if len(batches) else "-",
        "mean batch ms": round(float((batches.duration_ms * weights).sum() / weights.sum()), 1) if len(batches) else None,
        "max batch ms": batches.duration_max_ms.max() if len(batches) else None,
        "mean input rows/s": round(float(batches.input_rps.mean()), 2) if len(batches) else None,
        "mean processed rows/s": round(float(batches.processed_rps.mean()), 2) if len(batches) else None,
        "final state rows": batches.state_rows.dropna().iloc[-1] if batches.state_rows.notna().any() else None,
        "final state memory": fmt.size(batches.state_memory_bytes.dropna().iloc[-1]) if batches.state_memory_bytes.notna().any() else "-",
        "restore seconds": round(sum(a.get("duration_seconds") or 0 for a in restores), 3) if restores else None,
        "restore method": ", ".join(sorted({str(a.get("method")) for a in restores})) or "-",
        "restart downtime s": restart[0].get("downtime_seconds") if restart else None,
        "exception": (run.exception or "")[:200] or "-",
    }


def render(ctx: Context) -> None:
    st.header(f"Runs of {label(ctx.queries, ctx.query_id)}")
    runs = data.runs(ctx.history, ctx.tok, ctx.query_id)
    if len(runs) < 2:
        st.info(f"This query has {len(runs)} run in the history; a comparison needs two (a restart starts a new run).")
    ids = runs.run_id.tolist()
    started = dict(zip(runs.run_id, runs.started))

    def name(r: str) -> str:
        return f"{r[:8]} started {fmt.when(started.get(r))}"

    left, right = st.columns(2)
    before = left.selectbox("Before", ids, index=max(0, len(ids) - 2), format_func=name, key="run_before")
    after = right.selectbox("After", ids, index=len(ids) - 1, format_func=name, key="run_after")
    chosen = runs[runs.run_id.isin([before, after])]
    ends = chosen.ended.fillna(chosen.last_seen).fillna(chosen.started)
    events = data.events(ctx.history, ctx.tok, ctx.query_id, float(chosen.started.min()) - EVENT_MARGIN, float(ends.max()) + EVENT_MARGIN)
    table = pd.DataFrame({f"{tag} ({run_id[:8]})": run_summary(ctx, runs[runs.run_id == run_id].iloc[0], events)
                          for tag, run_id in (("before", before), ("after", after))})
    st.dataframe(table.map(lambda v: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)), width="stretch")
    series = []
    for tag, run_id in (("before", before), ("after", after)):
        frame = data.batch_series(ctx.history, ctx.tok, ctx.query_id, None, None, run_id)
        if len(frame):
            frame = frame.assign(run=f"{tag} ({run_id[:8]})", seconds_into_run=frame.ts - frame.ts.min())
            series.append(frame)
    if series:
        both = pd.concat(series, ignore_index=True)
        st.caption("Aligned at each run's first batch (x: seconds into the run).")
        for field, title, unit in (("duration_ms", "Batch duration", "ms"), ("processed_rps", "Processed rate", "rows/s"),
                                   ("state_rows", "State rows", "rows")):
            st.altair_chart(charts.run_overlay(both, field, title, unit), width="stretch")
