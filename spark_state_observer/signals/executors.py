"""Where the work runs: executors coming and going, and an operator's state partitions changing.

Executors are polled from the driver (one JVM call per progress event, or the event log's executor
events in replay, which carry the time Spark recorded them: ``ExecutorSet``). A change of an
operator's shuffle partitions between batches means its state was laid out anew; more store
instances than usual with the same partitions means tasks were retried (after an executor loss, or
speculation): counted apart, as a retry is no repartitioning. A query first seen restarted (its first batch
above 0: a new application on an old checkpoint) has no earlier batch here; where its checkpoint is readable
its offset log says the partitions the batches before ran with (``spark_state_observer.model.checkpoint_offsets``), so an
offline repartition is found by an observer that never saw the run before it too (``source=checkpoint``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.metrics.tracker import QueryRecord, operator_labels
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.alert_spec import WARNING, AlertSpec
from spark_state_observer.model.checkpoint_listing import local_root
from spark_state_observer.model.checkpoint_offsets import partitions_before
from spark_state_observer.model.events import OperatorProgress, QueryProgress
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.rule import Context, Rule
from spark_state_observer.signals.snapshots import CHECKPOINT, CheckpointLocator

OperatorKey = tuple[str, int, str]  # query id, operator index, operator name


class ExecutorSet(frozenset[str]):
    """Executor ids as known now, with the time each was last added or removed where the source
    recorded it (an event log's ``SparkListenerExecutorAdded/Removed``); a live poll knows no times."""

    changed_at: Mapping[str, float]

    def __new__(cls, ids: Iterable[str], changed_at: Mapping[str, float] | None = None) -> ExecutorSet:
        self = super().__new__(cls, ids)
        self.changed_at = dict(changed_at or {})
        return self


MAX_CHANGE_TIMES = 4096  # executors whose latest change time is kept (dynamic allocation adds new ids for ever)


class LoggedExecutors:
    """The executors an event log's ``SparkListenerExecutorAdded/Removed`` events leave, with when each changed.

    Replay and the watcher keep them alike, so an executor loss is placed at the time Spark recorded it
    (not at the next progress event, a batch later) whichever of them reads the log. The driver is no executor
    (the listener's poll excludes it too)."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.changed_at: dict[str, float] = {}  # insertion-ordered: the oldest change goes first past the bound
        self.seen = False  # an executor event was read (a local-mode log has none but the driver's)
        # task slots per executor while it is there, the driver's too (local mode runs tasks on it): a watcher
        # hands them to the restore ETA of an application it admits after its executors came
        self.cores: dict[str, int] = {}

    def change(self, executor_id: str, added: bool, at: float | None, cores: int | None = None) -> None:
        """Executor ``executor_id`` added (or removed) at ``at`` (epoch seconds; None: the log gave no time) with
        ``cores`` task slots where the event says."""
        if added and cores is not None and cores > 0 and (executor_id in self.cores or len(self.cores) < MAX_CHANGE_TIMES):
            self.cores[executor_id] = cores
        elif not added:
            self.cores.pop(executor_id, None)
        if executor_id == "driver":
            return
        self.seen = True
        (self.ids.add if added else self.ids.discard)(executor_id)
        if at is not None:
            self.changed_at.pop(executor_id, None)
            self.changed_at[executor_id] = at
            while len(self.changed_at) > MAX_CHANGE_TIMES:
                del self.changed_at[next(iter(self.changed_at))]

    def current(self) -> ExecutorSet:
        """The executors now, with their change times, as ``Executors.observe`` takes them."""
        return ExecutorSet(self.ids, self.changed_at)


class Executors(Rule):
    """The application's executors: a gauge of how many, a counter and a signal per change."""

    def __init__(self) -> None:
        self._known: set[str] | None = None
        self.removals = 0  # executors removed so far: a query compares it with the count at its previous batch

    def observe(self, record: QueryRecord, executors: Set[str], now: float, facts: SignalFacts) -> None:
        """``executors`` as polled now; changes are attributed to ``record``'s query, whose event polled them,
        at the time the source recorded them (``ExecutorSet``), else ``now``."""
        facts.app(catalog.EXECUTORS, (), float(len(executors)))
        times = executors.changed_at if isinstance(executors, ExecutorSet) else {}
        if self._known is not None:
            changes = [(times.get(i, now), "added", kinds.EXECUTOR_ADDED, i) for i in sorted(executors - self._known)]
            changes += [(times.get(i, now), "removed", kinds.EXECUTOR_REMOVED, i) for i in sorted(self._known - executors)]
            for at, change, kind, executor_id in sorted(changes, key=lambda c: c[0]):  # in the order they happened
                facts.app(catalog.EXECUTOR_CHANGES, (("change", change),), 1.0)
                facts.signal(kind, record, record.run_id, at, executor_id=executor_id)
                if change == "removed":
                    self.removals += 1
        self._known = set(executors)


@dataclass
class _Layout:
    partitions: float | None
    run_id: str | None = None  # the run that last showed these partitions
    recent_instances: deque[float] = field(default_factory=lambda: deque(maxlen=20))  # batches without a retry
    _most: float | None = None  # ``instances`` since the last batch seen: read twice per operator and batch

    @property
    def instances(self) -> float | None:
        """The usual store instances at these partitions: the most of recent batches without a retry."""
        if self._most is None and self.recent_instances:
            self._most = max(self.recent_instances)
        return self._most

    def seen(self, instances: float | None) -> None:
        if instances is not None:
            self.recent_instances.append(instances)
            self._most = None


OFFLINE_REPARTITION = "offline_repartition"
UNEXPLAINED = "unexplained"


class Partitions(Rule):
    """Each operator's shuffle partitions and usual store instances, to tell a repartitioning from a retry."""

    def __init__(self, checkpoint: CheckpointLocator | None = None) -> None:
        self._layouts: dict[OperatorKey, _Layout] = {}
        self.checkpoint = checkpoint
        self._before: dict[str, tuple[str, tuple[int, int] | None]] = {}  # query id -> (run id, what its checkpoint said)

    def forget(self, query_id: str) -> None:
        for key in [k for k in self._layouts if k[0] == query_id]:
            del self._layouts[key]
        self._before.pop(query_id, None)

    def _from_checkpoint(self, record: QueryRecord, p: QueryProgress, partitions: float | None) -> tuple[int, int] | None:
        """(batch, partitions) of the batches before this run, where its checkpoint is readable and says other
        partitions than ``partitions``; read once per run."""
        if self.checkpoint is None or p.batch_id <= 0 or partitions is None:
            return None
        known = self._before.get(record.query_id)
        if known is not None and known[0] == p.run_id:
            return known[1]
        found = None
        try:
            location = self.checkpoint(record.query_id, p.run_id)
            root = local_root(location) if location else None
            if root is not None:
                found = partitions_before(root, p.batch_id, int(partitions))
        except Exception:  # an unreadable checkpoint only costs the cross-application view
            found = None
        self._before[record.query_id] = (p.run_id, found)
        return found

    def forget_operator(self, key: OperatorKey) -> None:
        """An operator (name) the query's label budget dropped."""
        self._layouts.pop(key, None)

    def on_operator(self, ctx: Context, op: OperatorProgress, labels: Labels) -> None:
        assert ctx.progress is not None
        self.operator(ctx.record, ctx.progress, op, ctx.ts, ctx.facts)

    def operator(self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, ts: float, facts: SignalFacts) -> None:
        key = (record.query_id, op.index, op.name)
        before = self._layouts.get(key)
        if before is None:
            self._layouts[key] = layout = _Layout(op.shuffle_partitions, p.run_id)
            layout.seen(op.store_instances)
            earlier = self._from_checkpoint(record, p, op.shuffle_partitions)
            if earlier is not None:
                _counted_signal(
                    facts,
                    catalog.PARTITION_CHANGES,
                    kinds.PARTITIONS_CHANGED,
                    record,
                    p,
                    op,
                    ts,
                    before=float(earlier[1]),
                    after=op.shuffle_partitions,
                    store_instances_before=None,
                    store_instances_after=op.store_instances,
                    cause=OFFLINE_REPARTITION,
                    source=CHECKPOINT,
                    batch_before=earlier[0],
                )
            return
        if op.shuffle_partitions != before.partitions:
            # a checkpoint pins its state partitions: across a restart only an offline repartition (4.2+,
            # StreamingCheckpointManager.repartition) changes them; within a run nothing Spark documents does
            _counted_signal(
                facts,
                catalog.PARTITION_CHANGES,
                kinds.PARTITIONS_CHANGED,
                record,
                p,
                op,
                ts,
                before=before.partitions,
                after=op.shuffle_partitions,
                store_instances_before=before.instances,
                store_instances_after=op.store_instances,
                cause=OFFLINE_REPARTITION if p.run_id != before.run_id else UNEXPLAINED,
            )
            self._layouts[key] = _Layout(op.shuffle_partitions, p.run_id)
            self._layouts[key].seen(op.store_instances)
            return
        before.run_id = p.run_id
        if op.store_instances is not None and before.instances is not None and op.store_instances > before.instances:
            _counted_signal(
                facts,
                catalog.STATE_TASK_RETRIES,
                kinds.STATE_TASK_RETRY,
                record,
                p,
                op,
                ts,
                partitions=op.shuffle_partitions,
                store_instances=op.store_instances,
                usual_store_instances=before.instances,
                retried_store_instances=op.store_instances - before.instances,
            )
        else:
            before.seen(op.store_instances)


def _counted_signal(
    facts: SignalFacts,
    counter: MetricSpec,
    kind: str,
    record: QueryRecord,
    p: QueryProgress,
    op: OperatorProgress,
    ts: float,
    **detail: Any,
) -> None:
    """A layout change of one operator in one batch: its counter goes up by one and its signal names the operator
    and the batch, so both kinds of change carry the same identifying attributes."""
    facts.add(record, counter, operator_labels(op.index, op.name))
    facts.signal(kind, record, p.run_id, ts, operator=op.name, operator_index=op.index, batch_id=p.batch_id, **detail)


ALERTS = (
    AlertSpec(
        "SparkStatePartitionsMigrating",
        "state",
        "10m",
        WARNING,
        (kinds.PARTITION_MIGRATED,),
        thresholds=("partition_migration_batches", "partition_migration_window_minutes"),
        summary="State partitions keep moving between executors.",
    ),
)
Partitions.alerts = ALERTS
