"""A checkpoint as the pages show it: the inspector's report (read through the data layer), its errors
as messages, and one row per store instance."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from spark_state_observer.browser import data, fmt
from spark_state_observer.browser.context import Context
from spark_state_observer.offline.checkpoint.render import printable
from spark_state_observer.offline.checkpoint.report import CheckpointError, CheckpointReport


def inspect(ctx: Context, path: str) -> CheckpointReport | None:
    """The report, estimated with the history's observed restore rates when it has some."""
    try:
        return data.checkpoint_report(path, data.checkpoint_version(path), ctx.history, ctx.tok)
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
