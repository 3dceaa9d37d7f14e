"""State restores after a restart, store reloads within a run, and load-latency anomalies.

Kafka Streams tells its users when state is restored (StateRestoreListener). Spark does not, so it is
inferred here from what Spark reports (``../shared/spark-state-metrics.md`` section 3, and what the
recorded runs showed: ``docs/findings/restore-metrics.md``):

- restore: the first batch of a restarted run. An operator that loads its store once per task and
  reports RocksDB load metrics (Spark 4.1+) has its restore measured (``method=load_metrics``,
  ``confidence=measured``). Aggregations and session windows load twice per task: their load metric
  reads the cheap second load, a steady-state figure, never the restore; Spark 3.5/4.0 report no load
  metric at all. For those the restore is what remains of the batch's excess over the previous run's
  usual ``addBatch`` once the other operators' measured restores and the backlog (more input rows than
  usual, costed by the previous run's time per row) are taken out, shared among the operators that have
  no figure of their own (``method=residual_estimate``): ``confidence=estimated`` when the previous run
  gives a baseline and the backlog explains under half the excess, ``low`` otherwise (also when the
  batch holds far more rows than usual that the previous run cannot cost). The residual still holds a
  new process's warm-up and the machine's mood, so it is an upper estimate (on the recorded restarts
  4-10x the aggregation stage's real extra time). No restore exceeds its batch, nor does their sum.
  Where the observer follows tasks (placement), ``spark_state_observer.placement.restores`` holds the residual
  back (``defer``) and replaces it with the stateful stage's task times (``method=task_times``).
  What a figure of 0 would mean differs, so it is never told as a duration of 0 s: Spark's load metric is
  whole milliseconds summed over the stores, and only a load above 0 ms is taken as the restore (a 0 ms load
  is a store already open, or empty); an estimate (``residual_estimate``, ``task_times``) is a difference of
  two wall times clamped at 0, and 0 means the restart batch was no slower than the steady ones (the busy
  machine's noise hid the restore: recorded in incidents/restore_pandas_state_40, where the restart batch's
  slowest task took 10.9 s and the steady ones 16.5 s). Such a restore is told with ``duration_seconds``
  None and ``duration_unknown`` saying why; the evidence (the excess, the task times) is in its attributes.
- store reload within a run (an executor lost, a task moved): evidence that a store came from the
  checkpoint (loads from DFS, changelog files replayed, HDFS cache misses, a ``SnapshotLastUploaded``
  version going back). A double-load operator cannot show it in its own metrics: it is reported
  reloaded when an executor was removed since its previous batch and another operator of the same
  query shows a reload in the same batch (``evidence=executor_removed,sibling_reload``). A load latency
  far above the run's usual, alone, is jitter on a busy machine until corroborated: it becomes a
  ``load_latency_anomaly``, not a reload. Spark 3.5/4.0 report none of that evidence for RocksDB (no load
  metric, no ``SnapshotLastUploaded``): where the observer follows tasks (placement), a partition that ran on
  another executor because the one holding its store was removed is a reload of that store
  (``evidence=executor_removed,partition_migrated``; ``moved``): nothing moves state between executors, the
  new one loads it from the checkpoint. An operator whose own metrics showed the reload is not told twice.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryRecord, operator_labels
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.alert_spec import WARNING, AlertSpec
from spark_state_observer.model.events import OperatorProgress, QueryProgress
from spark_state_observer.model.fields import (
    HDFS_CACHE_MISSES,
    ROCKSDB_LOAD_MS,
    ROCKSDB_LOADED_FROM_DFS,
    ROCKSDB_REPLAY_FILES,
    ROCKSDB_REPLAY_MS,
    SNAPSHOT_LAST_UPLOADED,
)
from spark_state_observer.model.phases import ADD_BATCH
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.rule import Context, Rule

# these load their store twice per task, and the second (no-op) load is what their load metrics report
DOUBLE_LOAD_OPERATORS = frozenset({"stateStoreSave", "sessionWindowStateStoreSaveExec"})
OperatorKey = tuple[str, int, str]  # query id, operator index, operator name

METHOD_LOAD_METRICS = "load_metrics"
METHOD_RESIDUAL = "residual_estimate"
CONFIDENCE_MEASURED = "measured"
CONFIDENCE_ESTIMATED = "estimated"
CONFIDENCE_LOW = "low"
_MIN_BASELINE_BATCHES = 3
# evidence that a store came from the checkpoint (the load-latency check is not one of them)
EVIDENCE_DFS, EVIDENCE_CHANGELOG, EVIDENCE_HDFS, EVIDENCE_SNAPSHOT = (
    "loaded_from_checkpoint",
    "changelog_replay",
    "hdfs_cache_miss",
    "snapshot_reset",
)
EVIDENCE_LATENCY, EVIDENCE_EXECUTOR, EVIDENCE_SIBLING = "load_latency", "executor_removed", "sibling_reload"
EVIDENCE_MIGRATED = "partition_migrated"  # placement: its partitions ran elsewhere, their executor removed
# an estimate that found no extra time: Spark measured nothing for the operator, so its restore took an unknown
# time hidden in the batch's noise (a busy machine's steady batches as slow as the restart's), not 0 s
NOT_VISIBLE = "Spark measures no load time for this operator and the restart batch took no visible extra time"
_RELOADS_KEPT = 64  # per query: (batch, operator) reloads remembered, so placement does not tell one twice


@dataclass
class _Batches:
    """A query's steady batches of the current run, and the previous run's (the restore's baseline)."""

    batches: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=30))  # (input rows, addBatch ms)
    previous: list[tuple[float, float]] = field(default_factory=list)
    reloaded: list[tuple[int, str]] = field(default_factory=list)  # operators of the current batch with a reload
    # (batch id, operator index) of the recent reloads told, and the query's record and run of its latest batch
    # (placement's migrations come after the batch's own rules: ``moved``)
    told: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=_RELOADS_KEPT))
    record: QueryRecord | None = None
    run_id: str | None = None


@dataclass
class _Stores:
    load_ms: deque[float] = field(default_factory=lambda: deque(maxlen=20))
    snapshots: dict[tuple[int, str], float | None] = field(default_factory=dict)
    hdfs_misses: float | None = None


@dataclass(frozen=True)
class RestoreFigure:
    """One operator's restore: seconds, how they were obtained and how sure they are."""

    seconds: float
    method: str
    confidence: str
    detail: dict[str, Any]


# given a restarted run's first batch and its figures, returns those to emit now (the rest it emits later)
Defer = Callable[
    [QueryRecord, QueryProgress, list[tuple[OperatorProgress, "RestoreFigure"]], float, SignalFacts],
    list[tuple[OperatorProgress, "RestoreFigure"]],
]


class Restores(Rule):
    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.s = settings
        self._clock = clock  # a progress without a time: the restore's
        self._queries: dict[str, _Batches] = {}
        self._operators: dict[OperatorKey, _Stores] = {}
        # set when task times follow (spark_state_observer.placement.restores): it holds the residual estimates back
        self.defer: Defer | None = None

    def on_batch(self, ctx: Context) -> None:
        p = ctx.progress
        assert p is not None
        self.batch(ctx.record, p, ctx.first_of_run, ctx.restore_due, p.timestamp or self._clock(), ctx.facts)
        self.operators(ctx.record, p, ctx.ts, ctx.first_of_run, ctx.executor_removed, ctx.facts)

    def new_run(self, query_id: str, carried: dict[str, Any]) -> None:
        self.carry(query_id, carried)
        self._start_run(query_id)

    def _start_run(self, query_id: str) -> None:
        """A run starts: its first batch will be judged against the previous run's, loads start afresh."""
        q = self._queries.setdefault(query_id, _Batches())
        if q.batches:
            q.previous = list(q.batches)
        q.batches.clear()
        for (qid, _, _), st in self._operators.items():
            if qid == query_id:
                st.load_ms.clear()
                st.snapshots.clear()
                st.hdfs_misses = None

    def carry(self, query_id: str, carried: dict[str, Any]) -> None:
        """Keep ``query_id``'s batches in ``carried`` (``RunState.carried``): a run in another application that
        takes the query over judges its restore against this run's batches, as one observer of both would."""
        self._queries[query_id] = carried.setdefault("restores", self._batches(query_id))

    def _batches(self, query_id: str) -> _Batches:
        q = self._queries.get(query_id)
        if q is None:
            q = self._queries[query_id] = _Batches()
        return q

    def forget(self, query_id: str) -> None:
        self._queries.pop(query_id, None)
        for key in [k for k in self._operators if k[0] == query_id]:
            del self._operators[key]

    def forget_operator(self, key: OperatorKey) -> None:
        """An operator (name) the query's label budget dropped."""
        self._operators.pop(key, None)

    def batch(self, record: QueryRecord, p: QueryProgress, first_of_run: bool, restore_due: bool, ts: float, facts: SignalFacts) -> None:
        """The restores of a restarted run's first batch, or one more steady batch for the next baseline.

        A run's first batch never joins the baseline: it carries a new process's warm-up (and a restore)."""
        q = self._batches(record.query_id)
        q.reloaded = []
        q.record, q.run_id = record, p.run_id
        add_batch = p.duration_ms.get(ADD_BATCH)
        if restore_due:
            figures = estimate_restores(p, q.previous)
            if self.defer is not None:
                figures = self.defer(record, p, figures, ts, facts)
            for op, figure in figures:
                self.emit(record, p, op, figure, ts, facts)
        elif add_batch is not None and not first_of_run:
            q.batches.append((float(p.input_rows or 0), add_batch))

    def emit(
        self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, figure: RestoreFigure, ts: float, facts: SignalFacts
    ) -> None:
        """The restore of ``op`` in ``p`` (a restarted run's first batch): its signal, counter and gauges."""
        files = op.custom.get(ROCKSDB_REPLAY_FILES)
        labels = operator_labels(op.index, op.name)
        seconds = figure.seconds if figure.seconds > 0 or figure.method == METHOD_LOAD_METRICS else None
        unknown = {} if seconds is not None else {"duration_unknown": NOT_VISIBLE}
        facts.add(record, catalog.STATE_RESTORES, labels)
        # an unknown duration removes the series: a gauge left at the previous restore's figure would be told as this one's
        facts.set(record, catalog.LAST_RESTORE_DURATION, labels + (("method", figure.method), ("confidence", figure.confidence)), seconds)
        if files is not None:
            facts.set(record, catalog.LAST_RESTORE_CHANGELOG_FILES, labels, files)
        facts.signal(
            kinds.RESTORE,
            record,
            p.run_id,
            ts,
            operator=op.name,
            operator_index=op.index,
            batch_id=p.batch_id,
            provider=op.provider,
            stores=op.store_instances,
            duration_seconds=None if seconds is None else round(seconds, 3),
            method=figure.method,
            confidence=figure.confidence,
            changelog_files=files,
            **figure.detail,
            **unknown,
        )

    def operators(
        self, record: QueryRecord, p: QueryProgress, ts: float, first_of_run: bool, executor_removed: bool, facts: SignalFacts
    ) -> None:
        """Store reloads (or load-latency anomalies) of the batch's operators; the double-load ones last,
        as their reload is inferred from the others'. ``executor_removed``: an executor went away since
        this query's previous batch."""
        ops = p.operators
        q = self._batches(record.query_id)
        for op in sorted(ops, key=self._double_load_last) if len(ops) > 1 else ops:
            self._operator(record, p, op, ts, first_of_run, executor_removed, facts, q)

    @staticmethod
    def _double_load_last(op: OperatorProgress) -> tuple[bool, int]:
        """The order ``operators`` takes a batch's operators in: the double-load ones last, each part by index."""
        return (op.name in DOUBLE_LOAD_OPERATORS, op.index)

    def _operator(
        self,
        record: QueryRecord,
        p: QueryProgress,
        op: OperatorProgress,
        ts: float,
        first_of_run: bool,
        executor_removed: bool,
        facts: SignalFacts,
        q: _Batches,
    ) -> None:
        key = (record.query_id, op.index, op.name)
        st = self._operators.get(key)
        if st is None:
            st = self._operators[key] = _Stores()
        evidence = [] if first_of_run else self._reload_evidence(st, op)
        custom = op.custom
        load_ms = custom.get(ROCKSDB_LOAD_MS)
        corroborated = [e for e in evidence if e != EVIDENCE_LATENCY] if evidence else evidence
        if not corroborated and executor_removed and op.name in DOUBLE_LOAD_OPERATORS and q.reloaded:
            # its own metrics cannot show a reload; an executor loss that made a sibling reload moved it too
            corroborated = evidence = [EVIDENCE_EXECUTOR, EVIDENCE_SIBLING]
        if load_ms is not None and not evidence:
            st.load_ms.append(load_ms)
        misses = custom.get(HDFS_CACHE_MISSES)
        if misses is not None:
            st.hdfs_misses = misses
        for m in op.instances:
            if m.prefix == SNAPSHOT_LAST_UPLOADED:
                st.snapshots[(m.partition, m.store)] = m.value
        if not evidence:
            return
        attrs: dict[str, Any] = {
            "operator": op.name,
            "operator_index": op.index,
            "batch_id": p.batch_id,
            "load_seconds": (load_ms or 0) / 1000.0,
        }
        if corroborated:
            q.reloaded.append((op.index, op.name))
            q.told.append((p.batch_id, op.index))
            facts.add(record, catalog.STATE_STORE_RELOADS, operator_labels(op.index, op.name))
            facts.signal(
                kinds.STORE_RELOAD,
                record,
                p.run_id,
                ts,
                evidence=",".join(evidence),
                changelog_files=op.custom.get(ROCKSDB_REPLAY_FILES),
                **attrs,
            )
        else:  # load latency alone
            facts.add(record, catalog.LOAD_LATENCY_ANOMALIES, operator_labels(op.index, op.name))
            usual = statistics.median(st.load_ms) if st.load_ms else None
            facts.signal(
                kinds.LOAD_LATENCY_ANOMALY, record, p.run_id, ts, usual_load_seconds=None if usual is None else usual / 1000.0, **attrs
            )

    def moved(self, query_id: str, batch_id: int, index: int, name: str, partitions: int, ts: float, facts: SignalFacts) -> None:
        """``partitions`` of operator ``index`` (``name``) ran on another executor in ``batch_id`` because the
        executor that held their stores was removed (placement, ``spark_state_observer.placement.feed``): the new executor
        loaded them from the checkpoint, a reload, unless the operator's own metrics told it already."""
        q = self._queries.get(query_id)
        if q is None or q.record is None or partitions <= 0 or (batch_id, index) in q.told:
            return
        q.told.append((batch_id, index))
        record = q.record
        facts.add(record, catalog.STATE_STORE_RELOADS, operator_labels(index, name))
        facts.signal(
            kinds.STORE_RELOAD,
            record,
            q.run_id,
            ts,
            evidence=f"{EVIDENCE_EXECUTOR},{EVIDENCE_MIGRATED}",
            changelog_files=None,
            operator=name,
            operator_index=index,
            batch_id=batch_id,
            load_seconds=None,  # Spark before 4.1 measures no load: unknown, not zero
            moved_partitions=partitions,
        )

    def _reload_evidence(self, st: _Stores, op: OperatorProgress) -> list[str]:
        evidence = []
        if (op.custom.get(ROCKSDB_LOADED_FROM_DFS) or 0) > 0:
            evidence.append(EVIDENCE_DFS)
        if (op.custom.get(ROCKSDB_REPLAY_FILES) or 0) > 0:
            evidence.append(EVIDENCE_CHANGELOG)
        load_ms = op.custom.get(ROCKSDB_LOAD_MS)
        if (
            load_ms is not None
            and len(st.load_ms) >= 3
            and load_ms / 1000.0 > self.s.restore_load_threshold_seconds
            and load_ms > 3 * max(statistics.median(st.load_ms), 1.0)  # the median (a sort) only for a slow load
        ):
            evidence.append(EVIDENCE_LATENCY)
        misses = op.custom.get(HDFS_CACHE_MISSES)
        if misses is not None and st.hdfs_misses is not None and misses > st.hdfs_misses:
            evidence.append(EVIDENCE_HDFS)
        for m in op.instances:
            if m.prefix != SNAPSHOT_LAST_UPLOADED:
                continue
            before = st.snapshots.get((m.partition, m.store))
            if before is not None and before >= 0 and (m.value is None or m.value < before):
                evidence.append(EVIDENCE_SNAPSHOT)
                break
        return evidence


def estimate_restores(p: QueryProgress, previous: list[tuple[float, float]]) -> list[tuple[OperatorProgress, RestoreFigure]]:
    """Every operator's restore in ``p``, the first batch of a restarted run; ``previous``: the previous
    run's steady batches as (input rows, addBatch ms). See the module docstring for the method."""
    add_batch = p.duration_ms.get(ADD_BATCH)
    bound_ms = add_batch if add_batch is not None else (float(p.batch_duration_ms) if p.batch_duration_ms else None)
    measured: dict[int, float] = {}
    for op in p.operators:
        load_ms = op.custom.get(ROCKSDB_LOAD_MS)
        if load_ms is not None and load_ms > 0 and op.name not in DOUBLE_LOAD_OPERATORS:
            measured[op.index] = load_ms
    measured_total = sum(measured.values())
    scale = min(1.0, bound_ms / measured_total) if bound_ms is not None and measured_total > 0 else 1.0
    figures: list[tuple[OperatorProgress, RestoreFigure]] = []
    unmeasured = [op for op in p.operators if op.index not in measured]
    for op in p.operators:
        if op.index in measured:
            detail: dict[str, Any] = {
                "replay_seconds": op.custom.get(ROCKSDB_REPLAY_MS, 0.0) / 1000.0,
                "loads_from_checkpoint": op.custom.get(ROCKSDB_LOADED_FROM_DFS),
            }
            if scale < 1.0:
                detail["capped_at_batch"] = True  # summed over stores loading in parallel: more than the batch's wall time
            figures.append((op, RestoreFigure(measured[op.index] * scale / 1000.0, METHOD_LOAD_METRICS, CONFIDENCE_MEASURED, detail)))
    if not unmeasured or add_batch is None:
        return sorted(figures, key=lambda f: f[0].index)
    rows = float(p.input_rows or 0)
    baseline = [b for _, b in previous]
    usual_ms = statistics.median(baseline) if baseline else 0.0
    usual_rows = statistics.median([r for r, _ in previous]) if previous else 0.0
    per_row_ms = _time_per_row(previous)
    excess = max(0.0, add_batch - usual_ms)
    backlog = max(0.0, rows - usual_rows) * per_row_ms if previous else 0.0
    explained = measured_total * scale
    residual = max(0.0, min(excess - explained - backlog, add_batch - explained))
    share = residual / len(unmeasured)
    # a backlog the previous run cannot cost (its batches' time did not grow with their rows) may be the whole excess
    uncosted_backlog = rows > 2 * max(usual_rows, 1.0) and per_row_ms == 0.0
    confident = len(previous) >= _MIN_BASELINE_BATCHES and backlog < 0.5 * max(excess - explained, 1e-9) and not uncosted_backlog
    for op in unmeasured:
        detail = {
            "excess_seconds": round(excess / 1000.0, 3),
            "explained_by_other_operators_seconds": round(explained / 1000.0, 3),
            "backlog_seconds": round(backlog / 1000.0, 3),
            "backlog_rows": max(0.0, rows - usual_rows),
            "shared_among_operators": len(unmeasured),
            "baseline_batches": len(previous),
        }
        figures.append((op, RestoreFigure(share / 1000.0, METHOD_RESIDUAL, CONFIDENCE_ESTIMATED if confident else CONFIDENCE_LOW, detail)))
    return sorted(figures, key=lambda f: f[0].index)


def _time_per_row(batches: list[tuple[float, float]]) -> float:
    """Milliseconds of addBatch per extra input row: the median slope over pairs of steady batches with
    different row counts (robust to the odd slow batch of a busy machine); 0 when rows never varied."""
    slopes = [(b2 - b1) / (r2 - r1) for i, (r1, b1) in enumerate(batches) for r2, b2 in batches[i + 1 :] if r2 != r1]
    return max(0.0, statistics.median(slopes)) if slopes else 0.0


ALERTS = (
    AlertSpec(
        "SparkStateRestoreTooLong",
        "state",
        "0m",
        WARNING,
        (kinds.RESTORE,),
        ("restarted",),
        ("restore_seconds",),
        "A state restore after a restart took too long.",
        verdict_text=(("restarted", "Restarted at {at}"),),
    ),
)
Restores.alerts = ALERTS
