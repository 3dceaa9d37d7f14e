"""Checkpoint: the inspector's layout and restore estimate, with restore rates from the history."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from observer.history.store import HistoryError
from observer.offline.checkpoint import inspect_checkpoint
from observer.offline.checkpoint.render import printable, render_text
from observer.offline.checkpoint.report import CheckpointError, CheckpointReport
from observer.offline.checkpoint.restore import rates_from_history
from streamlit_app import capacity, checkpoints, fmt
from streamlit_app.context import Context


def inspect(ctx: Context, path: str) -> CheckpointReport | None:
    """The report, estimated with the history's observed restore rates when it has some."""
    try:
        report = inspect_checkpoint(path)
        if report.query_id:
            try:
                rates = rates_from_history(ctx.history, report.query_id)
            except HistoryError:
                rates = None
            if rates:
                report = inspect_checkpoint(path, rates)
        return report
    except CheckpointError as exc:
        st.error(f"Cannot inspect this checkpoint: {fmt.md(printable(str(exc)))}")
        return None
    except Exception as exc:  # the scan turns unreadable parts into problems; never a traceback on the page
        st.error(f"Cannot inspect this checkpoint: {type(exc).__name__}: {fmt.md(printable(str(exc)))}")
        return None


def partition_frame(report: CheckpointReport) -> pd.DataFrame:
    """One row per store instance: files, bytes, newest snapshot, and the work a restart would do."""
    rows = []
    for op in report.operators:
        for p in op.partitions:
            w = p.restore
            rows.append(
                {
                    "operator": f"{op.operator_id} {op.name or '?'}",
                    "partition": p.partition,
                    "store": p.store,
                    "provider": p.provider,
                    "files": len(p.files),
                    "state bytes": sum(f.size for f in p.files) + p.sst_bytes,
                    "SSTs": p.sst_files,
                    "latest version": p.latest_version,
                    "newest snapshot": p.newest_snapshot,
                    "snapshot lag": (p.latest_version - p.newest_snapshot)
                    if p.latest_version is not None and p.newest_snapshot is not None
                    else p.latest_version,
                    "restore bytes": w.bytes if w else None,
                    "replay files": w.replay_files if w else None,
                    "missing files": w.missing_files if w else None,
                }
            )
    return pd.DataFrame(rows)


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
        cols[0].metric("restore time", fmt.duration(e.seconds), help="summed over stores, as Spark's load metrics report it")
        cols[1].metric("stores", f"{e.stores:,}")
        cols[2].metric("files / bytes", f"{e.files:,} / {fmt.size(e.bytes)}")
        cols[3].metric("skew (slowest / median)", f"{e.skew:.1f}x" if e.skew else "-")
        st.caption(f"rates from {fmt.md(e.basis)}; slowest store instance {fmt.md(e.slowest_partition)}")
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
