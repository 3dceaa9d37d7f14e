"""The restore of operators Spark does not measure, from the task times of the restarted run's first batch.

An aggregation (and a session window) loads its store twice per task: the restore from the checkpoint is
the first load, which reports nothing; Spark 3.5/4.0 report no load time for any operator. From progress
alone, ``spark_state_observer.signals.restore`` can only estimate their restore as what remains of the first batch's
excess (``residual_estimate``), which still holds the new process's warm-up, its query planning and the
machine's mood: on the recorded restarts 4-10x the real extra time (docs/findings/restore-metrics.md).

Where the observer follows tasks (``spark_state_observer.placement.feed``: event logs in replay and watch, the
driver's REST API live when placement polling is on) it knows each state partition's task in each batch.
The tasks of a stateful stage run the operators of that stage for one partition; restoring the state
makes the first batch's tasks longer. So, per stage of an operator without a figure of its own:

- ``first``: the slowest task of the stage in the restarted run's first batch (the stage's wall time is
  bounded by it, and the restore is what delays the batch);
- ``steady``: the median, over the next ``STEADY_BATCHES`` batches of the same run, of the same stage's
  slowest task (the same process, so the same machine and JVM, once warm);
- the restore is ``first - steady``, less what the measured operators of the same stage loaded in that
  task, shared equally among the stage's unmeasured operators (``method=task_times``). The sum of the
  batch's restores never exceeds its ``addBatch``.

``confidence=estimated``: the first batch of a new process also warms up the stage's code (class loading,
code generation, JIT) and the difference of two wall times holds that as well; ``low`` when the run ended
(or the observer lost the tasks) before ``STEADY_BATCHES`` later batches, with at least one. Without the
first batch's tasks, or without any later batch, the held residual estimate is emitted unchanged.

So the figure comes ``STEADY_BATCHES`` batches after the restore, carrying the restore batch's id and time;
operators Spark measures (``load_metrics``) are emitted at once, as before.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict
from dataclasses import dataclass, field

from spark_state_observer.metrics.tracker import QueryRecord
from spark_state_observer.model.events import OperatorProgress, QueryProgress
from spark_state_observer.model.phases import ADD_BATCH
from spark_state_observer.placement.tasks import BatchTasks, ExecutorChange
from spark_state_observer.placement.tracker import CAUSE_EXECUTOR_REMOVED, OperatorBatch
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.restore import CONFIDENCE_ESTIMATED, CONFIDENCE_LOW, METHOD_RESIDUAL, RestoreFigure, Restores

METHOD_TASK_TIMES = "task_times"
STEADY_BATCHES = 3  # later batches whose slowest task makes the stage's steady state
GRACE_BATCHES = 3  # batches more to wait for tasks that come late (live polling lags the progress event)
# batches a source's tasks may come after their progress event: an event log has them before it, always
LATE_BATCHES = {"eventlog": 0}
MAX_PENDING = 64  # queries with a restore held back at once; the oldest is dropped beyond


@dataclass
class _Pending:
    """A restarted run's first batch whose unmeasured restores wait for task times."""

    record: QueryRecord
    progress: QueryProgress
    held: list[tuple[OperatorProgress, RestoreFigure]]  # their residual estimates: the fallback
    ts: float
    measured_seconds: float  # the restores of the same batch already emitted (load metrics)
    first: dict[int, tuple[int, float, int, float]] | None = None  # operator -> (stage, slowest task s, its partition, measured load s)
    steady: dict[int, list[float]] = field(default_factory=dict)  # operator -> slowest task (s) of each later batch


class TaskRestores:
    """Holds a restarted run's residual estimates until the task times can replace them; thread-confined."""

    def __init__(self, restores: Restores, source: str = "") -> None:
        """``source``: the placement source's name; how late its tasks may come (``LATE_BATCHES``)."""
        self.restores = restores
        self.late_batches = LATE_BATCHES.get(source, GRACE_BATCHES)
        self._pending: OrderedDict[str, _Pending] = OrderedDict()  # query id ->

    def attach(self) -> None:
        """From now on, ``restores`` hands its residual estimates here instead of emitting them."""
        self.restores.defer = self.hold

    def hold(
        self, record: QueryRecord, p: QueryProgress, figures: list[tuple[OperatorProgress, RestoreFigure]], ts: float, facts: SignalFacts
    ) -> list[tuple[OperatorProgress, RestoreFigure]]:
        """Keep the residual estimates of ``p`` (a restarted run's first batch); return the rest to emit now."""
        held = [(op, f) for op, f in figures if f.method == METHOD_RESIDUAL]
        now = [(op, f) for op, f in figures if f.method != METHOD_RESIDUAL]
        self._resolve(record.query_id, facts)  # a previous restart still waiting: what it has
        if held:
            self._pending[record.query_id] = _Pending(record, p, held, ts, sum(f.seconds for _, f in now))
            while len(self._pending) > MAX_PENDING:
                self._pending.popitem(last=False)
        return now

    def on_progress(self, progress: QueryProgress, items: list[BatchTasks | ExecutorChange], facts: SignalFacts) -> None:
        """The batches whose tasks the feed took at ``progress``; a held restore is emitted once it can be."""
        for item in items:
            if isinstance(item, BatchTasks) and item.query_id in self._pending:
                self._batch(self._pending[item.query_id], item)
        pending = self._pending.get(progress.query_id)
        if pending is None:
            return
        first = pending.progress
        if pending.first is None and progress.batch_id >= first.batch_id + self.late_batches:
            self._resolve(progress.query_id, facts)  # the first batch's tasks did not come: the residual estimate
        elif progress.run_id != first.run_id or progress.batch_id >= first.batch_id + STEADY_BATCHES + self.late_batches:
            self._resolve(progress.query_id, facts)  # another run, or later tasks will not come: what there is
        elif pending.first is not None and all(len(pending.steady.get(op.index, ())) >= STEADY_BATCHES for op, _ in pending.held):
            self._resolve(progress.query_id, facts)

    def on_migrations(self, batches: list[OperatorBatch], ts: float, facts: SignalFacts) -> None:
        """Operator batches whose partitions moved because their executor was removed: store reloads
        (``Restores.moved``), the evidence Spark 3.5/4.0 report none of in progress."""
        for ob in batches:
            lost = sum(m.cause == CAUSE_EXECUTOR_REMOVED for m in ob.migrations)
            if lost:
                self.restores.moved(ob.query_id, ob.batch_id, ob.operator, ob.operator_name, lost, ts, facts)

    def on_terminated(self, query_id: str, run_id: str | None, facts: SignalFacts) -> None:
        """The run ended: a held restore goes out with the later batches there were."""
        pending = self._pending.get(query_id)
        if pending is not None and (run_id is None or run_id == pending.progress.run_id):
            self._resolve(query_id, facts)

    def finish(self, facts: SignalFacts) -> None:
        """The observer stops (or a log ends without the query's termination): everything held goes out."""
        for query_id in list(self._pending):
            self._resolve(query_id, facts)

    def _batch(self, pending: _Pending, batch: BatchTasks) -> None:
        first = pending.progress
        if batch.run_id is not None and first.run_id is not None and batch.run_id != first.run_id:
            return
        by_op: dict[int, list[tuple[int, float, int, float]]] = {}  # operator -> (stage, task seconds, partition, load s)
        for run in batch.runs:
            if run.duration_seconds is not None:
                by_op.setdefault(run.operator, []).append(
                    (run.stage_id, run.duration_seconds, run.partition, (run.load_ms or 0.0) / 1000.0)
                )
        if batch.batch_id == first.batch_id:
            pending.first = {op: max(tasks, key=lambda t: t[1]) for op, tasks in by_op.items()}
        elif first.batch_id < batch.batch_id and pending.first is not None:
            for op, _ in pending.held:
                tasks = by_op.get(op.index)
                steady = pending.steady.setdefault(op.index, [])
                if tasks and len(steady) < STEADY_BATCHES:
                    steady.append(max(t[1] for t in tasks))

    def _resolve(self, query_id: str, facts: SignalFacts) -> None:
        pending = self._pending.pop(query_id, None)
        if pending is None:
            return
        for op, figure in self._figures(pending):
            self.restores.emit(pending.record, pending.progress, op, figure, pending.ts, facts)

    def _figures(self, pending: _Pending) -> list[tuple[OperatorProgress, RestoreFigure]]:
        """Task-time figures where the first batch and a later one have the operator's tasks, else the residual."""
        first = pending.first or {}
        measured = {op.index for op in pending.progress.operators} - {op.index for op, _ in pending.held}
        timed = [(op, f) for op, f in pending.held if op.index in first and pending.steady.get(op.index)]
        out = [(op, f) for op, f in pending.held if op.index not in {o.index for o, _ in timed}]
        stages: dict[int, list[OperatorProgress]] = {}
        for op, _ in timed:
            stages.setdefault(first[op.index][0], []).append(op)
        raw: dict[int, tuple[float, dict[str, float | int]]] = {}
        for stage, ops in stages.items():
            # one task runs every operator of its stage: the slowest task, and what measured operators loaded in it
            _, slowest, partition, _ = first[ops[0].index]
            steady = statistics.median(pending.steady[ops[0].index])
            explained = sum(first[i][3] for i in measured if i in first and first[i][0] == stage and first[i][2] == partition)
            excess = max(0.0, slowest - steady)
            share = max(0.0, excess - explained) / len(ops)
            for op in ops:
                raw[op.index] = (
                    share,
                    {
                        "first_batch_task_seconds": round(slowest, 3),
                        "steady_task_seconds": round(steady, 3),
                        "steady_batches": len(pending.steady[op.index]),
                        "explained_by_other_operators_seconds": round(min(explained, excess), 3),
                        "shared_among_operators": len(ops),
                        "stage_id": stage,
                        "partition": partition,
                    },
                )
        add_batch = pending.progress.duration_ms.get(ADD_BATCH)
        room = None if add_batch is None else max(0.0, add_batch / 1000.0 - pending.measured_seconds)
        total = sum(seconds for seconds, _ in raw.values())
        scale = min(1.0, room / total) if room is not None and total > 0 else 1.0
        for op, residual in timed:
            seconds, detail = raw[op.index]
            confidence = CONFIDENCE_ESTIMATED if detail["steady_batches"] >= STEADY_BATCHES else CONFIDENCE_LOW
            detail = {**detail, "residual_estimate_seconds": round(residual.seconds, 3)}
            if scale < 1.0:
                detail["capped_at_batch"] = True
            out.append((op, RestoreFigure(seconds * scale, METHOD_TASK_TIMES, confidence, detail)))
        return sorted(out, key=lambda f: f[0].index)
