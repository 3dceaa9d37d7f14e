"""State restores after a restart, and store reloads within a run.

Kafka Streams tells its users when state is restored (StateRestoreListener). Spark does not, so it is
inferred here from what Spark reports (``../shared/spark-state-metrics.md`` section 3):

- restore: the first batch of a restarted run. RocksDB 4.1+ reports load and changelog-replay time for
  operators that load once per task; aggregations and session windows load twice and read 0, so their
  restore time is the excess of the run's first ``addBatch`` over the previous run's typical one.
- store reload within a run (an executor lost, a task moved): stores loaded from the checkpoint,
  changelog files replayed, a load latency far above the run's usual, HDFS cache misses, or a
  ``SnapshotLastUploaded`` value going back (a new provider instance).
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from observer.metrics import catalog
from observer.metrics.tracker import QueryRecord, operator_labels
from observer.model.events import OperatorProgress, QueryProgress
from observer.model.fields import (
    HDFS_CACHE_MISSES,
    ROCKSDB_LOAD_MS,
    ROCKSDB_LOADED_FROM_DFS,
    ROCKSDB_REPLAY_FILES,
    ROCKSDB_REPLAY_MS,
    SNAPSHOT_LAST_UPLOADED,
)
from observer.model.phases import ADD_BATCH
from observer.settings import Settings
from observer.signals import kinds
from observer.signals.facts import Facts

# these load their store twice per task, and the second (no-op) load resets the load metrics
DOUBLE_LOAD_OPERATORS = frozenset({"stateStoreSave", "sessionWindowStateStoreSaveExec"})
OperatorKey = tuple[str, int, str]  # query id, operator index, operator name


@dataclass
class _Batches:
    add_batch_ms: deque[float] = field(default_factory=lambda: deque(maxlen=30))
    previous_add_batch_ms: list[float] = field(default_factory=list)


@dataclass
class _Stores:
    load_ms: deque[float] = field(default_factory=lambda: deque(maxlen=20))
    snapshots: dict[tuple[int, str], float | None] = field(default_factory=dict)
    hdfs_misses: float | None = None


class Restores:
    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self._queries: dict[str, _Batches] = {}
        self._operators: dict[OperatorKey, _Stores] = {}

    def new_run(self, query_id: str) -> None:
        """A run starts: its first addBatch will be judged against the previous run's, loads start afresh."""
        q = self._queries.setdefault(query_id, _Batches())
        if q.add_batch_ms:
            q.previous_add_batch_ms = list(q.add_batch_ms)
        q.add_batch_ms.clear()
        for (qid, _, _), st in self._operators.items():
            if qid == query_id:
                st.load_ms.clear()
                st.snapshots.clear()
                st.hdfs_misses = None

    def forget(self, query_id: str) -> None:
        self._queries.pop(query_id, None)
        for key in [k for k in self._operators if k[0] == query_id]:
            del self._operators[key]

    def forget_operator(self, key: OperatorKey) -> None:
        """An operator (name) the query's label budget dropped."""
        self._operators.pop(key, None)

    def batch(self, record: QueryRecord, p: QueryProgress, restore_due: bool, ts: float, facts: Facts) -> None:
        """The restore of a restarted run's first batch, or one more addBatch for the next baseline."""
        q = self._queries.setdefault(record.query_id, _Batches())
        add_batch = p.duration_ms.get(ADD_BATCH)
        if restore_due:
            self._restores(q, record, p, add_batch, ts, facts)
        elif add_batch is not None:
            q.add_batch_ms.append(add_batch)

    def _restores(self, q: _Batches, record: QueryRecord, p: QueryProgress, add_batch: float | None, ts: float, facts: Facts) -> None:
        baseline = statistics.median(q.previous_add_batch_ms) if q.previous_add_batch_ms else None
        for op in p.operators:
            load_ms = op.custom.get(ROCKSDB_LOAD_MS, 0.0)
            files = op.custom.get(ROCKSDB_REPLAY_FILES)
            attrs: dict[str, Any] = {"operator": op.name, "operator_index": op.index, "batch_id": p.batch_id,
                                     "provider": op.provider, "stores": op.store_instances}
            if load_ms > 0 and op.name not in DOUBLE_LOAD_OPERATORS:
                duration, method = load_ms / 1000.0, "load_metrics"
                attrs.update(replay_seconds=op.custom.get(ROCKSDB_REPLAY_MS, 0.0) / 1000.0,
                             loads_from_checkpoint=op.custom.get(ROCKSDB_LOADED_FROM_DFS))
            elif add_batch is not None:
                # aggregations, session windows, HDFS and Spark 3.5: no usable load metric
                excess = add_batch - baseline if baseline is not None else add_batch
                duration, method = max(0.0, excess) / 1000.0, "add_batch_excess"
            else:
                continue
            attrs.update(duration_seconds=round(duration, 3), method=method, changelog_files=files)
            labels = operator_labels(op.index, op.name)
            facts.add(record, catalog.STATE_RESTORES, labels)
            facts.set(record, catalog.LAST_RESTORE_DURATION, labels + (("method", method),), duration)
            if files is not None:
                facts.set(record, catalog.LAST_RESTORE_CHANGELOG_FILES, labels, files)
            facts.signal(kinds.RESTORE, record, p.run_id, ts, **attrs)

    def operator(self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, ts: float, first_of_run: bool, facts: Facts) -> None:
        """A store reload within the run, judged on one operator's figures of one batch."""
        key = (record.query_id, op.index, op.name)
        st = self._operators.get(key)
        if st is None:
            st = self._operators[key] = _Stores()
        evidence = [] if first_of_run else self._reload_evidence(st, op)
        load_ms = op.custom.get(ROCKSDB_LOAD_MS)
        if load_ms is not None and not evidence:
            st.load_ms.append(load_ms)
        misses = op.custom.get(HDFS_CACHE_MISSES)
        if misses is not None:
            st.hdfs_misses = misses
        for m in op.instances:
            if m.prefix == SNAPSHOT_LAST_UPLOADED:
                st.snapshots[(m.partition, m.store)] = m.value
        if evidence:
            facts.add(record, catalog.STATE_STORE_RELOADS, operator_labels(op.index, op.name))
            facts.signal(kinds.STORE_RELOAD, record, p.run_id, ts, operator=op.name, operator_index=op.index, batch_id=p.batch_id,
                         evidence=",".join(evidence), load_seconds=(load_ms or 0) / 1000.0,
                         changelog_files=op.custom.get(ROCKSDB_REPLAY_FILES))

    def _reload_evidence(self, st: _Stores, op: OperatorProgress) -> list[str]:
        evidence = []
        if (op.custom.get(ROCKSDB_LOADED_FROM_DFS) or 0) > 0:
            evidence.append("loaded_from_checkpoint")
        if (op.custom.get(ROCKSDB_REPLAY_FILES) or 0) > 0:
            evidence.append("changelog_replay")
        load_ms = op.custom.get(ROCKSDB_LOAD_MS)
        if load_ms is not None and len(st.load_ms) >= 3:
            usual = statistics.median(st.load_ms)
            if load_ms / 1000.0 > self.s.restore_load_threshold_seconds and load_ms > 3 * max(usual, 1.0):
                evidence.append("load_latency")
        misses = op.custom.get(HDFS_CACHE_MISSES)
        if misses is not None and st.hdfs_misses is not None and misses > st.hdfs_misses:
            evidence.append("hdfs_cache_miss")
        for m in op.instances:
            if m.prefix != SNAPSHOT_LAST_UPLOADED:
                continue
            before = st.snapshots.get((m.partition, m.store))
            if before is not None and (m.value is None or m.value < before):
                evidence.append("snapshot_reset")
                break
        return evidence
