"""A restore while it runs, live: the restoring batch's stateful tasks read from the driver's REST API.

The event-log path (``observer.placement.task_log``) sees each task end as Spark writes it. A job with the
observer attached has no log to read, so while a run's first batch runs (after its ``QueryStartedEvent``
and until its progress event) the observer's worker asks the driver, at most every ``interval`` seconds:

1. ``/jobs?status=running``: the run's running job (its job group is the run id, its description names the
   batch), its submission time and its stages;
2. ``/sql/<id>?details=true`` (found once in ``/sql`` by its running job): the plan's state writers, top down
   (the progress event's ``stateOperators`` order). A running execution lists its nodes without metrics, so
   no metric names a writer's stage yet: the writers run in the job's last stages, the topmost in the last
   (each behind an exchange), which holds for aggregations, deduplication, joins and their chains; two writers
   in one stage (no exchange between them) are told as that stage and the one before it;
3. ``/stages/<id>`` (the latest attempt and its task count: the partitions) and its ``taskList`` of
   successful tasks, whose partition, launch time and duration feed ``observer.placement.restore_progress``
   as the event log's task ends do.

So a poll is two requests plus one or two per stateful stage, only during a first batch; a partition is known
within one poll interval of its task's end (plus the driver's own status-store delay). The status store
keeps no SQL metrics per task: the live restore has partitions, elapsed time and ETA, not changelog files
or load times (those come from event logs). Executor losses are not followed live.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from observer.placement.restore_progress import RestoreProgress
from observer.placement.task_poll import RestSource, _batch_key, _decode_tasks, _epoch

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
        self._seen: dict[tuple[int, int], set[int]] = {}  # (stage, attempt) -> partitions already fed
        self._known: OrderedDict[tuple[str, int], int] = OrderedDict()  # (query, batch) -> its running execution
        self._totals: dict[int, tuple[int, int | None]] = {}  # stage -> its latest attempt and its task count
        # query -> run, batch, job submission, writers, stages: where its first batch's partitions are read
        self._placed: dict[str, tuple[str | None, int, float | None, list[str], list[int]]] = {}

    def watch(self, query_id: str, run_id: str | None) -> None:
        """A run started: follow its first batch."""
        self._watched[query_id] = run_id
        self._watched.move_to_end(query_id)
        while len(self._watched) > MAX_WATCHED:
            self._watched.popitem(last=False)

    def done(self, query_id: str, batch_id: int) -> None:
        """A progress event of the query: its run's first batch is over, nothing more to follow."""
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
            for partition, launch, finish in self._successes(stage, attempt):
                self.progress.on_task(query_id, batch_id, index, name, partition, launch, finish, {})

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
        """The stage's latest attempt and its task count (its partitions); (0, None) before the stage is submitted."""
        known = self._totals.get(stage)
        if known is not None:
            return known
        got = self.source.get(f"/stages/{stage}?details=false")
        attempts = [a for a in got if isinstance(a, dict) and isinstance(a.get("attemptId"), int)] if isinstance(got, list) else []
        if not attempts or attempts[0].get("status") == "PENDING":
            return 0, None
        latest = max(attempts, key=lambda a: a["attemptId"])
        n = latest.get("numTasks")
        self._totals[stage] = (latest["attemptId"], n if isinstance(n, int) else None)
        return self._totals[stage]

    def _successes(self, stage: int, attempt: int) -> list[tuple[int, float, float]]:
        """The stage attempt's successful tasks not fed before: (partition, launch, finish) in seconds."""
        body = self.source.get_bytes(f"/stages/{stage}/{attempt}/taskList?length={MAX_TASKS}&status=SUCCESS")
        seen = self._seen.setdefault((stage, attempt), set())
        out = []
        for t in _decode_tasks(body) if body is not None else []:
            partition = t.get("partitionId", t.get("index"))
            launch, duration = _epoch(t.get("launchTime")), t.get("duration")
            if t.get("status") != "SUCCESS" or not isinstance(partition, int) or partition in seen:
                continue
            if launch is None or not isinstance(duration, (int, float)):
                continue
            seen.add(partition)
            out.append((partition, launch, launch + duration / 1000.0))
        return out


def _writers(nodes: Any) -> list[str]:
    """The plan's state writers in plan order (node id order: parents first), by their node names."""
    ordered = sorted((n for n in nodes if isinstance(n, dict)) if isinstance(nodes, list) else [], key=lambda n: n.get("nodeId", 0))
    return [str(n.get("nodeName")) for n in ordered if n.get("nodeName") in WRITER_NODES]
