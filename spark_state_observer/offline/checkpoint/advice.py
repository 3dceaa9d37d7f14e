"""Placement advice for ``inspect CHECKPOINT --history``: skew and the partition count a restore target needs.

The checkpoint tells how much a restart would load per store (``restore.py``); the history tells, per
state partition, how big it was in the latest batch (rows, memory) and, where a partition moved between
executors, how long its store took to load (``placements``, written when the observer followed placement:
per-partition sizes and load times need event logs, live polling leaves them empty). Together they go to
``spark_state_observer.placement.tracker.advise``, whose answer is an estimate and says so.

Read with the standard library like the rest of the inspector, so it works on a plain install.
"""

from __future__ import annotations

import dataclasses
from contextlib import closing
from dataclasses import dataclass

from spark_state_observer.offline.checkpoint.report import CheckpointReport
from spark_state_observer.offline.checkpoint.restore import estimate_restore, store_seconds
from spark_state_observer.placement.tracker import Advice, PartitionStat, advise

DEFAULT_TARGET_SECONDS = 60.0
AGGREGATION = "statestoresave"  # the progress / checkpoint name of a streaming aggregation's state writer


@dataclass(frozen=True)
class OperatorAdvice:
    """The advice for one stateful operator of the checkpoint."""

    operator_id: int
    name: str | None
    partitions: int  # measured in the history
    restore_estimate_seconds: float | None  # the checkpoint's estimate for this operator's stores, at the same rates
    advice: Advice
    caveat: str | None = None
    estimate_basis: str | None = None  # which estimate: the inspector's at default rates, or refined by the history


def partition_stats(history_path: str, query_id: str) -> dict[int, tuple[str | None, list[PartitionStat]]]:
    """Per operator index: its name and, per partition, the latest batch's size and latest measured move cost.

    Raises ``HistoryError`` when the history cannot be read; a history without placements gives {}.
    """
    from spark_state_observer.history.backend import HistoryError, open_backend

    with closing(open_backend(history_path, readonly=True)) as backend:
        try:
            _, rows = backend.rows(
                "SELECT op_index, partition, rows_total, memory_bytes, load_seconds, moved_from "
                "FROM placements WHERE query_id = ? ORDER BY ts, batch_id",
                (query_id,),
            )
        except HistoryError as exc:
            if "placements" in str(exc):
                return {}  # a history written before placement was recorded (schema 2), opened read-only: nothing to say
            raise
        _, names = backend.rows("SELECT op_index, op_name FROM operators WHERE query_id = ? ORDER BY ts DESC LIMIT 64", (query_id,))
    if not rows:
        return {}
    op_names: dict[int, str | None] = {}
    for op_index, op_name in names:
        op_names.setdefault(int(op_index), op_name)
    latest: dict[tuple[int, int], tuple[float | None, float | None]] = {}
    loads: dict[tuple[int, int], float] = {}
    for op_index, partition, rows_total, memory, load, moved_from in rows:
        key = (int(op_index), int(partition))
        latest[key] = (rows_total, memory)
        if moved_from is not None and load is not None:
            loads[key] = float(load)  # the latest move's: the cost of bringing this partition's store up elsewhere
    out: dict[int, tuple[str | None, list[PartitionStat]]] = {}
    for (op_index, partition), (rows_total, memory) in sorted(latest.items()):
        stats = out.setdefault(op_index, (op_names.get(op_index), []))[1]
        stats.append(PartitionStat(partition, rows_total, memory, loads.get((op_index, partition))))
    return out


def placement_advice(
    report: CheckpointReport,
    history_path: str,
    target_seconds: float = DEFAULT_TARGET_SECONDS,
    spark_version: str | None = None,
    rates: dict[str, float] | None = None,
) -> list[OperatorAdvice]:
    """One ``OperatorAdvice`` per operator of the checkpoint that the history measured.

    History operators are matched to the checkpoint's by name (``operatorName`` in both), else by index.
    """
    if not report.query_id:
        return []
    stats = partition_stats(history_path, report.query_id)
    by_name = {name: index for index, (name, _) in stats.items() if name}
    out = []
    for op in report.operators:
        index = by_name.get(op.name, op.operator_id) if op.name else op.operator_id
        if index not in stats:
            continue
        # the report's estimate for this operator's stores alone: the same rates, so its per-store figures are the total's
        alone = dataclasses.replace(report, operators=[op])
        estimate = estimate_restore(alone, rates)
        seconds = estimate.seconds if estimate is not None else None
        shares: dict[int, float] = {}
        for (_, partition, _), store in store_seconds(alone, rates).items():
            shares[partition] = shares.get(partition, 0.0) + store  # a partition's stores (a join's four) load in its one task
        caveat = None
        if (op.name or "").lower() == AGGREGATION and any(p.load_seconds is not None for p in stats[index][1]):
            caveat = (
                "An aggregation's tasks open the store twice (restore, then save) and report the second, cheap load: "
                "its measured move costs understate the reload; the dedup or join operators' figures are closer to it."
            )
        out.append(
            OperatorAdvice(
                op.operator_id,
                op.name,
                len(stats[index][1]),
                seconds,
                advise(
                    stats[index][1],
                    target_seconds,
                    seconds,
                    spark_version,
                    restore_shares=shares,
                    query_restore_seconds=report.estimate.seconds if report.estimate is not None else None,
                ),
                caveat,
                estimate.described() if estimate is not None else None,
            )
        )
    return out


def render_advice(advice: list[OperatorAdvice]) -> str:
    """The advice for a terminal, every line marked as an estimate."""
    lines = ["  placement advice (Estimate: each partition's part of the restore estimate above; sizes and reloads from the history):"]
    if not advice:
        lines.append("    no per-partition placement in the history for this query (follow placement: replay or watch its event logs)")
    for a in advice:
        restore = f"{a.restore_estimate_seconds:.2f} s" if a.restore_estimate_seconds is not None else "-"
        lines.append(f"    operator {a.operator_id} {a.name or '?'}: {a.partitions} partitions measured, restore estimate {restore}")
        if a.estimate_basis:
            lines.append(f"      This is {a.estimate_basis}.")
        lines.append(f"      {a.advice.message}")
        if a.caveat:
            lines.append(f"      {a.caveat}")
    return "\n".join(lines)
