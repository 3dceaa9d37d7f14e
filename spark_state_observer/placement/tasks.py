"""Per-task facts of stateful stages: which executor ran each state partition, and what its store cost.

Spark's progress events only carry sums over tasks. The event log has each task: ``SparkListenerTaskEnd``
gives the executor, host, attempt and the partition id (in a stateful stage the partition id *is* the
state partition id: the store is opened with ``TaskContext.partitionId()``), and the state operators'
SQL metrics as accumulables. Mapping them needs three more events:

- ``SparkListenerSQLExecutionStart`` / ``SparkListenerSQLAdaptiveExecutionUpdate``: the plan, whose stateful
  nodes list their metrics by accumulator id (the id ties a task's accumulable to its operator);
- ``SparkListenerJobStart``: the job's properties name the SQL execution (``spark.sql.execution.id``), the
  streaming query (``sql.streaming.queryId``), the run (``spark.jobGroup.id``) and the batch
  (``streaming.sql.batchId``), and list the job's stages;
- a ``QueryProgressEvent`` of the query closes its batch: every task of it has ended by then.

One ``PartitionRun`` per (query, batch, operator, partition) comes out: the final successful attempt,
with the failed attempts before it counted. Nothing here raises on bad input (problems are counted) and
memory stays bounded: plans and stage mappings of a few recent executions, the open batches only.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec

from spark_state_observer.model.decode import ProgressIds
from spark_state_observer.model.spark_events import (
    EXECUTOR_ADDED,
    EXECUTOR_REMOVED,
    JOB_START,
    QUERY_PROGRESS,
    QUERY_STARTED,
    SQL_ADAPTIVE,
    SQL_START,
    TASK_END,
)
from spark_state_observer.placement import task_decode
from spark_state_observer.placement.restore_progress import RestoreProgress
from spark_state_observer.placement.task_lines import JOB_START_LINE, LOST_REASONS, PLAN_LINES, STATE_METRICS, TASK_END_LINE, WRITER_MARKERS

_COUNT_FIELDS = frozenset({"changelog_files", "loads_from_dfs", "rows_total", "store_instances", "cache_misses", "sst_bytes"})
MAX_EXECUTIONS = 32  # plans kept: a batch runs 1-2 executions, several queries may interleave
MAX_STAGES = 512  # stage -> batch mappings kept
MAX_OPEN_BATCHES = 16  # batches collected but not yet closed by their progress event, over all queries
MAX_PARTITIONS = 10_000  # per (operator, batch)
MAX_OPERATORS = 64
_MAX_PLAN_NODES = 100_000
_UNSET: Any = msgspec.UNSET


@dataclass(frozen=True)
class PartitionRun:
    """Where one state partition of one operator ran in one batch, and what that task reported."""

    query_id: str
    run_id: str | None
    batch_id: int
    operator: int  # index in the progress event's stateOperators (the plan's stateful nodes, top down)
    operator_name: str  # the plan node, e.g. StateStoreSave, StreamingDeduplicate
    partition: int
    executor_id: str
    host: str | None
    attempt: int
    speculative: bool
    stage_id: int
    stage_attempt: int
    launch_time: float | None  # seconds since the epoch
    finish_time: float | None
    duration_seconds: float | None
    failed_attempts: int = 0  # attempts of this partition in this batch that did not succeed
    failed_on: tuple[str, ...] = ()  # their executors
    lost_executor: bool = False  # one of them failed because its executor was lost
    load_ms: float | None = None
    replay_ms: float | None = None
    changelog_files: int | None = None
    snapshot_load_ms: float | None = None
    loads_from_dfs: int | None = None  # stores fetched from the checkpoint rather than reused (4.2+; 0 is left out by Spark)
    rows_total: int | None = None
    memory_bytes: int | None = None
    store_instances: int | None = None
    cache_misses: int | None = None
    sst_bytes: int | None = None  # RocksDB's SST files after the commit: the state's size, which memory does not follow


@dataclass
class BatchTasks:
    """All partition runs of one batch of one query, once the batch is closed."""

    query_id: str
    run_id: str | None
    batch_id: int
    runs: list[PartitionRun]
    closed_by: str = "progress"  # progress, newer_batch, overflow, end
    query_name: str | None = None  # from the progress event that closed the batch
    operator_names: dict[int, str] = field(default_factory=dict)  # stateOperators[i].operatorName of that progress event


@dataclass(frozen=True)
class ExecutorChange:
    """An executor registered or went away (``SparkListenerExecutorAdded`` / ``Removed``)."""

    executor_id: str
    added: bool
    timestamp: float | None
    host: str | None = None
    reason: str | None = None


@dataclass
class _StageRef:
    query_id: str
    run_id: str | None
    batch_id: int
    execution_id: int | None
    operators: dict[int, str] = field(default_factory=dict)  # its state operators, from its tasks that succeeded


@dataclass
class _Operator:
    index: int
    name: str


@dataclass(slots=True)
class _Task:
    """What one task end says besides its state accumulables, as the reader reads it (either decode)."""

    executor: Any  # a str when usable
    partition: int | None
    reason: str
    host: Any
    attempt: int
    speculative: bool
    stage: int
    stage_attempt: int
    launch: int | None
    finish: int | None


@dataclass
class _Attempts:
    """The attempts of one partition of one operator in one batch, reduced to what is needed."""

    best: tuple[_Task, dict[str, float | None]] | None = None  # the successful attempt that finished last, and its state fields
    failed: int = 0
    failed_on: list[str] = field(default_factory=list)
    lost: bool = False


class TaskEventReader:
    """Turns Spark listener events (as event-log JSON objects) into closed batches of partition runs.

    ``feed(event)`` returns what the event completed: closed ``BatchTasks`` and ``ExecutorChange`` items,
    in order. ``close()`` hands out batches still open at the end of a log.
    """

    def __init__(self, max_open_batches: int = MAX_OPEN_BATCHES) -> None:
        self.problems: dict[str, int] = {}
        self.max_open_batches = max_open_batches
        self._plans: OrderedDict[int, dict[int, _Operator]] = OrderedDict()  # execution -> accumulator id -> operator
        self._stages: OrderedDict[int, _StageRef] = OrderedDict()
        self._open: OrderedDict[tuple[str, int], dict[tuple[int, int], _Attempts]] = OrderedDict()
        self._runs: OrderedDict[tuple[str, int], str | None] = OrderedDict()
        self._names: dict[tuple[str, int], dict[int, str]] = {}
        self.restores: RestoreProgress | None = None  # a restore while it runs, told every job start and state task end

    # --- intake ---------------------------------------------------------------------------------------
    def feed(self, event: Any) -> list[BatchTasks | ExecutorChange]:
        """Apply one event; never raises: anything unusable is counted in ``problems``."""
        try:
            if not isinstance(event, Mapping):
                self._problem("not_an_object")
                return []
            kind = event.get("Event")
            if kind == TASK_END:
                return self._task_end(event)
            if kind == JOB_START:
                self._job_start(event)
            elif kind in (SQL_START, SQL_ADAPTIVE):
                self._plan(event)
            elif kind == QUERY_PROGRESS:
                return self._progress(event.get("progress"))
            elif kind == QUERY_STARTED:
                if self.restores is not None and isinstance(event.get("id"), str):
                    run_id = event.get("runId")
                    self.restores.on_run_started(event["id"], run_id if isinstance(run_id, str) else None)
            elif kind in (EXECUTOR_ADDED, EXECUTOR_REMOVED):
                return self._executor(event, kind.endswith("Added"))
        except Exception as exc:  # a shape nobody foresaw: count it, keep going
            self._problem(f"error:{type(exc).__name__}")
        return []

    def feed_line(self, line: bytes) -> list[BatchTasks | ExecutorChange] | None:
        """Apply one raw event-log line of a task end, job start or SQL plan through the typed decode
        (``spark_state_observer.placement.task_decode``); ``None`` when it declines: then ``feed(json.loads(line))``. Never raises."""
        try:
            if line.startswith(TASK_END_LINE):
                task = task_decode.task_end(line)
                if task is None or task.event != TASK_END:
                    return None
                return self._typed_task_end(task)
            if line.startswith(JOB_START_LINE):
                job = task_decode.job_start(line)
                if job is None or job.Event != JOB_START:
                    return None
                p = job.properties
                self._job(p.query_id, p.batch_id, p.job_group, p.execution_id, job.stage_ids, job.submitted, p.shuffle_partitions)
                return []
            if line.startswith(PLAN_LINES):
                plan = task_decode.plan(line)
                if plan is None or plan.Event not in (SQL_START, SQL_ADAPTIVE):
                    return None
                self._typed_plan(plan)
                return []
        except Exception as exc:  # as in feed
            self._problem(f"error:{type(exc).__name__}")
            return []
        return None

    def close(self) -> list[BatchTasks]:
        """Every batch still open (a log that ends mid-batch, or progress events that never came)."""
        return [self._close(key, "end") for key in list(self._open)]

    # --- events ---------------------------------------------------------------------------------------
    def _plan(self, event: Mapping[str, Any]) -> None:
        execution = _int(event.get("executionId"))
        info = event.get("sparkPlanInfo")
        if execution is None or not isinstance(info, Mapping):
            self._problem("plan_without_execution_or_plan")
            return
        operators: dict[int, _Operator] = {}
        index = 0
        stack: list[Any] = [info]
        depth = 0
        while stack and depth < _MAX_PLAN_NODES:  # pre-order, like the progress event's stateOperators
            depth += 1
            node = stack.pop()
            if not isinstance(node, Mapping):
                continue
            raw_metrics = node.get("metrics")
            metrics: list[Any] = raw_metrics if isinstance(raw_metrics, list) else []
            names = {m.get("name") for m in metrics if isinstance(m, Mapping)}
            if names & WRITER_MARKERS:
                op = _Operator(index, str(node.get("nodeName", "?")))
                index += 1
                for m in metrics:
                    acc = _int(m.get("accumulatorId")) if isinstance(m, Mapping) else None
                    if acc is not None and m.get("name") in STATE_METRICS:
                        operators[acc] = op
            children = node.get("children")
            if isinstance(children, list):
                stack.extend(reversed(children))
        self._store_plan(execution, operators)

    def _typed_plan(self, found: task_decode.Plan) -> None:
        """``_plan`` over the typed decode: the same walk, with every type already checked by the decode."""
        operators: dict[int, _Operator] = {}
        index = 0
        stack = [found.sparkPlanInfo]
        depth = 0
        while stack and depth < _MAX_PLAN_NODES:
            depth += 1
            node = stack.pop()
            metrics = node.metrics
            if metrics and not WRITER_MARKERS.isdisjoint([m.name for m in metrics]):
                op = _Operator(index, node.nodeName)
                index += 1
                for m in metrics:
                    if m.accumulatorId is not None and m.name in STATE_METRICS:
                        operators[m.accumulatorId] = op
            if node.children:
                stack.extend(reversed(node.children))
        self._store_plan(found.executionId, operators)

    def _store_plan(self, execution: int, operators: dict[int, _Operator]) -> None:
        if operators or execution not in self._plans:
            self._plans[execution] = operators
            self._plans.move_to_end(execution)
        while len(self._plans) > MAX_EXECUTIONS:
            self._plans.popitem(last=False)

    def _job_start(self, event: Mapping[str, Any]) -> None:
        props = event.get("Properties")
        if not isinstance(props, Mapping):
            return
        self._job(
            props.get("sql.streaming.queryId"),
            props.get("streaming.sql.batchId"),
            props.get("spark.jobGroup.id"),
            props.get("spark.sql.execution.id"),
            event.get("Stage IDs"),
            event.get("Submission Time"),
            props.get("spark.sql.shuffle.partitions"),
        )

    def _job(
        self, query_id: Any, raw_batch: Any, group: Any, raw_execution: Any, stage_ids: Any, submitted: Any = None, partitions: Any = None
    ) -> None:
        """A job's properties (as read, any type) and stage ids: its stages belong to that query's batch."""
        batch = _int(raw_batch)
        if not isinstance(query_id, str) or batch is None:
            return  # not a streaming batch's job
        run_id = group if isinstance(group, str) else None
        ref = _StageRef(query_id, run_id, batch, _int(raw_execution))
        for stage in stage_ids if isinstance(stage_ids, list) else []:
            sid = _int(stage)
            if sid is not None:
                self._stages[sid] = ref
                self._stages.move_to_end(sid)
        while len(self._stages) > MAX_STAGES:
            self._stages.popitem(last=False)
        self._runs[(query_id, batch)] = run_id
        while len(self._runs) > MAX_STAGES:
            self._runs.popitem(last=False)
        if self.restores is not None:
            at = _int(submitted)
            plan = self._plans.get(ref.execution_id) if ref.execution_id is not None else None
            operators = {op.index: op.name for op in (plan or {}).values()}
            self.restores.on_job(query_id, run_id, batch, at / 1000.0 if at is not None else None, _int(partitions), operators)

    def _typed_task_end(self, found: task_decode.TaskEnd) -> list[BatchTasks | ExecutorChange]:
        """``_task_end`` over the typed decode."""
        ref = self._stages.get(found.stage)
        if ref is None:
            return []  # not a stage of a streaming batch we saw start
        info = found.info
        state = [(f, a.ID, a.Update) for a in info.accumulables if (f := STATE_METRICS.get(a.Name)) is not None]  # type: ignore[arg-type]
        partition = info.partition if info.partition is not _UNSET else info.index
        if not state:
            self._lost(ref, found.reason_text, partition if isinstance(partition, int) else None, info.executor)
            return []
        return self._apply_task(
            ref,
            state,
            _Task(
                executor=info.executor,
                partition=partition if partition is not _UNSET else None,  # type: ignore[arg-type]
                reason=found.reason_text,
                host=info.host,
                attempt=info.attempt or 0,
                speculative=info.speculative is True,
                stage=found.stage,
                stage_attempt=found.stage_attempt or 0,
                launch=info.launch if info.launch is not _UNSET else None,  # type: ignore[arg-type]
                finish=info.finish if info.finish is not _UNSET else None,  # type: ignore[arg-type]
            ),
        )

    def _task_end(self, event: Mapping[str, Any]) -> list[BatchTasks | ExecutorChange]:
        stage = _int(event.get("Stage ID"))
        ref = self._stages.get(stage) if stage is not None else None
        info = event.get("Task Info")
        if stage is None or ref is None or not isinstance(info, Mapping):
            if not isinstance(info, Mapping):
                self._problem("task_without_info")
            return []  # not a stage of a streaming batch we saw start
        accs = info.get("Accumulables")
        state = []
        for acc in accs if isinstance(accs, list) else []:
            if not isinstance(acc, Mapping):
                continue
            name = acc.get("Name")
            field_name = STATE_METRICS.get(name) if isinstance(name, str) else None
            if field_name is not None:
                state.append((field_name, acc.get("ID"), acc.get("Update")))
        partition = _int(info.get("Partition ID"))
        if not state:  # a stage without state operators (the source's, for one), or a task lost with its executor
            self._lost(ref, _reason(event), _int(info.get("Index")) if partition is None else partition, info.get("Executor ID"))
            return []
        task = _Task(
            executor=info.get("Executor ID"),
            partition=_int(info.get("Index")) if partition is None else partition,
            reason=_reason(event),
            host=info.get("Host"),
            attempt=_int(info.get("Attempt")) or 0,
            speculative=info.get("Speculative") is True,
            stage=stage,
            stage_attempt=_int(event.get("Stage Attempt ID")) or 0,
            launch=_int(info.get("Launch Time")),
            finish=_int(info.get("Finish Time")),
        )
        return self._apply_task(ref, state, task)

    def _apply_task(self, ref: _StageRef, state: list[tuple[str, Any, Any]], task: _Task) -> list[BatchTasks | ExecutorChange]:
        """One task of a known stage with state accumulables ((field, accumulator id, update) as read): into its batch."""
        plan = self._plans.get(ref.execution_id) if ref.execution_id is not None else None
        values: dict[int, dict[str, float | None]] = {}
        names: dict[int, str] = {}
        for field_name, raw_id, update in state:
            acc_id = _int(raw_id)
            op = plan.get(acc_id) if plan is not None and acc_id is not None else None
            if op is None:
                if plan is None:
                    self._problem("task_without_plan")
                op = _Operator(0, "?")  # the plan is missing: all state metrics of the task go to one operator
            values.setdefault(op.index, {})[field_name] = _number(update)
            names[op.index] = op.name
        executor, partition = task.executor, task.partition
        if not isinstance(executor, str) or partition is None or partition < 0:
            self._problem("task_without_executor_or_partition")
            return []
        out = self._make_room(ref)
        key = (ref.query_id, ref.batch_id)
        batch = self._open.setdefault(key, {})
        self._names.setdefault(key, {}).update(names)
        reason = task.reason
        for op_index, fields in values.items():
            if len(batch) >= MAX_PARTITIONS * 4 and (op_index, partition) not in batch:
                self._problem("too_many_partitions")
                continue
            slot = batch.setdefault((op_index, partition), _Attempts())
            if reason == "Success":
                if slot.best is None or (task.finish or 0) >= (slot.best[0].finish or 0):
                    slot.best = (task, fields)
                if len(ref.operators) < MAX_OPERATORS:
                    ref.operators[op_index] = names[op_index]
                if self.restores is not None:
                    launch, finish = task.launch, task.finish
                    self.restores.on_task(
                        ref.query_id,
                        ref.batch_id,
                        op_index,
                        names[op_index],
                        partition,
                        launch / 1000.0 if launch is not None else None,
                        finish / 1000.0 if finish is not None else None,
                        fields,
                        executor,
                    )
            else:
                self._lost(ref, reason, partition, executor, (op_index,))
                if reason == "Resubmitted":  # an earlier success whose output was lost: not a failed attempt
                    continue
                slot.failed += 1
                if len(slot.failed_on) < 16:
                    slot.failed_on.append(executor)
                slot.lost = slot.lost or reason == "ExecutorLostFailure"
        return out

    def _progress(self, progress: Any) -> list[BatchTasks | ExecutorChange]:
        if not isinstance(progress, Mapping):
            self._problem("progress_without_body")
            return []
        ops = progress.get("stateOperators")
        names = [
            op.get("operatorName") if isinstance(op, Mapping) else None for op in (ops[:MAX_OPERATORS] if isinstance(ops, list) else [])
        ]
        return self._closes(progress.get("id"), progress.get("batchId"), progress.get("name"), names)

    def progress_ids(self, progress: ProgressIds) -> list[BatchTasks | ExecutorChange]:
        """A progress event as the typed decode of a progress line reads it (``spark_state_observer.model.decode.event_progress_ids``):
        what ``feed`` does with the whole event, without building it. Never raises."""
        try:
            ops = progress.stateOperators
            names = [op.operatorName for op in ops[:MAX_OPERATORS]] if ops is not None else []
            return self._closes(progress.id, progress.batchId, progress.name, names)
        except Exception as exc:  # as in feed
            self._problem(f"error:{type(exc).__name__}")
            return []

    def _closes(self, query_id: Any, raw_batch: Any, name: Any, names: list[Any]) -> list[BatchTasks | ExecutorChange]:
        """A progress event's ids and operator names (as read, any type): the batches it closes."""
        batch = _int(raw_batch)
        if not isinstance(query_id, str) or batch is None:
            self._problem("progress_without_ids")
            return []
        op_names = {i: op for i, op in enumerate(names) if isinstance(op, str)}
        if self.restores is not None:
            self.restores.on_batch_closed(query_id, batch, op_names)
        if not self._open:  # nothing collected: nothing to close (a log without task events, or between batches)
            return []
        done = [k for k in self._open if k[0] == query_id and k[1] <= batch]
        closed: list[BatchTasks | ExecutorChange] = []
        query_name = name if isinstance(name, str) else None
        for k in done:
            b = self._close(k, "progress" if k[1] == batch else "newer_batch", query_name)
            b.operator_names = op_names
            closed.append(b)
        return closed

    def _executor(self, event: Mapping[str, Any], added: bool) -> list[BatchTasks | ExecutorChange]:
        executor = event.get("Executor ID")
        if not isinstance(executor, str):
            self._problem("executor_without_id")
            return []
        ts = event.get("Timestamp")
        if not added and self.restores is not None:
            self.restores.on_executor_removed(ts / 1000.0 if isinstance(ts, (int, float)) else None, executor)
        info = event.get("Executor Info")
        if self.restores is not None:  # the task slots a restore's waves run on
            cores = info.get("Total Cores") if added and isinstance(info, Mapping) else None
            self.restores.on_executor_cores(executor, cores if type(cores) is int else None)
        host = info.get("Host") if isinstance(info, Mapping) and isinstance(info.get("Host"), str) else None
        reason = event.get("Removed Reason")
        return [
            ExecutorChange(
                executor, added, ts / 1000.0 if isinstance(ts, (int, float)) else None, host, reason if isinstance(reason, str) else None
            )
        ]

    def _lost(self, ref: _StageRef, reason: str, partition: Any, executor: Any, operators: tuple[int, ...] | None = None) -> None:
        """A task lost with its executor (``ExecutorLostFailure`` while it ran, ``Resubmitted`` once done) loads its
        partition again; ``operators``: its state operators, else (a task end without state figures) those a success
        of the stage named."""
        if reason not in LOST_REASONS or self.restores is None or not isinstance(partition, int) or partition < 0:
            return
        for op_index in ref.operators if operators is None else operators:
            self.restores.on_task_lost(ref.query_id, ref.batch_id, op_index, partition, executor if isinstance(executor, str) else None)

    # --- batches --------------------------------------------------------------------------------------
    def _make_room(self, ref: _StageRef) -> list[BatchTasks | ExecutorChange]:
        if (ref.query_id, ref.batch_id) in self._open or len(self._open) < self.max_open_batches:
            return []
        self._problem("open_batches_overflow")
        oldest = next(iter(self._open))
        return [self._close(oldest, "overflow")]

    def _close(self, key: tuple[str, int], why: str, name: str | None = None) -> BatchTasks:
        slots = self._open.pop(key, {})
        names = self._names.pop(key, {})
        run_id = self._runs.pop(key, None)
        runs = []
        for (op_index, partition), slot in sorted(slots.items()):
            best = slot.best
            if best is None:
                continue  # no attempt succeeded (yet): the partition has no placement in this batch
            task, f = best[0], cast(dict[str, Any], best[1])
            launch, finish = task.launch, task.finish
            runs.append(
                PartitionRun(
                    query_id=key[0],
                    run_id=run_id,
                    batch_id=key[1],
                    operator=op_index,
                    operator_name=names.get(op_index, "?"),
                    partition=partition,
                    executor_id=task.executor,
                    host=task.host if isinstance(task.host, str) else None,
                    attempt=task.attempt,
                    speculative=task.speculative,
                    stage_id=task.stage,
                    stage_attempt=task.stage_attempt,
                    launch_time=launch / 1000.0 if launch is not None else None,
                    finish_time=finish / 1000.0 if finish is not None else None,
                    duration_seconds=(finish - launch) / 1000.0 if launch is not None and finish is not None and finish >= launch else None,
                    failed_attempts=slot.failed,
                    failed_on=tuple(slot.failed_on),
                    lost_executor=slot.lost,
                    **{k: (int(v) if k in _COUNT_FIELDS else v) for k, v in f.items() if v is not None},
                )
            )
        return BatchTasks(key[0], run_id, key[1], runs, why, name)

    def _problem(self, what: str) -> None:
        if what in self.problems or len(self.problems) < 64:
            self.problems[what] = self.problems.get(what, 0) + 1


def _reason(event: Mapping[str, Any]) -> str:
    reason = event.get("Task End Reason")
    value = reason.get("Reason") if isinstance(reason, Mapping) else None
    return value if isinstance(value, str) else "?"


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    if isinstance(value, float) and math.isfinite(value) and abs(value) < 2**63:
        return int(value)
    return None


def _number(value: Any) -> float | None:
    """An accumulable's update: Spark writes SQL metrics as strings of a long; NaN and junk become None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str) and len(value) < 40:
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None
