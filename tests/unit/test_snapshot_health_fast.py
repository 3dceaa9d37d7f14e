"""Snapshot health's per-operator pass (issue 32) against the pass it replaced, on every recorded run.

``SnapshotHealth.operator`` now ranks an operator's instances once (tuples; the lagging ones are a stable
filter of the ranking, the exported series its top K), sets its five gauges in one call and takes the
allowed lag's median once a batch. ``_Reference`` below is the pass as it was before (a frozen dataclass
per instance, the lagging ones and the top K each sorted on their own, the median per operator). Both are
fed every recorded progress event that reports snapshot uploads, at the default settings and at settings
that make most instances lag and keep one series (so the lagging order, the signal's partitions and the
removal of series that leave the top K are all compared), and the runs recorded with their checkpoint
also with it listed; their gauges and signals must be equal after every batch.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass

import pytest
from recorded_progress import recorded_runs

from conftest import FIXTURES
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryRecord, operator_labels
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.model.events import OperatorProgress, QueryProgress
from spark_state_observer.model.fields import SNAPSHOT_LAST_UPLOADED
from spark_state_observer.model.signal_kinds import SNAPSHOT_LAGGING
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.snapshots import (
    CHECKPOINT,
    MAX_INSTANCES,
    MAX_PARTITIONS_TOLD,
    PROGRESS,
    CheckpointLocator,
    SnapshotHealth,
    _from_listing,
    _Query,
    _restored_base,
)


@dataclass(frozen=True)
class _Instance:
    partition: int
    store: str
    lag: float
    never_uploaded: bool
    replay_files: int | None


class _Reference(SnapshotHealth):
    """The per-operator pass before issue 32's session 7, as it was."""

    def allowed_lag(self, query_id: str) -> float:
        q = self._queries.get(query_id)
        period = statistics.median(q.periods) if q is not None and q.periods else None
        per_interval = self.maintenance_seconds / period if period else 0.0
        return self.s.snapshot_lag_batches + per_interval

    def operator(self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, ts: float, facts: SignalFacts) -> None:
        q = self._queries.get(record.query_id)
        if q is None:
            return
        reported = [m for m in op.instances if m.prefix == SNAPSHOT_LAST_UPLOADED]
        listed = {k[1:]: v for k, v in (q.listing or {}).items() if k[0] == op.index}
        if not reported and not listed:
            return
        total = int(op.store_instances) if op.store_instances and math.isfinite(op.store_instances) else None
        version = p.batch_id + 1
        if q.restart_batch == p.batch_id:  # the base a restart's restore tells (the same rule as the fast pass)
            _restored_base(q, op, p.batch_id)
        base = q.restored_base.get(op.index, q.run_base)
        newest = {(m.partition, m.store): m.value for m in reported if m.value is not None}
        for (part, store), value in newest.items():
            key = (op.index, part, store)
            if key in q.uploaded or len(q.uploaded) < MAX_INSTANCES:
                q.uploaded[key] = max(value, q.uploaded.get(key, value))
        if listed:
            source = CHECKPOINT
            instances = [
                _Instance(*_from_listing(part, store, s, version, newest.get((part, store)))) for (part, store), s in listed.items()
            ]
            unknown = max(0, (total or 0) - len(instances))
        else:
            source = PROGRESS
            instances = [
                _Instance(
                    m.partition,
                    m.store,
                    float(version - (m.value if m.value is not None else max(base, q.uploaded.get((op.index, m.partition, m.store), 0)))),
                    m.value is None,
                    None,
                )
                for m in reported
            ]
            all_never = all(i.never_uploaded for i in instances)
            unknown = max(0, (total or len(instances)) - len(instances)) if all_never else 0
        allowed = self.allowed_lag(record.query_id)
        largest = max(i.lag for i in instances)
        never = sum(1 for i in instances if i.never_uploaded)
        lagging = sorted((i for i in instances if i.lag > allowed), key=lambda i: (-i.lag, i.partition, i.store))
        labels = operator_labels(op.index, op.name)
        facts.set(record, catalog.SNAPSHOT_MAX_LAG_BATCHES, labels, largest)
        facts.set(record, catalog.SNAPSHOT_INSTANCES_NEVER_UPLOADED, labels, float(never))
        facts.set(record, catalog.SNAPSHOT_INSTANCES_UNKNOWN, labels, float(unknown))
        facts.set(record, catalog.SNAPSHOT_INSTANCES_LAGGING, labels, float(len(lagging)))
        replay = sum(i.replay_files or 0 for i in instances) if source == CHECKPOINT else None
        facts.set(record, catalog.SNAPSHOT_RESTORE_REPLAY_FILES, labels, None if replay is None else float(replay))
        self._reference_series(record, q, op.index, labels, instances, facts)
        if largest <= allowed:
            q.lagging.discard(op.index)
            return
        if op.index in q.lagging:
            return
        q.lagging.add(op.index)
        facts.signal(
            SNAPSHOT_LAGGING,
            record,
            p.run_id,
            ts,
            batch_id=p.batch_id,
            operator_id=op.index,
            operator_name=op.name,
            max_lag_batches=largest,
            allowed_lag_batches=round(allowed, 1),
            instances=total,
            instances_lagging=len(lagging),
            instances_never_uploaded=never,
            instances_unknown=unknown,
            replay_files=replay,
            source=source,
            partitions=[
                {
                    "partition": i.partition,
                    "store": i.store,
                    "lag_batches": i.lag,
                    "never_uploaded": i.never_uploaded,
                    "replay_files": i.replay_files,
                }
                for i in lagging[:MAX_PARTITIONS_TOLD]
            ],
        )

    def _reference_series(
        self, record: QueryRecord, q: _Query, op_index: int, labels: Labels, instances: list[_Instance], facts: SignalFacts
    ) -> None:
        top = sorted(instances, key=lambda i: (-i.lag, i.partition, i.store))[: self.s.partition_top_k]
        now: set[Labels] = set()
        for i in top:
            il = labels + (("partition", str(i.partition)), ("store", i.store))
            now.add(il)
            facts.set(record, catalog.SNAPSHOT_LAG_BATCHES, il, i.lag)
        for gone in q.shown.get(op_index, set()) - now:
            facts.set(record, catalog.SNAPSHOT_LAG_BATCHES, gone, None)
        q.shown[op_index] = now


RECORDED = recorded_runs(SNAPSHOT_LAST_UPLOADED)


def _checkpoint(name: str) -> CheckpointLocator | None:
    """The recorded checkpoint of a run that has one (``snapshot_health/<scenario>/checkpoint``), else None."""
    folder = os.path.join(FIXTURES, os.path.dirname(os.path.dirname(name)), "checkpoint")
    return (lambda _query_id, _run_id: folder) if os.path.isdir(folder) else None


@pytest.mark.parametrize(
    ("settings", "listed"),
    [
        (Settings(http_enabled=False), False),
        (Settings(http_enabled=False, snapshot_lag_batches=0.0, partition_top_k=1), False),
        (Settings(http_enabled=False, snapshot_lag_batches=0.0, partition_top_k=3), True),
    ],
    ids=["defaults", "most_lag_one_series", "checkpoint_listed"],
)
def test_ranked_once_equals_the_reference_on_every_recorded_run(settings: Settings, listed: bool) -> None:
    assert len(RECORDED) >= 10
    signals = lagging = removed = from_listing = 0
    for name, events in RECORDED:
        checkpoint = _checkpoint(name) if listed else None
        if listed and checkpoint is None:
            continue
        fast, reference = SnapshotHealth(settings, checkpoint), _Reference(settings, checkpoint)
        for health in (fast, reference):
            health.set_conf({"spark.sql.streaming.stateStore.maintenanceInterval": "5s"})
        records = {}
        for n, p in enumerate(events):
            record = records.setdefault(p.query_id, QueryRecord(p.query_id))
            ts = p.timestamp or float(n)
            got, want = SignalFacts(), SignalFacts()
            for health, facts in ((fast, got), (reference, want)):
                health.batch(record, p, ts, first_of_run=n == 0 or p.run_id != events[n - 1].run_id)
                for op in p.operators:
                    health.operator(record, p, op, ts, facts)
            assert got.updates == want.updates, (name, p.batch_id)
            assert got.signals == want.signals, (name, p.batch_id)
            signals += len(got.signals)
            lagging += sum(1 for u in got.updates if u.spec is catalog.SNAPSHOT_INSTANCES_LAGGING and u.value)
            removed += sum(1 for u in got.updates if u.spec is catalog.SNAPSHOT_LAG_BATCHES and u.value is None)
            from_listing += sum(1 for u in got.updates if u.spec is catalog.SNAPSHOT_RESTORE_REPLAY_FILES and u.value is not None)
    assert signals and lagging  # the recordings lag beyond normal somewhere
    if listed:
        assert from_listing  # the instances were read from the listing
    if settings.partition_top_k == 1:
        assert removed  # series left the top K and were removed
