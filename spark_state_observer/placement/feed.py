"""Placement in the pipeline: at each progress event, the batches its source completed become facts.

``spark_state_observer.placement.tracker`` knows where partitions ran and what moved; this module connects it to
the one pipeline (``docs/architecture.md``). ``Observer.process`` calls ``PlacementFeed.on_progress`` on
the worker thread (never on Spark's listener thread) with the ``SignalFacts`` of that progress event, so:

- ``partition_migrated`` signals reach the bus (callbacks, the log), the history and OpenTelemetry like
  every other signal;
- the placement metrics (``catalog.PLACEMENT_METRICS``) become tracker updates, so ``/metrics``, the
  Pushgateway, OTLP and ``replay --format prometheus`` render them through the normal exposition. Their
  cardinality is bounded by the tracker: per operator, per cause, the top-K partitions and executors; a
  series that drops out of the top K is removed.

Where batches come from is the ``PlacementSource``: the driver's REST API live
(``spark_state_observer.placement.task_poll.PollingSource``), or the task events of an event log in replay and watch
(``spark_state_observer.placement.task_log.EventLogSource``). Both give the same placement and migrations; only event
logs carry per-partition load times, rows and memory.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable
from typing import Protocol, cast, runtime_checkable

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import COUNTER, MetricSpec
from spark_state_observer.metrics.tracker import operator_labels
from spark_state_observer.metrics.updates import Labels, Update
from spark_state_observer.model.capacity import StateConf
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.model.signal_kinds import RESTORE_FINISHED, SignalEvent
from spark_state_observer.placement.capacity import ExecutorCapacity
from spark_state_observer.placement.restore_progress import ExpectedWorkHook, RestoreProgress
from spark_state_observer.placement.restores import TaskRestores
from spark_state_observer.placement.tasks import BatchTasks, ExecutorChange
from spark_state_observer.placement.tracker import OperatorBatch, PlacementTracker
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.skew import StateSkew

_QUERY_LABELS = frozenset({"query", "query_id"})
MAX_BATCHES = 2_000  # operator batches kept for readers (tests, the live check, the browser's recent view)


class PlacementSource(Protocol):
    """Where the partition runs of completed batches come from."""

    name: str

    def take(self, progress: QueryProgress) -> list[BatchTasks | ExecutorChange]:
        """Batches (and executor changes, in order) completed by the time of this progress event."""

    def executors(self) -> Iterable[ExecutorChange]:
        """Executors' changes, asked at most once per batch that has a migration and only then (live: one request)."""

    def close(self) -> None:
        """Release connections; called once when the observer stops."""


@runtime_checkable
class FollowsRestores(Protocol):
    """A source that sees tasks as they end (an event log's), so it can tell a restore while it runs."""

    def follow_restores(self, progress: RestoreProgress) -> None:
        """Tell ``progress`` every job start and stateful task end from now on."""

    def run_started(self, query_id: str, run_id: str) -> None:
        """A run of the query started (the pipeline's ``QueryStarted``): its first batch may restore."""

    def restore_tick(self) -> None:
        """The worker's tick: a source that must ask for tasks asks now."""


class PlacementFeed:
    """One source, one tracker; thread-confined to the observer's worker (or a replay loop)."""

    def __init__(
        self,
        source: PlacementSource,
        top_k: int = 10,
        max_batches: int = MAX_BATCHES,
        *,
        restores: TaskRestores | None = None,
        conf: StateConf | None = None,
        expected_work: ExpectedWorkHook | None = None,
        spark_version: str | None = None,
    ) -> None:
        """``restores``: the restores measured from task times; ``conf``: the application's RocksDB settings (for
        the memory per executor); ``expected_work`` and ``spark_version``: what a running restore's ETA reads."""
        self.source = source
        self.tracker = PlacementTracker(top_k=max(1, top_k))
        self.batches: deque[OperatorBatch] = deque(maxlen=max_batches)  # recent ones, without their partition runs
        self.last: list[OperatorBatch] = []  # those of the latest progress event, with their runs (the history writes them)
        self._shown: dict[str, dict[tuple[MetricSpec, Labels], float]] = {}  # query id -> series -> value handed on
        self.restores = restores
        self.capacity = ExecutorCapacity(conf, top_k=top_k)  # RocksDB memory per executor (its conf: Observer.set_spark_conf)
        self.skew = StateSkew()  # state_skewed, from each operator batch's bytes per partition
        self.restore_progress = RestoreProgress(expected_work=expected_work)  # restores while they run, where the source sees tasks end
        self.restore_progress.spark_version = spark_version  # a restore names its operators as this Spark's progress does
        # asked once: a runtime-checkable protocol's isinstance walks its members (~2 % of the watcher's CPU per tick)
        self._follows_restores = isinstance(source, FollowsRestores)
        if self._follows_restores:
            cast(FollowsRestores, source).follow_restores(self.restore_progress)

    def on_progress(self, progress: QueryProgress, facts: SignalFacts, label: Callable[[str], str], ts: float) -> None:
        """Apply what the source completed by ``progress``; signals and metric updates go into ``facts``.

        ``label`` gives a query's ``query`` label as the tracker knows it (name, else id), so the signals read
        like the others; ``ts`` is the time the signals carry (the progress event's).
        """
        self.last = []
        self.capacity.on_progress(progress)
        items = self.source.take(progress)
        self._restore_facts(facts, label, first=True)  # they happened before the batch ended
        if self.restores is not None:
            self.restores.on_progress(progress, items, facts)
        if not items:
            return
        for item in items:
            if isinstance(item, ExecutorChange):
                self.tracker.on_executor(item)
            else:
                self.last.extend(self.tracker.on_batch(item, executors=self.source.executors))
        self.batches.extend(dataclasses.replace(ob, runs=()) for ob in self.last)
        if self.restores is not None:
            self.restores.on_migrations(self.last, ts, facts)
        for fact in self.tracker.take_facts():
            facts.signals.append(dataclasses.replace(fact, query=label(fact.query_id), timestamp=ts))
        self._skew(facts, label, ts)
        facts.updates.extend(self._updates())
        facts.updates.extend(self.capacity.updates(self.tracker.latest_batches()))

    def _skew(self, facts: SignalFacts, label: Callable[[str], str], ts: float) -> None:
        """Each operator batch placed now, with its partitions' SST bytes, to the skew rule."""
        for ob in self.last:
            if ob.bytes_total is None:
                continue  # no SST sizes: not RocksDB, or live polling (no per-task SQL metrics)
            sizes = {r.partition: r.sst_bytes or 0 for r in ob.runs}
            run_id = ob.runs[0].run_id if ob.runs else None
            event = self.skew.on_batch(ob.query_id, label(ob.query_id), run_id, ob.batch_id, ob.operator, ob.operator_name, sizes, ts)
            if event is not None:
                facts.signals.append(event)

    def on_started(self, query_id: str, run_id: str) -> None:
        """A run of the query started: a source that polls follows its first batch."""
        if self._follows_restores:
            cast(FollowsRestores, self.source).run_started(query_id, run_id)

    def tick(self, facts: SignalFacts, label: Callable[[str], str]) -> None:
        """Restore events the source told since the last event (``watch`` feeds tasks between progress events,
        the live poller asks the driver during a first batch)."""
        if self._follows_restores:
            cast(FollowsRestores, self.source).restore_tick()
        self._restore_facts(facts, label)

    def _restore_facts(self, facts: SignalFacts, label: Callable[[str], str], first: bool = False) -> None:
        """The restore notes as signals (``first``: before the event's own), and the running restores' gauges."""
        notes = self.restore_progress.take()
        if not notes:
            return
        signals = [SignalEvent(n.kind, n.query_id, label(n.query_id), n.run_id, n.timestamp, n.attributes) for n in notes]
        if first:
            facts.signals[0:0] = signals
        else:
            facts.signals.extend(signals)
        for n in notes:
            a = n.attributes
            labels = operator_labels(a["operator_index"], a["operator"])
            running = n.kind != RESTORE_FINISHED
            total, done = a.get("partitions_total"), a.get("partitions_done", 0)
            values = {
                catalog.RESTORE_IN_PROGRESS: 1.0 if running else None,
                catalog.RESTORE_PARTITIONS_REMAINING: float(total - done) if running and total is not None else None,
                catalog.RESTORE_ELAPSED: a.get("elapsed_seconds", 0.0) if running else None,
                catalog.RESTORE_ETA: a.get("eta_seconds") if running else None,
            }
            facts.updates.extend(Update(spec, labels, value, n.query_id) for spec, value in values.items())

    def on_terminated(self, query_id: str, run_id: str | None, facts: SignalFacts) -> None:
        """A run of the query ended: what waited for its later batches is handed on now."""
        if self.restores is not None:
            self.restores.on_terminated(query_id, run_id, facts)

    def finish(self, facts: SignalFacts) -> None:
        """The observer stops: what still waits for later batches is handed on into ``facts``."""
        if self.restores is not None:
            self.restores.finish(facts)

    def close(self) -> None:
        self.source.close()

    def _updates(self) -> list[Update]:
        """The tracker's series as updates: counters by their increase, gauges set, vanished gauges removed."""
        current: dict[str, dict[tuple[MetricSpec, Labels], float]] = {}
        for spec, labels, value in self.tracker.samples():
            own = tuple((k, v) for k, v in labels.items() if k not in _QUERY_LABELS)
            current.setdefault(labels["query_id"], {})[(spec, own)] = value
        out: list[Update] = []
        for query_id in set(current) | set(self._shown):
            now, before = current.get(query_id, {}), self._shown.get(query_id, {})
            for (spec, series), value in now.items():
                prev = before.get((spec, series))
                if spec.kind == COUNTER:
                    if prev is None or value != prev:  # a first zero creates the counter; a tracker that forgot restarts at 0
                        out.append(Update(spec, series, value - prev if prev is not None and value >= prev else value, query_id))
                elif value != prev:
                    out.append(Update(spec, series, value, query_id))
            out.extend(
                Update(spec, series, None, query_id) for (spec, series) in before if spec.kind != COUNTER and (spec, series) not in now
            )
            if query_id in current:
                self._shown[query_id] = now
            else:
                del self._shown[query_id]
        return out
