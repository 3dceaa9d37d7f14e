"""A restore while it runs: partitions loaded and left per stateful operator, elapsed time and an ETA.

Spark says how long a restore took only when the batch that did it ends (``spark_state_observer.signals.restore``,
``spark_state_observer.placement.restores``): the first batch of a run loads every state store from the checkpoint
(snapshot plus changelog replay), and for minutes nothing tells how far it is. The tasks do: in a stateful
stage each task opens the store of its partition (``TaskContext.partitionId()``) before it reads a row, so
a finished task of the restoring batch is a restored partition. This module follows those task ends as
``spark_state_observer.placement.tasks.TaskEventReader`` reads them (event logs in replay and ``watch``, in the log's
order and with the log's times) and turns them into a bounded stream of notes:

- ``restore_started`` when a restoring batch's job starts (its time: the job's submission), per stateful
  operator of the batch's plan, with ``partitions_total`` (the batch's ``spark.sql.shuffle.partitions``,
  which Spark takes from the checkpoint and passes as a job property);
- ``restore_progress`` at most once per tenth of the partitions, and at least ``interval_seconds`` apart
  otherwise: ``partitions_done``, ``elapsed_seconds`` (since the job's submission) and ``eta_seconds``;
- ``restore_finished`` when the last partition is in (``complete``), or when the batch's progress event
  closes it first (a partition the observer did not see: ``complete=False``), with ``duration_seconds``.

Which batch restores: the first batch of a run (after its ``QueryStartedEvent``) with committed batches
before it (a restart from the checkpoint: ``reason=restart``) and, after an executor was removed, each query's
first batch submitted after the removal (``executor_lost``: the lost partitions load on the executors left,
the others reuse their stores, so that restore counts every partition but only the moved ones load).

An executor lost while a restore runs (``on_task_lost``, ``on_executor_removed``): Spark runs the partitions it
held again in the same batch (a running task fails with ``ExecutorLostFailure``; a finished one of a shuffle
map stage is ``Resubmitted``, its output gone), so they load again, elsewhere. The restore keeps its reason
(a restart still loads every partition), counts such a partition done only when its retry ends, and says
``executors_lost`` and ``partitions_retried``. The query's next batch restores for that loss only if a
partition the restore finished on the lost executor was not run again (a result stage's: its store is gone
with the executor and loads in the next batch); otherwise the batch that ran took the loss in.

ETA (``eta_basis`` says which): the restore's stages played forward as Spark schedules them
(``spark_state_observer.placement.restore_eta``): tasks in partition order on the task slots (the executors'
cores), the tasks in flight finishing first, an operator's stage after the stages below it in the plan (their
tasks come first, in an earlier stage or in the same task, so an operator's remaining work counts theirs). Where
the checkpoint can be read, the composition root's ``expected_work`` hook (``spark_state_observer.model.checkpoint_work``:
per operator and partition, the files and bytes the batch loads, priced at the inspector's rates) gives each
partition's work before anything finishes, and ``restore_started`` carries an ETA (``estimate``). As partitions
finish, their tasks' times over their work give the machine's speed (from each stage's later waves once one
finished: a stage's first wave pays its start and ran 1.5-2x slower a task on every recording), the rates' scale
weighing as one partition (``blend``). The prior's rates are one machine's; its shape (which partitions and
operators hold more) is the checkpoint's, which is why it is kept for the remaining work and only its scale is
learned. Without a readable checkpoint each partition counts as one unit of work (``observed``), and there is no
ETA before the first partition finishes. What a task reports of its load
(changelog files replayed, load time) is summed where Spark reports it (RocksDB, Spark 4.1+; 3.5 and 4.0
report nothing, and an aggregation's first load, in ``StateStoreRestore``, is never measured: its
partition counts once it is saved).

Memory: at most ``MAX_RESTORES`` restores at once (the oldest is finished as incomplete), at most
``MAX_NOTES`` notes waiting to be taken, partitions per operator bounded by ``partitions_total``.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spark_state_observer.model import spark_events
from spark_state_observer.model.checkpoint_work import ExpectedWork
from spark_state_observer.model.signal_kinds import RESTORE_FINISHED, RESTORE_PROGRESS, RESTORE_STARTED
from spark_state_observer.placement.restore_eta import Stage, TaskTimes, eta, remaining_seconds, steady

REASON_RESTART = "restart"
REASON_EXECUTOR_LOST = "executor_lost"
MAX_RESTORES = 64  # (query, batch) restores followed at once
MAX_NOTES = 4096  # notes not yet taken by the pipeline; the oldest are dropped (counted)
MAX_PARTITIONS = 100_000
MAX_QUERIES = 1024  # queries whose latest run is remembered
MAX_EXECUTORS = 10_000
STEPS = 10  # a progress note per tenth of the partitions
SLOWEST = 16  # partitions listed by a finished restore
MAX_LOST = 16  # executors a restore names as lost
INTERVAL_SECONDS = 10.0
BASIS_ESTIMATE = "estimate"  # the checkpoint's work at the inspector's rates, nothing finished yet
BASIS_OBSERVED = "observed"  # finished partitions per second, no checkpoint
BASIS_BLEND = "blend"  # the checkpoint's work, its scale corrected by the speed observed

ExpectedWorkHook = Callable[[str, "str | None", int], "ExpectedWork | None"]
"""(query id, run id, restoring batch id) -> the work its checkpoint holds for that batch (None: unknown); called
once per restore on the worker thread, bounded by its implementation (``spark_state_observer.model.checkpoint_work``)."""


@dataclass(frozen=True)
class RestoreNote:
    """One restore event of one operator, before the pipeline names its query (``kind`` from ``signal_kinds``)."""

    kind: str
    query_id: str
    run_id: str | None
    timestamp: float
    attributes: dict[str, Any]


@dataclass
class _Operator:
    name: str  # as the progress events name it (``dedupe``), where one of the query was seen; else the plan node's
    node: str  # the plan node (``StreamingDeduplicate``)
    total: int | None
    done: dict[int, tuple[float | None, float]] = field(default_factory=dict)  # partition -> its task's (launch, finish)
    first_launch: float | None = None
    last_finish: float | None = None
    step: int = 0  # the tenth of the partitions last told
    told_at: float = 0.0
    changelog_files: int | None = None
    load_ms: float | None = None
    loads_from_dfs: int | None = None
    finished: bool = False
    ran_on: dict[int, str] = field(default_factory=dict)  # partition -> the executor of its successful task, where told
    retried: set[int] = field(default_factory=set)  # partitions whose task was lost with its executor and ran again


@dataclass(frozen=True)
class Eta:
    """An ETA and what it rests on (``BASIS_*``), so a reader can tell an estimate from a measurement."""

    seconds: float | None
    basis: str | None


@dataclass
class _Restore:
    query_id: str
    run_id: str | None
    batch_id: int
    reason: str
    started: float
    operators: dict[int, _Operator]
    expected: ExpectedWork | None = None
    lost: list[str] = field(default_factory=list)  # executors lost while it ran (at most MAX_LOST)


class RestoreProgress:
    """Follows restoring batches from their jobs' starts and their stateful tasks' ends; thread-confined."""

    def __init__(self, interval_seconds: float = INTERVAL_SECONDS, expected_work: ExpectedWorkHook | None = None) -> None:
        self.interval_seconds = interval_seconds
        self.expected_work = expected_work  # set by the composition root that knows where checkpoints are
        self.estimate_failures = 0  # hooks that raised: the restore goes on without an estimate
        self._cores: OrderedDict[str, int] = OrderedDict()  # executor id -> its cores, while it is there
        self.notes: deque[RestoreNote] = deque()
        self.dropped = 0
        self._started: OrderedDict[str, str | None] = OrderedDict()  # query id -> run started, its first batch not seen yet
        # (query, run, batch) -> judged restoring: a crashed run's last batch is run again by the next run
        self._seen_batch: OrderedDict[tuple[str, str | None, int], bool] = OrderedDict()
        self._restores: OrderedDict[tuple[str, int], _Restore] = OrderedDict()
        self._lost_at: float | None = None  # when an executor was last removed
        self._last_job: OrderedDict[str, float] = OrderedDict()  # query id -> its latest batch's job submission
        self._latest = 0.0  # the newest time the events told (a log's time in replay)
        self._names: OrderedDict[str, dict[int, str]] = OrderedDict()  # query id -> its progress' operator names
        # the application's Spark (its log's start, the watched application's identity, the live session): a writer
        # is named as its progress will name it, which differs between versions (``spark_events.writer_operator_name``)
        self.spark_version: str | None = None
        self._absorbed: OrderedDict[str, float | None] = OrderedDict()  # query id -> the loss its restoring batch took in

    # --- intake (TaskEventReader) ---------------------------------------------------------------------
    def on_job(
        self,
        query_id: str,
        run_id: str | None,
        batch_id: int,
        submitted: float | None,
        partitions: int | None,
        operators: dict[int, str],
    ) -> None:
        """A job of a streaming batch started; ``operators``: its plan's state writers (index -> node name)."""
        key = (query_id, batch_id)
        if submitted is not None:
            self._latest = max(self._latest, submitted)
        if (query_id, run_id, batch_id) in self._seen_batch:
            restore = self._restores.get(key)
            if restore is not None and submitted is not None:
                self._add_operators(restore, operators, partitions, submitted)
            return
        previous = self._last_job.pop(query_id, None)
        if submitted is not None:
            self._last_job[query_id] = submitted
            while len(self._last_job) > MAX_QUERIES:
                self._last_job.popitem(last=False)
        reason = None
        if self._started.pop(query_id, None) == run_id and batch_id > 0:
            reason = REASON_RESTART  # the run's first batch, with committed batches before it: state to load
        elif (
            self._lost_at is not None
            and previous is not None
            and submitted is not None
            and previous < self._lost_at <= submitted
            and self._absorbed.pop(query_id, None) != self._lost_at
        ):
            reason = REASON_EXECUTOR_LOST  # the query's first batch since an executor went away
        self._seen_batch[(query_id, run_id, batch_id)] = reason is not None
        while len(self._seen_batch) > MAX_RESTORES * 16:
            self._seen_batch.popitem(last=False)
        if reason is None or submitted is None:
            return
        # after an executor loss only the lost executor's stores load, which no listing tells: the checkpoint's work
        # is a restart's
        expected = self._expected(query_id, run_id, batch_id) if reason == REASON_RESTART else None
        restore = _Restore(query_id, run_id, batch_id, reason, submitted, {}, expected)
        self._restores[key] = restore
        while len(self._restores) > MAX_RESTORES:
            _, oldest = self._restores.popitem(last=False)
            self._finish_all(oldest, oldest.started)
        self._add_operators(restore, operators, partitions, submitted)

    def on_run_started(self, query_id: str, run_id: str | None) -> None:
        """A run of the query started (its ``QueryStartedEvent``): its first batch is judged at its first job; a
        restore of an earlier run still open (that run died in it) is finished, incomplete."""
        for key in [k for k in self._restores if k[0] == query_id]:
            old = self._restores.pop(key)
            self._finish_all(old, self._latest)
        self._started[query_id] = run_id
        self._started.move_to_end(query_id)
        while len(self._started) > MAX_QUERIES:
            self._started.popitem(last=False)

    def on_executor_cores(self, executor_id: str, cores: int | None) -> None:
        """An executor came with ``cores`` task slots, or went (None): the slots a restore's waves run on."""
        if cores is None or cores <= 0:
            self._cores.pop(executor_id, None)
            return
        self._cores[executor_id] = cores
        while len(self._cores) > MAX_EXECUTORS:
            self._cores.popitem(last=False)

    def on_executor_removed(self, at: float | None, executor: str | None = None) -> None:
        """An executor went away at ``at`` (s): each query's first batch submitted after it loads its partitions
        elsewhere, unless a restore running then took the loss in (``on_batch_closed``)."""
        self._lost_at = at if at is not None else self._latest
        for restore in self._restores.values():
            if executor is not None and restore.started <= self._lost_at:
                self._lose(restore, executor)

    def on_task_lost(self, query_id: str, batch_id: int, operator: int, partition: int, executor: str | None) -> None:
        """A task of a restoring stateful stage was lost with its executor (``ExecutorLostFailure`` while it ran,
        ``Resubmitted`` once done): ``partition`` loads again on another executor, done when that task ends."""
        restore = self._restores.get((query_id, batch_id))
        op = restore.operators.get(operator) if restore is not None else None
        if restore is None or op is None or op.finished:
            return
        op.done.pop(partition, None)
        op.ran_on.pop(partition, None)
        if len(op.retried) < MAX_PARTITIONS:
            op.retried.add(partition)
        if executor is not None:
            self._lose(restore, executor)

    def on_task(
        self,
        query_id: str,
        batch_id: int,
        operator: int,
        name: str,
        partition: int,
        launch: float | None,
        finish: float | None,
        fields: dict[str, float | None],
        executor: str | None = None,
    ) -> None:
        """A successful task of a stateful stage: ``partition`` of ``operator`` is loaded (times in seconds), on ``executor``."""
        restore = self._restores.get((query_id, batch_id))
        if restore is None or finish is None:
            return
        self._latest = max(self._latest, finish)
        op = restore.operators.get(operator)
        if op is None:  # an operator the plan did not show (its plan came late): followed from its first task
            self._add_operators(restore, {operator: name}, None, restore.started)
            op = restore.operators[operator]
        if op.finished or partition in op.done or len(op.done) >= MAX_PARTITIONS:
            return
        op.done[partition] = (launch, finish)
        if executor is not None:
            op.ran_on[partition] = executor
        if launch is not None:
            op.first_launch = launch if op.first_launch is None else min(op.first_launch, launch)
        op.last_finish = finish if op.last_finish is None else max(op.last_finish, finish)
        files, load, dfs = fields.get("changelog_files"), fields.get("load_ms"), fields.get("loads_from_dfs")
        if files is not None:
            op.changelog_files = (op.changelog_files or 0) + int(files)
        if load is not None:
            op.load_ms = (op.load_ms or 0.0) + load
        if dfs is not None:
            op.loads_from_dfs = (op.loads_from_dfs or 0) + int(dfs)
        if op.total is not None and len(op.done) >= op.total:
            self._finish(restore, operator, op, finish, complete=True)
            return
        step = STEPS * len(op.done) // op.total if op.total else 0
        if step > op.step or finish - op.told_at >= self.interval_seconds:
            op.step, op.told_at = max(step, op.step), finish
            self._note(RESTORE_PROGRESS, restore, finish, self._attributes(restore, operator, op, finish))

    def on_batch_closed(self, query_id: str, batch_id: int, operator_names: dict[int, str]) -> None:
        """The batch's progress event (its ``stateOperators`` names by index, which name the operators of later
        restores as the metrics do): what was not finished by its tasks is finished now, incomplete."""
        if operator_names:
            self._names[query_id] = dict(operator_names)
            self._names.move_to_end(query_id)
            while len(self._names) > MAX_QUERIES:
                self._names.popitem(last=False)
        restore = self._restores.pop((query_id, batch_id), None)
        if restore is not None:
            self._finish_all(restore, self._latest)

    def take(self) -> list[RestoreNote]:
        """The notes since the last call, in order."""
        out = list(self.notes)
        self.notes.clear()
        return out

    def active(self) -> list[tuple[str, int, int, str, int | None, int, float]]:
        """Restores running now: (query id, batch, operator, name, partitions total, done, started)."""
        return [
            (r.query_id, r.batch_id, i, op.name, op.total, len(op.done), r.started)
            for r in self._restores.values()
            for i, op in r.operators.items()
            if not op.finished
        ]

    # --- internals ------------------------------------------------------------------------------------
    def _lose(self, restore: _Restore, executor: str) -> None:
        if executor not in restore.lost and len(restore.lost) < MAX_LOST:
            restore.lost.append(executor)

    def _took_in(self, restore: _Restore) -> None:
        """A restore that lost executors is over: the next batch of its query restores for that loss only if a
        store the restore loaded stayed on a lost executor (its partition was not run again)."""
        stranded = any(e in restore.lost for op in restore.operators.values() for e in op.ran_on.values())
        if stranded:  # told by the poller too, which sees no executor removal: that batch's successor restores
            self._lost_at = max(self._lost_at or 0.0, self._latest)
            self._absorbed.pop(restore.query_id, None)
        else:
            self._absorbed[restore.query_id] = self._lost_at
            self._absorbed.move_to_end(restore.query_id)
            while len(self._absorbed) > MAX_QUERIES:
                self._absorbed.popitem(last=False)

    def _losses(self, restore: _Restore, op: _Operator) -> dict[str, Any]:
        """What an executor loss did to the restore, where one happened while it ran."""
        if not restore.lost:
            return {}
        return {"executors_lost": list(restore.lost), "partitions_retried": len(op.retried)}

    def _add_operators(self, restore: _Restore, operators: dict[int, str], partitions: int | None, ts: float) -> None:
        total = partitions if partitions is not None and 0 < partitions <= MAX_PARTITIONS else None
        for index, name in sorted(operators.items()):
            known = restore.operators.get(index)
            if known is not None:
                known.total = known.total or total  # the live poller learns it once a task of the stage reported
                continue
            # the query's own progress names it where one was seen, else the writer's known short name (the same whether
            # or not this observer saw an earlier run: a watcher meets a restarted job as a new application)
            progress_name = self._names.get(restore.query_id, {}).get(index)
            op = _Operator(progress_name or spark_events.writer_operator_name(name, self.spark_version), name, total, told_at=ts)
            restore.operators[index] = op
            work = restore.expected.operators.get(index) if restore.expected is not None else None  # state/<id>: ids as indexes
            attrs: dict[str, Any] = {
                "operator": op.name,
                "operator_index": index,
                "operator_node": name,
                "batch_id": restore.batch_id,
                "reason": restore.reason,
                "partitions_total": op.total,
            }
            if work is not None:
                attrs.update(expected_files=work.files, expected_bytes=work.replay_bytes + work.snapshot_bytes)
            estimate = self._eta(restore, index, op, ts)
            if estimate.seconds is not None:
                attrs.update(eta_seconds=estimate.seconds, eta_basis=estimate.basis)
            self._note(RESTORE_STARTED, restore, ts, attrs)

    def _finish_all(self, restore: _Restore, ts: float) -> None:
        for index, op in restore.operators.items():
            if not op.finished:
                self._finish(restore, index, op, max(op.last_finish or ts, restore.started), complete=False)

    def _finish(self, restore: _Restore, index: int, op: _Operator, ts: float, complete: bool) -> None:
        op.finished = True
        attrs = self._attributes(restore, index, op, ts)
        del attrs["eta_seconds"]
        attrs.pop("eta_basis", None)
        if op.loads_from_dfs is not None:  # Spark 4.2+: stores fetched from the checkpoint, not reused on the executor
            attrs["loads_from_dfs"] = op.loads_from_dfs
        attrs["duration_seconds"] = round(max(0.0, ts - restore.started), 3)
        attrs["complete"] = complete
        timed = sorted(((f - s, p, s, f) for p, (s, f) in op.done.items() if s is not None), reverse=True)[:SLOWEST]
        if timed:  # the partitions whose load held the restore up longest: its spans' children (OTLP), the browser's list
            attrs["slowest_partitions"] = [{"partition": p, "launch": s, "finish": f, "seconds": round(d, 3)} for d, p, s, f in timed]
        self._note(RESTORE_FINISHED, restore, ts, attrs)
        if all(o.finished for o in restore.operators.values()):
            self._restores.pop((restore.query_id, restore.batch_id), None)
            if restore.lost:
                self._took_in(restore)

    def _attributes(self, restore: _Restore, index: int, op: _Operator, now: float) -> dict[str, Any]:
        done = len(op.done)
        attrs: dict[str, Any] = {
            "operator": op.name,
            "operator_index": index,
            "operator_node": op.node,
            "batch_id": restore.batch_id,
            "reason": restore.reason,
            "partitions_total": op.total,
            "partitions_done": done,
            "elapsed_seconds": round(max(0.0, now - restore.started), 3),
        }
        estimate = self._eta(restore, index, op, now)
        attrs["eta_seconds"] = estimate.seconds
        if estimate.basis is not None:
            attrs["eta_basis"] = estimate.basis
        if op.changelog_files is not None:
            attrs["changelog_files"] = op.changelog_files
        if op.load_ms is not None:
            attrs["load_seconds"] = round(op.load_ms / 1000.0, 3)
        attrs.update(self._losses(restore, op))
        return attrs

    def _expected(self, query_id: str, run_id: str | None, batch_id: int) -> ExpectedWork | None:
        if self.expected_work is None:
            return None
        try:
            return self.expected_work(query_id, run_id, batch_id)
        except Exception:  # a hook that fails costs the estimate, never the restore's progress
            self.estimate_failures += 1
            return None

    def _slots(self, restore: _Restore) -> int | None:
        if self._cores:
            return sum(self._cores.values())
        return restore.expected.slots if restore.expected is not None else None

    def _eta(self, restore: _Restore, index: int, op: _Operator, now: float) -> Eta:
        """The operator's ETA: its stages' schedule played forward (``restore_eta``) at the speed learned so far,
        from the checkpoint's work where it is known, else from finished partitions alone."""
        slots = self._slots(restore)
        expected = restore.expected.operators if restore.expected is not None else {}
        if slots is None:  # no schedule to play: the rate of finished partitions
            since, later = steady(op.done)
            observed = eta(op.total, len(op.done), op.first_launch, now, None, (since, len(later)) if later else None)
            return Eta(observed, BASIS_OBSERVED if observed is not None else None)
        if index not in expected:
            if op.total is None or not op.done:
                return Eta(None, None)
            seconds = remaining_seconds([Stage(dict.fromkeys(range(op.total), 1.0), op.done)], slots, restore.started, now, None)
            return Eta(seconds, BASIS_OBSERVED if seconds is not None else None)
        # itself and the stores below it in the plan (higher ids), bottom first, whether or not their stage was seen yet
        stages: list[Stage] = []
        for i in sorted((i for i in expected if i >= index), reverse=True):
            known = restore.operators.get(i)
            done = known.done if known is not None else {}
            work = expected[i].seconds
            if stages and done and same_tasks(stages[-1].done, done):  # stores loaded by one task: one stage
                below = stages.pop()
                work = {p: below.work.get(p, 0.0) + work.get(p, 0.0) for p in below.work.keys() | work.keys()}
            stages.append(Stage(work, done))
        seconds = remaining_seconds(stages, slots, restore.started, now, 1.0)
        finished = any(s is not None for stage in stages for s, _ in stage.done.values())
        return Eta(seconds, BASIS_BLEND if finished else BASIS_ESTIMATE)

    def _note(self, kind: str, restore: _Restore, ts: float, attrs: dict[str, Any]) -> None:
        if len(self.notes) >= MAX_NOTES:
            self.notes.popleft()
            self.dropped += 1
        self.notes.append(RestoreNote(kind, restore.query_id, restore.run_id, ts, attrs))


def same_tasks(a: TaskTimes, b: TaskTimes) -> bool:
    """Two operators whose partitions ended in the same tasks (the same launch and finish): one stage loads both."""
    return any(b.get(p) == times for p, times in a.items())
