"""Restores and reloads: how long each restart's restore took per operator, and the reloads within
runs, on one time axis with the restarts; next to it the checkpoint inspector's estimate for the same
checkpoint (prediction vs outcome), when a checkpoint root holds this query's checkpoint."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Sequence

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from spark_state_observer.browser import charts, checkpoints, data, fmt
from spark_state_observer.browser.context import Context, label
from spark_state_observer.browser.parts.inspection import inspect
from spark_state_observer.model.signal_kinds import RESTORE_FINISHED, RESTORE_PROGRESS_KINDS
from spark_state_observer.offline.checkpoint.report import CheckpointReport
from spark_state_observer.offline.checkpoint.restore import estimate_restore

KINDS = ("restore", "store_reload", "query_restarted", "executor_removed", "executor_added", "partitions_changed", *RESTORE_PROGRESS_KINDS)


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


def course(events: pd.DataFrame) -> pd.DataFrame:
    """The newest restoring batch, one row per operator as its latest restore event left it: partitions done of
    total, elapsed, ETA, and whether (and in how long) it finished; empty when the history has none."""
    told = events[events.kind.isin(RESTORE_PROGRESS_KINDS)]
    if told.empty:
        return pd.DataFrame()
    newest = told[told.ts == told.ts.max()].iloc[0]
    batch = (newest.run_id, newest.attributes.get("batch_id"))
    rows: dict[object, dict[str, Any]] = {}
    for e in told.sort_values("ts").itertuples():
        a = e.attributes
        if (e.run_id, a.get("batch_id")) != batch:
            continue
        rows[a.get("operator_index")] = {
            "operator": f"{a.get('operator_index')} {a.get('operator')}",
            "total": a.get("partitions_total"),
            "done": a.get("partitions_done", 0),
            "elapsed": a.get("elapsed_seconds", 0.0),
            "eta": a.get("eta_seconds"),
            "basis": a.get("eta_basis"),
            "finished": e.kind == RESTORE_FINISHED,
            "duration": a.get("duration_seconds"),
            "reason": a.get("reason"),
            "slowest": ", ".join(f"{p['partition']} ({fmt.duration(p['seconds'])})" for p in (a.get("slowest_partitions") or [])[:5]),
        }
    return pd.DataFrame([rows[k] for k in sorted(rows, key=str)])


def show_course(table: pd.DataFrame) -> None:
    """A progress bar per operator of the newest restore: running (partitions, elapsed, ETA) or finished."""
    running = not table.finished.all()
    st.subheader("Restore in progress" if running else "Latest restore, as it went")
    for r in table.itertuples():
        total = r.total if isinstance(r.total, int) and r.total > 0 else None
        if r.finished:
            text = f"{r.operator}: {r.done} of {total or '?'} partitions, restored in {fmt.duration(r.duration)}"
            text += f"; slowest partitions {r.slowest}" if r.slowest else ""
        else:
            eta = f"ETA {fmt.duration(r.eta)}" if r.eta is not None else "no ETA before a partition is in"
            eta += " (the checkpoint's expected work, before any partition is in)" if r.basis == "estimate" else ""
            text = f"{r.operator}: {r.done} of {total or '?'} partitions, {fmt.duration(r.elapsed)} elapsed, {eta}"
        st.progress(min(1.0, r.done / total) if total else 0.0, text=fmt.md(text))
    st.caption(
        f"From the restoring batch's tasks as they end ({fmt.md(table.reason.iloc[0])}); where the observer follows tasks "
        "(event logs, or a job with its UI on). Partitions and ETA only: Spark 3.5 and 4.0 report no load per task."
    )


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


def rates_before(events: pd.DataFrame, before: float | None) -> dict[str, float] | None:
    """The inspector's observed rate (``rates_from_history``'s rule: the median seconds per store of the
    restores Spark measured) from the restores before ``before`` only; None (the inspector's documented
    defaults) when there were none. A prediction calibrated on the restore it is compared with would
    match it by construction."""
    restores = events[events.kind == "restore"]
    if before is not None:
        restores = restores[restores.ts < before]
    loads = [a for a in restores.attributes if a.get("method") == "load_metrics" and a.get("stores")]
    return {"seconds_per_store": statistics.median(a["duration_seconds"] / a["stores"] for a in loads)} if loads else None


def prediction_table(report: CheckpointReport, rates: dict[str, float] | None, events: pd.DataFrame) -> pd.DataFrame:
    """One row per operator of the checkpoint (``estimate`` and ``measured`` in seconds, ``comparable``):
    the inspector's estimate of its restore (the same rates as the page's total) next to the newest restore
    the history measured for it, and how it was measured. A low-confidence figure (a residual estimate
    that still holds the new process's warm-up) is shown but not compared: it is not an outcome."""
    restores = events[events.kind == "restore"]
    newest = restores[restores.ts == restores.ts.max()] if len(restores) else restores
    measured = {a.get("operator_index"): a for a in newest.attributes}
    rows = []
    for op in report.operators:
        e = estimate_restore(dataclasses.replace(report, operators=[op]), rates)
        if e is None:
            continue
        a = measured.get(op.operator_id) or {}
        seconds = a.get("duration_seconds")
        comparable = seconds is not None and a.get("confidence") != "low" and e.seconds > 0
        rows.append(
            {
                "operator": f"{op.operator_id} {op.name or '?'}",
                "estimate": e.seconds,
                "measured": None if seconds is None else float(seconds),
                "comparable": comparable,
                "to load": f"{fmt.plural(e.stores, 'store')}, {fmt.plural(e.files, 'file')}, {fmt.size(e.bytes)}",
                "measured by": f"{a.get('method')} ({a.get('confidence')})" if a else "-",
            }
        )
    return pd.DataFrame(rows)


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """The prediction table as the page shows it (durations in words, the ratio where it means something)."""
    return pd.DataFrame(
        {
            "operator": table.operator,
            "prediction": table.estimate.map(fmt.duration),
            "to load": table["to load"],
            "last measured restore": table.measured.map(fmt.duration),
            "measured by": table["measured by"],
            "outcome / prediction": [f"{m / e:.1f}x" if c else "-" for m, e, c in zip(table.measured, table.estimate, table.comparable)],
        }
    )


def render(ctx: Context) -> None:
    assert ctx.query_id is not None  # a query's page: app.py renders it only with a query chosen
    qid = ctx.query_id
    st.header(f"Restores and reloads of {fmt.md(label(ctx.all_queries, qid))}")
    events = data.events_of(ctx.history, ctx.tok, qid, KINDS)
    found = points(events)
    restarts = events[events.kind == "query_restarted"]
    measured = None
    if not found.empty and (found.what == "restore").any():
        last = found[found.what == "restore"]
        last = last[last.ts == last.ts.max()]
        measured = float(last.seconds.sum())
    cols: Sequence[DeltaGenerator] = st.columns(4)  # then 3: one name for both rows of figures
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
    progress = course(events)
    if not progress.empty:
        show_course(progress)
    st.subheader("Prediction vs outcome")
    st.caption(
        "The restore estimate of this checkpoint as it is now (the one the Checkpoint page shows), next to the last "
        "restore measured for the query. The outcome is compared with a prediction from the restores measured "
        "before that one only (else the inspector's defaults), so the prediction does not know the outcome."
    )
    path = checkpoints.choose(ctx.config, "restores", qid, ctx.all_queries)
    if path is None:
        return
    report = inspect(ctx, path)
    newest = float(events[events.kind == "restore"].ts.max()) if (events.kind == "restore").any() else None
    rates = rates_before(events, newest)
    e = estimate_restore(report, rates) if report is not None else None
    if report is None or e is None:
        st.info("The inspector found no state to restore in this checkpoint.")
        return
    basis = "restores measured before the last one" if rates else "the inspector's defaults (no earlier measured restore)"
    per_operator = prediction_table(report, rates, events)
    compared = per_operator[per_operator.comparable] if len(per_operator) else per_operator
    shown_estimate = report.estimate or e  # the checkpoint's one estimate: the history refines the inspector's
    cols = st.columns(3)
    cols[0].metric(
        "restore estimate", fmt.duration(shown_estimate.seconds), help=f"{shown_estimate.stores} stores, {shown_estimate.files} files"
    )
    cols[1].metric("last measured restore", fmt.duration(measured))
    ratio = f"{compared.measured.sum() / compared.estimate.sum():.1f}x the prediction" if len(compared) and compared.estimate.sum() else "-"
    cols[2].metric(
        "outcome / prediction",
        ratio,
        help=f"the prediction ({fmt.duration(e.seconds)}) took its rates from {basis}; over the operators whose restore "
        "was measured, not estimated with low confidence",
    )
    st.caption(
        f"The estimate is {shown_estimate.described()}. {fmt.plural(shown_estimate.stores, 'store')}, "
        f"{fmt.plural(shown_estimate.files, 'file')}, {fmt.size(shown_estimate.bytes)} to load; slowest store instance "
        f"{fmt.md(shown_estimate.slowest_partition)}" + (f" ({shown_estimate.skew:.1f}x the median)" if shown_estimate.skew else "")
    )
    if not per_operator.empty:
        st.dataframe(shown(per_operator), hide_index=True, width="stretch")
        st.caption(
            "Per operator; a restore measured with low confidence (a residual estimate that still counts the new "
            "process's warm-up) is not compared with the prediction."
        )
