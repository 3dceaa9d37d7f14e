"""Derive the events an operator of a stateful stream cares about, live and in replay.

Kafka Streams tells its users when state is restored (StateRestoreListener) and when the application
rebalances (StateListener). Spark does not, so they are inferred here from the event stream, following
what Spark actually reports (see ``../shared/spark-state-metrics.md`` section 3):

- restart: the same query id with a new run id, or a first run seen at a batch id above 0 (a restart
  from a checkpoint in a new process); downtime from the previous run's last sign of life.
- restore: the first batch of a restarted run. RocksDB 4.1+ reports load and changelog-replay time for
  operators that load once per task; aggregations and session windows load twice and read 0, so their
  restore time is the excess of the run's first ``addBatch`` over the previous run's typical one.
- store reload within a run (an executor lost, a task moved): stores loaded from the checkpoint,
  changelog files replayed, a load latency far above the run's usual, HDFS cache misses, or a
  ``SnapshotLastUploaded`` value going back (a new provider instance).
- stall, crash loop, falling behind, watermark lag, state growth (see ``observer.signals.growth``).

Each signal is a metric (through the tracker), an event in ``recent`` and a call of subscribed callbacks.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from observer.model import Event, OperatorProgress, QueryIdle, QueryProgress, QueryStarted, QueryTerminated
from observer.settings import Settings
from observer.signals.classify import classify_exception
from observer.signals.growth import GrowthWindow
from observer.tracker import QueryRecord, QueryTracker, operator_labels

log = logging.getLogger("observer")
# these load their store twice per task, and the second (no-op) load resets the load metrics
DOUBLE_LOAD_OPERATORS = frozenset({"stateStoreSave", "sessionWindowStateStoreSaveExec"})
SIGNAL_KINDS = (
    "query_started", "query_restarted", "query_terminated", "query_idle", "crash_loop", "stalled", "stall_recovered",
    "restore", "store_reload", "executor_added", "executor_removed", "partitions_changed",
    "state_unbounded", "state_bounded", "falling_behind", "caught_up",
)


@dataclass(frozen=True)
class SignalEvent:
    """A derived event: what happened, to which query (and operator), when, with its figures."""

    kind: str
    query_id: str
    query: str
    run_id: str | None
    timestamp: float
    attributes: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        attrs = ", ".join(f"{k}={v}" for k, v in self.attributes.items())
        return f"{self.kind} {self.query} ({attrs})"


@dataclass
class _OperatorState:
    growth: GrowthWindow
    load_ms: deque = field(default_factory=lambda: deque(maxlen=20))
    snapshots: dict[tuple[int, str], float | None] = field(default_factory=dict)
    hdfs_misses: float | None = None
    layout: tuple[float | None, float | None] | None = None
    unbounded: bool | None = None


@dataclass
class _QueryState:
    run_id: str | None = None
    progress_run: str | None = None
    run_start: float | None = None
    last_alive: float | None = None
    restart_pending: bool = False
    first_seen: bool = True
    add_batch_ms: deque = field(default_factory=lambda: deque(maxlen=30))
    previous_add_batch_ms: list = field(default_factory=list)
    progress_at: deque = field(default_factory=lambda: deque(maxlen=20))
    stalled: bool = False
    restarts: deque = field(default_factory=lambda: deque(maxlen=100))
    crash_loop: bool = False
    behind_since: float | None = None
    behind: bool = False
    ops: dict[tuple[int, str], _OperatorState] = field(default_factory=dict)


class SignalEngine:
    """Consumes model events in order (one thread) and emits ``SignalEvent``s and derived metrics."""

    def __init__(self, settings: Settings, tracker: QueryTracker, clock: Callable[[], float] = time.time,
                 live: bool = True, last_alive_hint: Callable[[str, float], float | None] | None = None) -> None:
        self.s = settings
        self.tracker = tracker
        self.clock = clock
        self.live = live
        self.last_alive_hint = last_alive_hint
        self.recent: deque[SignalEvent] = deque(maxlen=1000)
        self.callback_failures = 0
        self._subscribers: dict[str, list[Callable[[SignalEvent], Any]]] = {}
        self._queries: dict[str, _QueryState] = {}
        self._executors: set[str] | None = None
        self._app_lock = threading.Lock()
        self.app_gauges: dict[tuple[str, tuple], float] = {}
        self.app_counters: dict[tuple[str, tuple], float] = {}

    # --- callbacks ------------------------------------------------------------------------------------
    def subscribe(self, kind: str, callback: Callable[[SignalEvent], Any]) -> None:
        if kind != "*" and kind not in SIGNAL_KINDS:
            raise ValueError(f"unknown signal kind {kind!r}; one of: *, {', '.join(SIGNAL_KINDS)}")
        self._subscribers.setdefault(kind, []).append(callback)

    def _emit(self, kind: str, record: QueryRecord, run_id: str | None, ts: float, **attributes: Any) -> None:
        event = SignalEvent(kind, record.query_id, record.label, run_id, ts, attributes)
        self.recent.append(event)
        log.info("spark-state-observer: %s", event.describe())
        for callback in self._subscribers.get(kind, []) + self._subscribers.get("*", []):
            try:
                callback(event)
            except Exception as exc:  # a user's callback must never reach Spark
                self.callback_failures += 1
                log.warning("spark-state-observer: %s callback %r failed: %r", kind, callback, exc)

    # --- events ---------------------------------------------------------------------------------------
    def on_event(self, event: Event, record: QueryRecord, received_at: float | None = None,
                 executors: set[str] | None = None) -> None:
        now = received_at if received_at is not None else self.clock()
        q = self._queries.get(event.query_id)
        if q is None:
            q = self._queries[event.query_id] = _QueryState()
            self.tracker.add_counter(record.query_id, "spark_streaming_query_restarts_total", (), 0.0)
        if len(self._queries) > self.s.max_queries:
            for stale in [k for k in self._queries if self.tracker.get(k) is None]:
                del self._queries[stale]
        if isinstance(event, QueryStarted):
            self._on_started(q, record, event, now)
        elif isinstance(event, QueryProgress):
            self._on_progress(q, record, event, now)
        elif isinstance(event, QueryIdle):
            q.last_alive = event.timestamp or now
            self._emit("query_idle", record, event.run_id, event.timestamp or now)
        elif isinstance(event, QueryTerminated):
            self._on_terminated(q, record, event, now)
        if executors is not None:
            self._on_executors(record, executors, now)

    def _on_started(self, q: _QueryState, record: QueryRecord, e: QueryStarted, now: float) -> None:
        ts = e.timestamp or now
        known_before = q.run_id is not None and q.run_id != e.run_id
        self._new_run(q, e.run_id, ts)
        self._emit("query_started", record, e.run_id, ts)
        if known_before:
            self._restart(q, record, e.run_id, ts)

    def _new_run(self, q: _QueryState, run_id: str, ts: float) -> None:
        q.run_id, q.run_start = run_id, ts
        if q.add_batch_ms:
            q.previous_add_batch_ms = list(q.add_batch_ms)
        q.add_batch_ms.clear()
        q.progress_at.clear()
        q.behind_since, q.behind = None, False
        for op in q.ops.values():
            op.load_ms.clear()
            op.snapshots.clear()
            op.hdfs_misses = None

    def _restart(self, q: _QueryState, record: QueryRecord, run_id: str, ts: float) -> None:
        last_alive = q.last_alive
        if last_alive is None and self.last_alive_hint is not None:
            try:
                last_alive = self.last_alive_hint(record.query_id, q.run_start or ts)
            except Exception as exc:  # an unreadable checkpoint only costs the downtime figure
                log.debug("spark-state-observer: no downtime for %s: %r", record.label, exc)
        downtime = max(0.0, ts - last_alive) if last_alive is not None else None
        q.restart_pending = True
        self.tracker.add_counter(record.query_id, "spark_streaming_query_restarts_total", ())
        if downtime is not None:
            self.tracker.set_gauge(record.query_id, "spark_streaming_query_last_downtime_seconds", (), downtime)
        self._emit("query_restarted", record, run_id, ts, downtime_seconds=None if downtime is None else round(downtime, 3))
        q.restarts.append(ts)
        while q.restarts and ts - q.restarts[0] > self.s.crash_loop_window_seconds:
            q.restarts.popleft()
        looping = len(q.restarts) >= self.s.crash_loop_restarts
        if looping and not q.crash_loop:
            self._emit("crash_loop", record, run_id, ts, restarts=len(q.restarts), window_seconds=self.s.crash_loop_window_seconds)
        q.crash_loop = looping
        self.tracker.set_gauge(record.query_id, "spark_streaming_query_crash_loop", (), 1.0 if looping else 0.0)

    def _on_terminated(self, q: _QueryState, record: QueryRecord, e: QueryTerminated, now: float) -> None:
        q.last_alive = now if self.live else (q.last_alive or now)
        self._set_stalled(q, record, False, now)
        attrs: dict[str, Any] = {"outcome": "exception" if e.exception else "clean"}
        if e.exception:
            cls = classify_exception(e.error_class, e.exception)
            attrs.update(exception_class=cls, error_class=e.error_class, message=e.exception.splitlines()[0][:300])
            self.tracker.add_counter(record.query_id, "spark_streaming_query_terminations_by_class_total", (("exception_class", cls),))
        self._emit("query_terminated", record, e.run_id, q.last_alive, **attrs)

    def _on_progress(self, q: _QueryState, record: QueryRecord, p: QueryProgress, now: float) -> None:
        ts = p.timestamp or now
        first_of_run = q.progress_run != p.run_id
        if first_of_run:
            if q.run_id != p.run_id:  # no started event seen for this run (late attach, partial log)
                had_run = q.run_id is not None
                self._new_run(q, p.run_id, ts)
                if had_run:
                    self._restart(q, record, p.run_id, ts)
            if q.first_seen and p.batch_id > 0 and not q.restart_pending:
                self._restart(q, record, p.run_id, q.run_start or ts)  # restarted from a checkpoint
            q.first_seen = False
            q.progress_run = p.run_id
        if q.stalled:
            self._set_stalled(q, record, False, now)
        self.tracker.set_gauge(record.query_id, "spark_streaming_query_stalled", (), 0.0)
        q.progress_at.append(now)
        add_batch = p.duration_ms.get("addBatch")
        if first_of_run and q.restart_pending:
            self._restores(q, record, p, add_batch)
            q.restart_pending = False
        elif add_batch is not None:
            q.add_batch_ms.append(add_batch)
        for op in p.operators:
            self._operator(q, record, p, op, ts, first_of_run)
        self._lag(q, record, p, ts)
        q.last_alive = ts + (p.batch_duration_ms or 0) / 1000.0

    # --- restore and reload ---------------------------------------------------------------------------
    def _restores(self, q: _QueryState, record: QueryRecord, p: QueryProgress, add_batch: float | None) -> None:
        baseline = statistics.median(q.previous_add_batch_ms) if q.previous_add_batch_ms else None
        for op in p.operators:
            load_ms = op.custom.get("rocksdbLoadLatencyMs", 0.0)
            files = op.custom.get("rocksdbNumReplayChangelogFiles")
            attrs: dict[str, Any] = {"operator": op.name, "operator_index": op.index, "batch_id": p.batch_id,
                                     "provider": op.provider, "stores": op.store_instances}
            if load_ms > 0 and op.name not in DOUBLE_LOAD_OPERATORS:
                duration, method = load_ms / 1000.0, "load_metrics"
                attrs.update(replay_seconds=op.custom.get("rocksdbReplayChangeLogLatencyMs", 0.0) / 1000.0,
                             loads_from_checkpoint=op.custom.get("rocksdbNumLoadedFromDfs"))
            elif add_batch is not None:
                # aggregations, session windows, HDFS and Spark 3.5: no usable load metric
                excess = add_batch - baseline if baseline is not None else add_batch
                duration, method = max(0.0, excess) / 1000.0, "add_batch_excess"
            else:
                continue
            attrs.update(duration_seconds=round(duration, 3), method=method, changelog_files=files)
            labels = operator_labels(op.index, op.name)
            self.tracker.add_counter(record.query_id, "spark_state_restores_total", labels)
            self.tracker.set_gauge(record.query_id, "spark_state_last_restore_duration_seconds", labels + (("method", method),), duration)
            if files is not None:
                self.tracker.set_gauge(record.query_id, "spark_state_last_restore_changelog_files", labels, files)
            self._emit("restore", record, p.run_id, p.timestamp or self.clock(), **attrs)

    def _operator(self, q: _QueryState, record: QueryRecord, p: QueryProgress, op: OperatorProgress, ts: float, first: bool) -> None:
        key = (op.index, op.name)
        st = q.ops.get(key)
        labels = operator_labels(op.index, op.name)
        if st is None:
            st = q.ops[key] = _OperatorState(GrowthWindow(self.s.growth_window_seconds, self.s.growth_min_batches))
            for counter in ("spark_state_restores_total", "spark_state_store_reloads_total", "spark_state_partition_changes_total"):
                self.tracker.add_counter(record.query_id, counter, labels, 0.0)  # exported from 0, so increase() sees the first
        evidence = [] if first else self._reload_evidence(st, op)
        load_ms = op.custom.get("rocksdbLoadLatencyMs")
        if load_ms is not None and not evidence:
            st.load_ms.append(load_ms)
        misses = op.custom.get("loadedMapCacheMissCount")
        if misses is not None:
            st.hdfs_misses = misses
        for m in op.instances:
            if m.prefix == "SnapshotLastUploaded":
                st.snapshots[(m.partition, m.store)] = m.value
        if evidence:
            self.tracker.add_counter(record.query_id, "spark_state_store_reloads_total", labels)
            self._emit("store_reload", record, p.run_id, ts, operator=op.name, operator_index=op.index, batch_id=p.batch_id,
                       evidence=",".join(evidence), load_seconds=(load_ms or 0) / 1000.0,
                       changelog_files=op.custom.get("rocksdbNumReplayChangelogFiles"))
        layout = (op.shuffle_partitions, op.store_instances)
        if st.layout is not None and layout != st.layout:
            self.tracker.add_counter(record.query_id, "spark_state_partition_changes_total", labels)
            self._emit("partitions_changed", record, p.run_id, ts, operator=op.name, before=st.layout, after=layout)
        st.layout = layout
        self._growth(record, p, op, st, labels, ts)

    def _reload_evidence(self, st: _OperatorState, op: OperatorProgress) -> list[str]:
        evidence = []
        if (op.custom.get("rocksdbNumLoadedFromDfs") or 0) > 0:
            evidence.append("loaded_from_checkpoint")
        if (op.custom.get("rocksdbNumReplayChangelogFiles") or 0) > 0:
            evidence.append("changelog_replay")
        load_ms = op.custom.get("rocksdbLoadLatencyMs")
        if load_ms is not None and len(st.load_ms) >= 3:
            usual = statistics.median(st.load_ms)
            if load_ms / 1000.0 > self.s.restore_load_threshold_seconds and load_ms > 3 * max(usual, 1.0):
                evidence.append("load_latency")
        misses = op.custom.get("loadedMapCacheMissCount")
        if misses is not None and st.hdfs_misses is not None and misses > st.hdfs_misses:
            evidence.append("hdfs_cache_miss")
        for m in op.instances:
            if m.prefix != "SnapshotLastUploaded":
                continue
            before = st.snapshots.get((m.partition, m.store))
            if before is not None and (m.value is None or m.value < before):
                evidence.append("snapshot_reset")
                break
        return evidence

    # --- growth and lag -------------------------------------------------------------------------------
    def _growth(self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, st: _OperatorState, labels, ts: float) -> None:  # type: ignore[no-untyped-def]
        if op.rows_total is None:
            return
        st.growth.add(ts, op.rows_total, op.memory_bytes or 0.0, op.rows_updated or 0.0, op.rows_removed or 0.0)
        v = st.growth.verdict(self.s.state_rows_budget, self.s.state_memory_budget_bytes)
        qid = record.query_id
        self.tracker.set_gauge(qid, "spark_state_rows_growth_rate", labels, v.rows_per_second)
        self.tracker.set_gauge(qid, "spark_state_memory_growth_rate_bytes", labels, v.bytes_per_second)
        self.tracker.set_gauge(qid, "spark_state_eviction_ratio", labels, v.eviction_ratio)
        self.tracker.set_gauge(qid, "spark_state_rows_budget_eta_seconds", labels, v.rows_eta_seconds)
        self.tracker.set_gauge(qid, "spark_state_memory_budget_eta_seconds", labels, v.bytes_eta_seconds)
        if v.unbounded is None:
            return
        self.tracker.set_gauge(qid, "spark_state_unbounded", labels, 1.0 if v.unbounded else 0.0)
        if v.unbounded != st.unbounded:
            kind = "state_unbounded" if v.unbounded else "state_bounded"
            self._emit(kind, record, p.run_id, ts, operator=op.name, operator_index=op.index,
                       rows=op.rows_total, rows_per_second=round(v.rows_per_second, 3), eviction_ratio=round(v.eviction_ratio, 3))
        st.unbounded = v.unbounded

    def _lag(self, q: _QueryState, record: QueryRecord, p: QueryProgress, ts: float) -> None:
        qid = record.query_id
        wm = p.watermark
        if wm is not None and wm > 0 and p.timestamp is not None:
            self.tracker.set_gauge(qid, "spark_streaming_watermark_lag_seconds", (), max(0.0, p.timestamp - wm))
        inp, proc = p.input_rows_per_second, p.processed_rows_per_second
        if inp is not None and proc is not None and (p.input_rows or 0) > 0 and inp > proc:
            q.behind_since = q.behind_since if q.behind_since is not None else ts
            if not q.behind and ts - q.behind_since >= self.s.falling_behind_window_seconds:
                q.behind = True
                self._emit("falling_behind", record, p.run_id, ts, input_rows_per_second=inp, processed_rows_per_second=proc)
        elif inp is not None and proc is not None:
            if q.behind:
                self._emit("caught_up", record, p.run_id, ts)
            q.behind_since, q.behind = None, False
        self.tracker.set_gauge(qid, "spark_streaming_falling_behind", (), 1.0 if q.behind else 0.0)

    # --- executors and stalls -------------------------------------------------------------------------
    def _on_executors(self, record: QueryRecord, executors: set[str], now: float) -> None:
        with self._app_lock:
            self.app_gauges[("spark_streaming_executors", ())] = float(len(executors))
        if self._executors is not None:
            for change, ids in (("added", executors - self._executors), ("removed", self._executors - executors)):
                for executor_id in sorted(ids):
                    with self._app_lock:
                        key = ("spark_streaming_executor_changes_total", (("change", change),))
                        self.app_counters[key] = self.app_counters.get(key, 0.0) + 1
                    self._emit(f"executor_{change}", record, record.run_id, now, executor_id=executor_id)
        self._executors = set(executors)

    def tick(self) -> None:
        """Called about once a second by the live worker: stalls need time to pass, not events."""
        if not self.live:
            return
        now = self.clock()
        for query_id, q in list(self._queries.items()):
            record = self.tracker.get(query_id)
            if record is None or not q.progress_at:
                continue
            since = now - q.progress_at[-1]
            if record.status != "active":
                if q.stalled:
                    self._set_stalled(q, record, False, now)
                continue
            self.tracker.set_gauge(query_id, "spark_streaming_query_seconds_since_progress", (), since)
            stamps = list(q.progress_at)
            gaps = [b - a for a, b in zip(stamps, stamps[1:])]
            interval = statistics.median(gaps) if gaps else self.s.trigger_interval_seconds
            limit = max(self.s.stall_min_seconds, self.s.stall_factor * interval)
            if since > limit and not q.stalled:
                self._set_stalled(q, record, True, now, seconds_without_progress=round(since, 1), limit_seconds=round(limit, 1))

    def _set_stalled(self, q: _QueryState, record: QueryRecord, stalled: bool, now: float, **attrs: Any) -> None:
        if stalled == q.stalled:
            return
        q.stalled = stalled
        self.tracker.set_gauge(record.query_id, "spark_streaming_query_stalled", (), 1.0 if stalled else 0.0)
        self._emit("stalled" if stalled else "stall_recovered", record, q.run_id, now, **attrs)

    def app_snapshot(self) -> list[tuple[str, tuple, float]]:
        with self._app_lock:
            return [(n, lab, v) for (n, lab), v in list(self.app_gauges.items()) + list(self.app_counters.items())]
