"""A restore while it runs, live: the restoring batch's stateful tasks read from the driver's REST API.

The event-log path (``spark_state_observer.placement.task_log``) sees each task end as Spark writes it. A job with the
observer attached has no log to read, so while a run's first batch runs (after its ``QueryStartedEvent``
and until its progress event) the observer's worker asks the driver, at most every ``interval`` seconds:

1. ``/jobs?status=running``: the run's running job (its job group is the run id, its description names the
   batch), its submission time and its stages;
2. ``/sql/<id>?details=true`` (found once in ``/sql`` by its running job): the plan's state writers, top down
   (the progress event's ``stateOperators`` order). A running execution lists its nodes without metrics, so
   no metric names a writer's stage yet: the writers run in the job's last stages, the topmost in the last
   (each behind an exchange), which holds for aggregations, deduplication, joins and their chains; two writers
   in one stage (no exchange between them) are told as that stage and the one before it;
3. ``/stages/<id>`` (the latest attempt and its task count: the partitions) and its ``taskList`` in task id
   order from the first task not yet seen ended (``offset``): the tasks that ended since the last poll, the
   running ones and the ones launched since, not every success of the stage again (at 200 partitions 16-26 KiB
   a poll against 253-279 KiB, and about half the driver's CPU: docs/benchmarks.md, "Restore poll cost at
   200 partitions"). Each success's partition, launch time and duration feed
   ``spark_state_observer.placement.restore_progress`` as the event log's task ends do.

Executor losses, as the event log shows them but from the tasks alone (the status store has no executor
removal for this path): a task that failed with ``ExecutorLostFailure`` loads its partition again; a
partition fed as done whose index runs again in a later attempt (Spark resubmits a shuffle map stage's
finished tasks whose output died with their executor; their status stays SUCCESS) is not done until that
attempt ends. Both tell ``RestoreProgress.on_task_lost``.

Once a running job's execution was found, its writers' stages stay known while it runs: the next polls skip
``/sql`` and read ``/jobs?status=running`` and the task lists alone (``/sql/<id>?details=true`` cost more of
the driver's CPU than the task lists at 200 partitions).

So a poll is one request plus one per stateful stage (and the stage itself once), only during a first batch;
a partition is known within one poll interval of its task's end (plus the driver's own status-store delay). The status store
keeps no SQL metrics per task: the live restore has partitions, elapsed time and ETA, not changelog files
or load times (those come from event logs). A stage that Spark submits again after it ended (a later
stage's fetch failure) is not read again.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from spark_state_observer.placement.restore_progress import RestoreProgress
from spark_state_observer.placement.task_poll import RestSource, _batch_key, _decode_tasks, _epoch

# the physical nodes that write state (``StateStoreWriter``, Spark 3.5-4.3); readers such as StateStoreRestore are left out
WRITER_NODES = frozenset(
    {
        "StateStoreSave",
        "SessionWindowStateStoreSave",
        "StreamingDeduplicate",
        "StreamingDeduplicateWithinWatermark",
        "StreamingSymmetricHashJoin",
        "FlatMapGroupsWithState",
        "FlatMapGroupsInPandasWithState",
        "TransformWithState",
        "TransformWithStateInPandas",
        "TransformWithStateInPySpark",
        "StreamingGlobalLimit",
    }
)
INTERVAL_SECONDS = 1.0
MAX_WATCHED = 64  # runs whose first batch is awaited at once
MAX_EXECUTIONS = 100  # executions read per poll
MAX_TASKS = 100_000
LOST = "ExecutorLostFailure"  # how the status store's error message of a task lost with its executor begins
FETCH_FAILED = "FetchFailed"  # a task's parent output was lost: Spark submits its stage again, in a new attempt


class _StageTasks:
    """What the poller read of one stage's task lists (all its attempts): how far each is settled, the partitions fed."""

    __slots__ = ("done", "lost", "offsets", "running")

    def __init__(self) -> None:
        self.offsets: dict[int, int] = {}  # stage attempt -> its tasks in task id order that ended and were read
        self.running: dict[int, bool] = {}  # stage attempt -> the last read saw a task not ended yet
        # partition fed as done -> its task's (stage attempt, task attempt), executor, finish
        self.done: dict[int, tuple[tuple[int, int], str | None, float]] = {}
        self.lost: set[tuple[int, int, int]] = set()  # (partition, stage attempt, task attempt) of the tasks told lost


class RestorePoller:
    """Feeds ``progress`` from the driver while a run's first batch runs; thread-confined to the worker."""

    def __init__(self, source: RestSource, progress: RestoreProgress, interval: float = INTERVAL_SECONDS) -> None:
        self.source = source
        self.progress = progress
        self.interval = interval
        self.errors = 0
        self.seconds: list[float] = []  # wall time of each poll (the latest 1000)
        self._watched: OrderedDict[str, str | None] = OrderedDict()  # query id -> run id whose first batch is awaited
        self._first_execution = 0
        self._last_poll = 0.0
        self._seen: dict[int, _StageTasks] = {}  # stage -> what was read of its tasks
        self._known: OrderedDict[tuple[str, int], int] = OrderedDict()  # (query, batch) -> its running execution
        self._totals: dict[int, tuple[int, int | None]] = {}  # stage -> its latest attempt and its task count
        # query -> run, batch, job submission, writers, stages: where its first batch's partitions are read
        self._placed: dict[str, tuple[str | None, int, float | None, list[str], list[int]]] = {}
        self._placed_job: dict[str, Any] = {}  # query -> the running job those were read from

    def watch(self, query_id: str, run_id: str | None) -> None:
        """A run started: follow its first batch."""
        self._watched[query_id] = run_id
        self._watched.move_to_end(query_id)
        while len(self._watched) > MAX_WATCHED:
            self._watched.popitem(last=False)

    def done(self, query_id: str, batch_id: int) -> None:
        """A progress event of the query: its run's first batch is over, nothing more to follow."""
        self._placed_job.pop(query_id, None)
        if self._watched.pop(query_id, None) is not None and query_id in self._placed:
            try:  # the last partitions, before the batch is closed: the job is no longer running, its stages are known
                self._read_stages(query_id, *self._placed.pop(query_id))
            except Exception:  # as in _poll
                self.errors += 1
                self.source.close()
        if not self._watched:
            self._seen.clear()
            self._known.clear()
            self._totals.clear()
            self._placed.clear()
            self._placed_job.clear()

    def tick(self) -> None:
        """Poll when a first batch is awaited and the interval has passed; never raises (errors are counted)."""
        if self._watched and time.monotonic() - self._last_poll >= self.interval:
            self._poll()

    def _poll(self) -> None:
        started = time.perf_counter()
        self._last_poll = time.monotonic()
        try:
            jobs = self.source.get("/jobs?status=running") or []
            running = {}
            for job in jobs if isinstance(jobs, list) else []:
                key = _batch_key(job.get("description")) if isinstance(job, dict) else None
                if key is not None and key[0] in self._watched and job.get("jobGroup") == self._watched[key[0]]:
                    stages = sorted((s for s in job.get("stageIds") or [] if isinstance(s, int)), reverse=True)
                    running[job.get("jobId")] = (key, _epoch(job.get("submissionTime")), stages)
            for job, ((query_id, _), _, _) in list(running.items()):
                if self._placed_job.get(query_id) == job and query_id in self._placed:
                    del running[job]  # its writers' stages are known while it runs: no need to find its execution again
                    self._read_stages(query_id, *self._placed[query_id])
            if running:
                self._executions(running)
        except Exception:  # a busy or gone driver, an odd answer: counted; the next tick tries again
            self.errors += 1
            self.source.close()
        self.seconds.append(time.perf_counter() - started)
        del self.seconds[:-1000]

    def _executions(self, running: dict[Any, tuple[tuple[str, int], float | None, list[int]]]) -> None:
        found = [self.source.get(f"/sql/{e}?details=true&planDescription=false") for e in self._known.values()]
        if not any(isinstance(ex, dict) and set(ex.get("runningJobIds") or ()) & set(running) for ex in found):
            found = self._listing()
        for ex in found:
            jobs = [j for j in ex.get("runningJobIds") or [] if j in running] if isinstance(ex, dict) else []
            if not jobs:
                continue
            self._known[running[jobs[0]][0]] = ex.get("id")
            while len(self._known) > MAX_WATCHED:
                self._known.popitem(last=False)
            (query_id, batch_id), submitted, stages = running[jobs[0]]
            writers = _writers(ex.get("nodes"))
            run_id = self._watched.get(query_id)
            self.progress.on_job(query_id, run_id, batch_id, submitted, None, dict(enumerate(writers)))
            self._placed[query_id] = (run_id, batch_id, submitted, writers, stages)
            self._placed_job[query_id] = jobs[0]
            self._read_stages(query_id, run_id, batch_id, submitted, writers, stages)

    def _read_stages(
        self, query_id: str, run_id: str | None, batch_id: int, submitted: float | None, writers: list[str], stages: list[int]
    ) -> None:
        """Each writer's stage size and finished tasks into the model.

        A running execution lists its plan's nodes without metrics, so no node names its stage yet: the state
        writers, top down, run in the job's last stages, the topmost in the last (an exchange precedes each)."""
        for index, (name, stage) in enumerate(zip(writers, stages)):
            attempt, total = self._stage(stage)
            if total is not None:
                self.progress.on_job(query_id, run_id, batch_id, submitted, total, {index: name})
            # an attempt Spark gave up on (a fetch failure) may still finish tasks, which the next attempt then skips
            read = self._seen.get(stage)
            earlier = [a for a, running in read.running.items() if a < attempt and running] if read is not None else []
            for tried in [*earlier, attempt]:
                for partition, launch, finish, executor in self._tasks(stage, tried, query_id, batch_id, index):
                    self.progress.on_task(query_id, batch_id, index, name, partition, launch, finish, {}, executor)

    def _listing(self) -> list[Any]:
        """The executions from the first one that may still run; the ones finished before it are not read again."""
        listing = self.source.get(f"/sql?details=true&planDescription=false&offset={self._first_execution}&length={MAX_EXECUTIONS}")
        listing = listing if isinstance(listing, list) else []
        for ex in listing:
            if not isinstance(ex, dict) or ex.get("status") == "RUNNING" or not isinstance(ex.get("id"), int):
                break
            self._first_execution = ex["id"] + 1
        return listing

    def _stage(self, stage: int) -> tuple[int, int | None]:
        """The stage's latest attempt and its task count (its partitions); no count before that attempt is submitted.

        An attempt's count is the partitions it runs: a later attempt runs only those left, so the first one's is kept."""
        known = self._totals.get(stage)
        if known is not None:
            return known
        got = self.source.get(f"/stages/{stage}?details=false")
        attempts = [a for a in got if isinstance(a, dict) and isinstance(a.get("attemptId"), int)] if isinstance(got, list) else []
        if not attempts:
            return 0, None
        latest = max(attempts, key=lambda a: a["attemptId"])
        if latest.get("status") == "PENDING":  # not submitted yet (its parents run first): read again at the next poll
            return latest["attemptId"], None
        n = latest.get("numTasks")
        self._totals[stage] = (latest["attemptId"], n if isinstance(n, int) else None)
        return self._totals[stage]

    def _tasks(self, stage: int, attempt: int, query_id: str, batch_id: int, operator: int) -> list[tuple[int, float, float, str | None]]:
        """The stage attempt's successful tasks not fed before: (partition, launch, finish in seconds, executor).
        Tasks lost with their executor are told to the model on the way (``on_task_lost``): one that failed so
        while it ran, and a partition fed as done that runs again later, in this attempt or the next one (Spark
        runs a finished partition again only when its output is gone)."""
        seen = self._seen.setdefault(stage, _StageTasks())
        offset = seen.offsets.get(attempt, 0)
        body = self.source.get_bytes(f"/stages/{stage}/{attempt}/taskList?offset={offset}&length={MAX_TASKS}&sortBy=ID")
        out = []
        settled = True  # every task so far has ended: the offset moves past it
        running = False
        for t in _decode_tasks(body) if body is not None else []:
            partition = t["partitionId"] if isinstance(t.get("partitionId"), int) else t.get("index")
            status, tried = t.get("status"), t.get("attempt")
            executor = t.get("executorId") if isinstance(t.get("executorId"), str) else None
            settled = settled and status in ("SUCCESS", "FAILED", "KILLED")
            running = running or status == "RUNNING"
            offset += settled
            if status == "FAILED" and str(t.get("errorMessage") or "").startswith(FETCH_FAILED):
                self._totals.pop(stage, None)  # read the stage again: its next attempt runs the partitions left
            if not isinstance(partition, int) or not isinstance(tried, int) or t.get("speculative") is True:
                continue
            before = seen.done.get(partition)
            launch, duration = _epoch(t.get("launchTime")), t.get("duration")
            if before is None:  # a task lost while it ran
                lost = status == "FAILED" and str(t.get("errorMessage") or "").startswith(LOST)
            else:  # a finished partition run again, launched after it ended: its output was lost with its executor
                lost = before[0] < (attempt, tried) and status != "KILLED" and launch is not None and launch >= before[2]
            if lost and (partition, attempt, tried) not in seen.lost and len(seen.lost) < MAX_TASKS:
                seen.lost.add((partition, attempt, tried))
                seen.done.pop(partition, None)
                self.progress.on_task_lost(query_id, batch_id, operator, partition, before[1] if before is not None else executor)
            if status != "SUCCESS" or partition in seen.done or launch is None or not isinstance(duration, (int, float)):
                continue
            seen.done[partition] = ((attempt, tried), executor, launch + duration / 1000.0)
            out.append((partition, launch, launch + duration / 1000.0, executor))
        seen.offsets[attempt], seen.running[attempt] = offset, running
        return out


def _writers(nodes: Any) -> list[str]:
    """The plan's state writers in plan order (node id order: parents first), by their node names."""
    ordered = sorted((n for n in nodes if isinstance(n, dict)) if isinstance(nodes, list) else [], key=lambda n: n.get("nodeId", 0))
    return [str(n.get("nodeName")) for n in ordered if n.get("nodeName") in WRITER_NODES]
