"""Live placement in classic PySpark: read each batch's stateful tasks from the driver's status store.

The observer must never work on Spark's listener threads, and a Python ``SparkListener`` would run there
(and cross py4j for every field of every task). Instead, once per progress event, the observer's worker
thread asks the driver's REST API (served from the same status store as the UI; ``spark.ui.enabled`` must
be on) over one kept-alive loopback connection:

1. ``/sql/<id>?details=true`` for the SQL executions since the last one seen, until the batch's own: its
   description names the query and the batch, its stateful nodes (in plan order, the progress event's
   ``stateOperators`` order) carry metric strings that name their stage (``(stage 16.0: task 40)``);
2. ``/stages/<id>/<attempt>/taskList`` for each stateful stage: executor, host, partition, attempt, status.

That is four requests for a batch with two stateful stages. The status store drops SQL metrics from tasks
(``LiveEntityHelpers.newAccumulatorInfos`` keeps neither internal nor SQL accumulables), so live runs carry
placement and attempts, not per-partition load times or sizes: those come from event logs
(``spark_state_observer.placement.tasks``). ``/allexecutors`` is read only when a migration needs its cause.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from spark_state_observer.model.bounded import Decoder, loads
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.placement.restore_progress import RestoreProgress
from spark_state_observer.placement.tasks import BatchTasks, ExecutorChange, PartitionRun

if TYPE_CHECKING:
    from spark_state_observer.placement.restore_poll import RestorePoller


Scalar = int | float | str | bool | None


class _Task(msgspec.Struct, rename="camel"):
    """The fields of the REST API's TaskData that placement uses; the rest (task metrics) is skipped unparsed.

    Decoding only these is several times faster than ``json.loads`` of whole task lists. Each field is any JSON
    scalar, as the readers judge it, never a list or an object (which a bomb would fill); ``taskId``, which every
    TaskData has, is required, so an element without it fails the decode rather than becoming a struct."""

    task_id: int
    index: Scalar = None
    attempt: Scalar = None
    partition_id: Scalar = None
    launch_time: Scalar = None
    duration: Scalar = None
    executor_id: Scalar = None
    host: Scalar = None
    status: Scalar = None
    speculative: Scalar = None
    error_message: Scalar = None


MAX_TASK_STRUCTS = 100_000  # tasks of one taskList answer (the most either poller asks for)
# bounded by its tasks, not its items: a real task has ~120 items (~1.9 KB, its metrics skipped unbuilt), so an
# item bound would refuse a stage of 8,000 tasks; each struct needs its ``taskId`` and holds scalars only
_TASKS = Decoder(list[_Task], MAX_TASK_STRUCTS, marker=b'"taskId"')
_TASK_FIELDS = {f: "".join(w.capitalize() if i else w for i, w in enumerate(f.split("_"))) for f in _Task.__struct_fields__}


def _decode_tasks(body: bytes) -> list[dict[str, Any]]:
    """A taskList answer as dicts with Spark's (camelCase) keys."""
    try:
        return [{camel: getattr(t, f) for f, camel in _TASK_FIELDS.items()} for t in _TASKS.decode(body)]
    except (msgspec.DecodeError, msgspec.ValidationError):
        return []


_STAGE_REF = re.compile(r"\(stage (\d+)\.(\d+): task \d+\)")
_BATCH = re.compile(r"\bbatch = (\d+)")
_QUERY = re.compile(r"\bid = ([0-9a-fA-F-]{36})")
_RUN = re.compile(r"\brunId = ([0-9a-fA-F-]{36})")
_WRITER_MARKERS = frozenset({"number of total state rows", "number of state store instances", "memory used by state"})
MAX_EXECUTIONS_PER_POLL = 64  # executions read in one poll at most (other queries' batches interleave)
MAX_PENDING = 8  # batches whose execution the status store did not show yet, retried at the next poll
MAX_KNOWN = 256  # executions of other batches remembered for their own poll


MAX_ANSWER_BYTES = 64 << 20  # one REST answer: a taskList of 20,000 tasks with their metrics is ~40 MB
ANSWER_SECONDS = 10.0  # one REST answer, headers to last byte: the socket timeout bounds each wait, not a drip
_READ = 64 << 10


class AnswerRefused(OSError):
    """A REST answer larger than the cap, or not whole within the deadline: the rest of it is not read."""


def read_answer(resp: http.client.HTTPResponse, path: str, limit: int, deadline: float) -> bytes:
    """The body of ``resp``, refused (``AnswerRefused``) past ``limit`` bytes or past ``deadline`` (monotonic).

    ``read1`` returns what one receive (or one chunk) brings, so a drip is checked between its bytes, where
    ``read()`` would wait for the whole answer however slowly it came and hold however much it grew to."""
    declared = resp.getheader("Content-Length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise AnswerRefused(f"GET {path}: answer of {int(declared):,} bytes (more than {limit:,}) refused")
    parts: list[bytes] = []
    size = 0
    while True:
        if resp.length == 0:  # a body of known length read whole: ``read`` ends the response, so the connection serves the next
            resp.read()
            return b"".join(parts)
        if time.monotonic() > deadline:
            raise AnswerRefused(f"GET {path}: no whole answer within the deadline")
        part = resp.read1(_READ)
        if not part:
            if resp.length:  # ``read1`` ends a body cut short quietly, where ``read`` raised
                raise AnswerRefused(f"GET {path}: answer cut short ({resp.length:,} bytes missing)")
            return b"".join(parts)
        size += len(part)
        if size > limit:
            raise AnswerRefused(f"GET {path}: answer larger than {limit:,} bytes refused")
        parts.append(part)


def _cut(conn: http.client.HTTPConnection) -> None:
    """Wake a read blocked on ``conn`` (a watchdog's action at the deadline): the connection is closed after."""
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class RestSource:
    """GETs against the driver's REST API over one persistent HTTP/1.1 connection.

    Every answer is bounded: at most ``max_bytes`` (an endless chunked answer grew the user's driver by
    2.7 GB in 2 s) and whole within ``deadline`` seconds from the request (a drip of one byte per second,
    each within the socket timeout, held the worker for minutes). A watchdog cuts the socket at the deadline,
    so a drip in the status line or the headers ends too."""

    def __init__(
        self,
        ui_url: str,
        app_id: str,
        timeout: float = 2.0,
        max_bytes: int = MAX_ANSWER_BYTES,
        deadline: float = ANSWER_SECONDS,
    ) -> None:
        parsed = urllib.parse.urlsplit(ui_url)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 4040
        self.base = f"/api/v1/applications/{urllib.parse.quote(app_id)}"
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.deadline = deadline
        self.requests = 0
        self._conn: http.client.HTTPConnection | None = None

    def get(self, path: str) -> Any:
        """The decoded JSON of ``path`` under the application, or None for a 404 (not there, or not yet)."""
        body = self.get_bytes(path)
        return None if body is None else loads(body)

    def get_bytes(self, path: str) -> bytes | None:
        """The raw answer to ``path``, or None for a 404; ``OSError`` (``AnswerRefused`` for one too large or too slow)."""
        for retry in (False, True):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            conn = self._conn
            deadline = time.monotonic() + self.deadline
            watchdog = threading.Timer(self.deadline, _cut, (conn,))
            watchdog.daemon = True
            watchdog.start()
            try:
                self.requests += 1
                conn.request("GET", self.base + path)
                resp = conn.getresponse()
                body = read_answer(resp, path, self.max_bytes, deadline)
            except (ConnectionError, http.client.RemoteDisconnected, http.client.IncompleteRead) as exc:
                self.close()
                if retry or time.monotonic() > deadline:  # cut by the watchdog: no second wait
                    raise AnswerRefused(f"GET {path}: no whole answer ({exc!r})") from exc
                continue  # a kept-alive connection the server closed: once more on a new one
            except (OSError, http.client.HTTPException):
                self.close()  # a timeout: the driver is busy; no retry, the worker thread must not wait longer
                raise
            finally:
                watchdog.cancel()
            if resp.status == 404:
                return None
            if resp.status != 200:
                raise OSError(f"GET {path}: HTTP {resp.status}")
            return body
        return None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def warm_up(self, timeout: float = 120.0) -> threading.Thread:
        """Start the driver's REST API now, from a thread of its own: its first request initializes Jersey, which
        took 10 s on a loaded 2-core machine, past the worker's timeout; a restart's first batch (a restore the
        observer follows live) comes right after ``attach()``. The answer is dropped; errors are ignored."""

        def get() -> None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            try:
                conn.request("GET", self.base + "/jobs?status=running")
                read_answer(conn.getresponse(), "/jobs", self.max_bytes, time.monotonic() + timeout)
            except (OSError, http.client.HTTPException):
                pass  # the worker's own requests count their errors
            finally:
                conn.close()

        thread = threading.Thread(target=get, name="spark-state-observer-rest-warm-up", daemon=True)
        thread.start()
        return thread


class TaskPoller:
    """Turns 'batch B of query Q has completed' into that batch's ``BatchTasks``, from the status store."""

    def __init__(self, source: RestSource, max_tasks: int = 100_000, start_execution: int | None = None) -> None:
        """``start_execution``: the first SQL execution id to read; None lists the executions once to find it."""
        self.source = source
        self.max_tasks = max_tasks
        self._next_execution: int | None = start_execution
        self._known: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()  # (query, batch) -> execution summary
        self.pending: OrderedDict[tuple[str, int], tuple[str | None, str | None, dict[int, str]]] = OrderedDict()
        self.errors = 0
        self.seconds: list[float] = []  # wall time of each poll (bounded: the latest 1000)

    @property
    def next_execution(self) -> int | None:
        """The SQL execution id the next poll starts reading at."""
        return self._next_execution

    def poll(
        self,
        query_id: str,
        batch_id: int,
        run_id: str | None = None,
        query_name: str | None = None,
        operator_names: dict[int, str] | None = None,
    ) -> list[BatchTasks]:
        """The tasks of this batch (and of earlier batches still pending); never raises (errors are counted)."""
        started = time.perf_counter()
        self.pending[(query_id, batch_id)] = (run_id, query_name, dict(operator_names or {}))
        while len(self.pending) > MAX_PENDING:
            self.pending.popitem(last=False)
        out = []
        try:
            self._scan()
            for key in list(self.pending):
                summary = self._known.pop(key, None)
                if summary is None:
                    continue
                run, name, ops = self.pending.pop(key)
                out.append(self._batch(key, summary, run, name, ops))
        except Exception:  # a busy or gone driver, an odd answer: counted; pending batches are tried again next poll
            self.errors += 1
            self.source.close()
        self.seconds.append(time.perf_counter() - started)
        del self.seconds[:-1000]
        return out

    def executors(self) -> list[ExecutorChange]:
        """Every executor's registration and removal, from ``/allexecutors`` (driver left out); [] when unreadable."""
        try:
            listing = self.source.get("/allexecutors") or []
        except Exception:  # without the list, causes read "unknown": never an error in the worker
            self.errors += 1
            self.source.close()
            return []
        out = []
        for ex in listing if isinstance(listing, list) else []:
            if not isinstance(ex, dict):
                continue
            eid = ex.get("id")
            if not isinstance(eid, str) or eid == "driver":
                continue
            host = str(ex.get("hostPort", "")).rsplit(":", 1)[0] or None
            out.append(ExecutorChange(eid, True, _epoch(ex.get("addTime")), host))
            if not ex.get("isActive", True):
                out.append(ExecutorChange(eid, False, _epoch(ex.get("removeTime")), host, ex.get("removeReason")))
        return out

    # --- executions ---------------------------------------------------------------------------------
    def _scan(self) -> None:
        """Read the executions since the last one seen, stopping at the newest pending batch's own."""
        if self._next_execution is None:
            listing = self.source.get("/sql?details=false&planDescription=false&length=100000") or []
            ids = [e["id"] for e in listing if isinstance(e, dict) and isinstance(e.get("id"), int)]
            wanted = [e["id"] for e in listing if isinstance(e, dict) and _batch_key(e.get("description")) in self.pending]
            self._next_execution = min(wanted) if wanted else (max(ids) + 1 if ids else 0)
        for _ in range(MAX_EXECUTIONS_PER_POLL):
            if not self.pending or all(k in self._known for k in self.pending):
                return
            ex = self.source.get(f"/sql/{self._next_execution}?details=true&planDescription=false")
            if ex is None:
                return  # not there yet
            key = _batch_key(ex.get("description"))
            stages = _stateful_stages(ex.get("nodes"))
            if key is not None and stages:
                if ex.get("status") == "RUNNING":
                    return  # the status store lags the progress event a little: again at the next poll
                self._known[key] = {"stages": stages, "run_id": _run_id(ex.get("description"))}
                while len(self._known) > MAX_KNOWN:
                    self._known.popitem(last=False)
            self._next_execution += 1

    def _batch(
        self, key: tuple[str, int], summary: dict[str, Any], run_id: str | None, name: str | None, ops: dict[int, str]
    ) -> BatchTasks:
        runs: list[PartitionRun] = []
        for op_index, (node_name, stage_refs) in enumerate(summary["stages"]):
            tasks: list[tuple[int, dict[str, Any]]] = []
            for stage_id in sorted({s for s, _ in stage_refs}):
                attempts = sorted({a for s, a in stage_refs if s == stage_id})
                first = self._tasks(stage_id, 0)
                tasks.extend((0, t) for t in first)
                if max(attempts) > 0 or any(t.get("status") != "SUCCESS" for t in first):
                    for attempt in self._attempts(stage_id):
                        if attempt > 0:
                            tasks.extend((attempt, t) for t in self._tasks(stage_id, attempt))
                runs.extend(_runs(key, run_id or summary["run_id"], op_index, node_name, stage_id, tasks))
        return BatchTasks(key[0], run_id or summary["run_id"], key[1], runs, "progress", name, ops)

    def _tasks(self, stage_id: int, attempt: int) -> list[dict[str, Any]]:
        body = self.source.get_bytes(f"/stages/{stage_id}/{attempt}/taskList?length={self.max_tasks}")
        return [] if body is None else _decode_tasks(body)

    def _attempts(self, stage_id: int) -> list[int]:
        got = self.source.get(f"/stages/{stage_id}?details=false") or []
        return [s["attemptId"] for s in got if isinstance(s, dict) and isinstance(s.get("attemptId"), int) and s.get("status") != "SKIPPED"]


def _runs(
    key: tuple[str, int], run_id: str | None, op_index: int, node_name: str, stage_id: int, tasks: Iterable[tuple[int, dict[str, Any]]]
) -> list[PartitionRun]:
    """The final successful attempt per partition, with the failed ones before it counted (as in the event-log path)."""
    best: dict[int, tuple[int, dict[str, Any], float | None, float | None]] = {}
    failed: dict[int, list[dict[str, Any]]] = {}
    for stage_attempt, t in tasks:
        partition = t.get("partitionId", t.get("index"))
        if not isinstance(partition, int):
            continue
        if t.get("status") == "SUCCESS":
            launch = _epoch(t.get("launchTime"))
            finish = launch + t["duration"] / 1000.0 if launch is not None and isinstance(t.get("duration"), (int, float)) else None
            if partition not in best or (finish or 0) >= (best[partition][3] or 0):
                best[partition] = (stage_attempt, t, launch, finish)
        elif t.get("status") in ("FAILED", "KILLED"):
            failed.setdefault(partition, []).append(t)
    out = []
    for partition, (stage_attempt, t, launch, finish) in sorted(best.items()):
        fails = failed.get(partition, [])
        out.append(
            PartitionRun(
                query_id=key[0],
                run_id=run_id,
                batch_id=key[1],
                operator=op_index,
                operator_name=node_name,
                partition=partition,
                executor_id=str(t.get("executorId")),
                host=t.get("host") if isinstance(t.get("host"), str) else None,
                attempt=t.get("attempt", 0) if isinstance(t.get("attempt"), int) else 0,
                speculative=t.get("speculative") is True,
                stage_id=stage_id,
                stage_attempt=stage_attempt,
                launch_time=launch,
                finish_time=finish,
                duration_seconds=t["duration"] / 1000.0 if isinstance(t.get("duration"), (int, float)) else None,
                failed_attempts=len(fails),
                failed_on=tuple(str(f.get("executorId")) for f in fails[:16]),
                lost_executor=any(str(f.get("errorMessage", "")).startswith("ExecutorLostFailure") for f in fails),
            )
        )
    return out


def _stateful_stages(nodes: Any) -> list[tuple[str, list[tuple[int, int]]]]:
    """The plan's stateful nodes in plan order (node id order: parents first), each with the stages named by its metrics."""
    out = []
    for node in sorted((n for n in nodes if isinstance(n, dict)) if isinstance(nodes, list) else [], key=lambda n: n.get("nodeId", 0)):
        metrics = [m for m in node.get("metrics", []) if isinstance(m, dict)] if isinstance(node.get("metrics"), list) else []
        if not any(m.get("name") in _WRITER_MARKERS for m in metrics):
            continue
        refs = sorted({(int(s), int(a)) for m in metrics for s, a in _STAGE_REF.findall(str(m.get("value", "")))})
        out.append((str(node.get("nodeName", "?")), refs))
    return out if any(refs for _, refs in out) else []


def _batch_key(description: Any) -> tuple[str, int] | None:
    if not isinstance(description, str):
        return None
    q, b = _QUERY.search(description), _BATCH.search(description)
    return (q.group(1), int(b.group(1))) if q and b else None


def _run_id(description: Any) -> str | None:
    m = _RUN.search(description) if isinstance(description, str) else None
    return m.group(1) if m else None


def _epoch(stamp: Any) -> float | None:
    """The REST API's dates (``2026-11-22T07:55:41.123GMT``) in seconds since the epoch (fromisoformat: strptime is 20x slower)."""
    if not isinstance(stamp, str) or not stamp.endswith("GMT"):
        return None
    try:
        return datetime.fromisoformat(stamp[:-3]).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


# progress custom metrics that say a store came from the checkpoint in this batch: worth a poll at once
_MOVE_HINTS = ("rocksdbNumLoadedFromDfs", "rocksdbNumReplayChangelogFiles")


class PollingSource:
    """The live ``spark_state_observer.placement.feed.PlacementSource``: polls completed batches' tasks on the observer's worker thread.

    ``every``: poll every batch (1, the default), or only every N-th batch of a query plus any batch whose
    progress shows a store loaded from the checkpoint. That divides the driver's cost by about N; a
    migration then compares a partition's executor with the last *polled* batch, and a move that a
    later one undoes between two polls goes unseen.
    """

    name = "rest"

    def __init__(self, poller: TaskPoller, every: int = 1) -> None:
        self.poller = poller
        self.every = max(1, every)
        self.skipped = 0
        self._runs: OrderedDict[str, str | None] = OrderedDict()  # query id -> run id of its latest batch seen
        self.restores: RestorePoller | None = None  # a restore while it runs (follow_restores)

    def take(self, progress: QueryProgress) -> list[BatchTasks | ExecutorChange]:
        """The batches the status store has completed by this progress event (this one, and pending earlier ones)."""
        if self.restores is not None:
            self.restores.done(progress.query_id, progress.batch_id)
            self.restores.progress.on_batch_closed(progress.query_id, progress.batch_id, {op.index: op.name for op in progress.operators})
        if not progress.operators:
            return []  # a stateless query
        hinted = any((op.custom.get(k) or 0) > 0 for op in progress.operators for k in _MOVE_HINTS)
        # a run's first batch restores the state: its tasks measure what Spark does not (spark_state_observer.placement.restores)
        new_run = self._runs.get(progress.query_id, "") != progress.run_id
        self._runs[progress.query_id] = progress.run_id
        self._runs.move_to_end(progress.query_id)
        while len(self._runs) > MAX_KNOWN:
            self._runs.popitem(last=False)
        if self.every > 1 and progress.batch_id % self.every and not hinted and not new_run:
            self.skipped += 1
            return []
        names = {op.index: op.name for op in progress.operators}
        return list(self.poller.poll(progress.query_id, progress.batch_id, progress.run_id, progress.name, names))

    def executors(self) -> list[ExecutorChange]:
        """The driver's executor list, read only when a migration needs its cause."""
        return self.poller.executors()

    def follow_restores(self, progress: RestoreProgress) -> None:
        """Poll a run's first batch while it runs (``spark_state_observer.placement.restore_poll``), on the same connection."""
        from spark_state_observer.placement.restore_poll import RestorePoller  # it reads the driver with this module's helpers

        self.restores = RestorePoller(self.poller.source, progress)

    def run_started(self, query_id: str, run_id: str) -> None:
        """Follow the run's first batch from the next tick on."""
        if self.restores is not None:
            self.restores.progress.on_run_started(query_id, run_id)
            self.restores.watch(query_id, run_id)

    def restore_tick(self) -> None:
        """Ask the driver for the first batch's finished tasks, at most every poll interval."""
        if self.restores is not None:
            self.restores.tick()

    def close(self) -> None:
        self.poller.source.close()


def polling_source(spark: Any, every: int = 1) -> PollingSource | None:
    """A ``PollingSource`` for a classic PySpark session with its UI on; None where there is no UI (or no JVM)."""
    try:
        url = spark.sparkContext.uiWebUrl
        app_id = spark.sparkContext.applicationId
    except Exception:  # Spark Connect: no SparkContext on this side
        return None
    if not url:
        return None
    source = RestSource(url, app_id)
    source.warm_up()
    return PollingSource(TaskPoller(source), every)
