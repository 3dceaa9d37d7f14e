"""RocksDB memory and disk per executor against its budget, and Spark's memory reports that cannot be right.

Two rules, both fed the application's configuration (``Observer.set_spark_conf``: the listener reads
``spark.conf``, the watcher the log's ``SparkListenerEnvironmentUpdate``; Spark's defaults until then):

- ``MemoryPlausibility`` (run by the engine on every RocksDB operator of every progress) flags a
  ``rocksdb_memory_implausible`` signal when ``memoryUsedBytes`` cannot be right: above the budget by orders
  of magnitude (a 15 TB report, PR #46491), zero while the store holds rows (PR #51709), or split evenly across
  instances because bounded memory is on (SPARK-53002: each instance reports the executor's shared total
  divided by the instances, so per-operator and per-partition memory mean nothing; once per run).
- ``ExecutorCapacity`` (run by the placement feed, which knows which executor holds each partition) sums per
  executor over the application's queries the store instances, the estimate of ``observer.model.capacity``
  from the data each holds, Spark's reported memory and the SST bytes, against the budget. Series are bounded:
  the top-K executors by estimate plus ``executor="total"``; a series that leaves the top K is removed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from observer.metrics import catalog
from observer.metrics.tracker import QueryRecord, operator_labels
from observer.metrics.updates import Labels, Update
from observer.model.capacity import StateConf, bounded_bytes, instance_bytes, read_conf, stores_per_operator
from observer.model.events import OperatorProgress, QueryProgress
from observer.signals.facts import Facts
from observer.signals.kinds import ROCKSDB_MEMORY_IMPLAUSIBLE
from observer.signals.placement import OperatorBatch

ABOVE_BUDGET = "above_budget"
ZERO_WITH_ROWS = "zero_with_rows"
BOUNDED_DIVISION = "bounded_division"
REASONS = (ABOVE_BUDGET, ZERO_WITH_ROWS, BOUNDED_DIVISION)
IMPLAUSIBLE_FACTOR = 100  # "orders of magnitude": no store instance can hold 100x its whole executor's room
TOTAL = "total"
MAX_RUNS = 1024  # query runs remembered for the once-per-run bounded-division signal
SST_KEY = "rocksdbSstFileSize"


class MemoryPlausibility:
    """Judges each RocksDB operator's reported memory; thread-confined to the worker like every rule."""

    def __init__(self, conf: StateConf | None = None) -> None:
        self.conf = conf or read_conf({})
        self._bounded_told: OrderedDict[tuple[str, str | None, int], None] = OrderedDict()

    def operator(self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, ts: float, facts: Facts) -> None:
        if op.provider != "rocksdb" or op.memory_bytes is None:
            return
        labels = operator_labels(op.index, op.name)
        instances = max(op.store_instances or 0.0, 1.0)
        reason = None
        if op.memory_bytes > IMPLAUSIBLE_FACTOR * self.conf.overhead_bytes * instances:
            reason = ABOVE_BUDGET
        elif op.memory_bytes == 0 and (op.rows_total or 0) > 0:
            reason = ZERO_WITH_ROWS
        elif self.conf.bounded:
            key = (record.query_id, p.run_id, op.index)
            if key in self._bounded_told:
                return
            self._bounded_told[key] = None
            while len(self._bounded_told) > MAX_RUNS:
                self._bounded_told.popitem(last=False)
            reason = BOUNDED_DIVISION
        if reason is None:
            return
        facts.add(record, catalog.ROCKSDB_MEMORY_IMPLAUSIBLE, (*labels, ("reason", reason)))
        facts.signal(
            ROCKSDB_MEMORY_IMPLAUSIBLE,
            record,
            p.run_id,
            ts,
            batch_id=p.batch_id,
            operator_id=op.index,
            operator_name=op.name,
            reason=reason,
            memory_bytes=op.memory_bytes,
            rows=op.rows_total,
            instances=op.store_instances,
            budget_bytes=self.conf.overhead_bytes,
        )


class ExecutorCapacity:
    """Per executor: instances, estimated and reported memory, SST bytes and budget, as app-wide updates."""

    def __init__(self, conf: StateConf | None = None, top_k: int = 10) -> None:
        self.conf = conf or read_conf({})
        self.top_k = max(1, top_k)
        self._sst: dict[tuple[str, int], float] = {}  # (query, operator) -> its latest rocksdbSstFileSize
        self._stores: dict[tuple[str, int], int] = {}  # (query, operator) -> stores per partition
        self._provider: dict[tuple[str, int], str] = {}  # (query, operator) -> rocksdb, hdfs or unknown, by its metrics
        self._shown: set[tuple[catalog.MetricSpec, Labels]] = set()  # the series handed on last time

    def on_progress(self, p: QueryProgress) -> None:
        for op in p.operators:
            key = (p.query_id, op.index)
            self._provider[key] = op.provider
            sst = op.custom.get(SST_KEY)
            if sst is not None:
                self._sst[key] = sst
            if op.shuffle_partitions and op.store_instances:
                self._stores[key] = max(1, round(op.store_instances / op.shuffle_partitions))
            else:
                self._stores.setdefault(key, stores_per_operator(op.name))

    def forget(self, live: Iterable[tuple[str, int]]) -> None:
        """Keep only the (query, operator) pairs placement still follows."""
        keep = set(live)
        self._sst = {k: v for k, v in self._sst.items() if k in keep}
        self._stores = {k: v for k, v in self._stores.items() if k in keep}
        self._provider = {k: v for k, v in self._provider.items() if k in keep}

    def updates(self, latest: Iterable[OperatorBatch]) -> list[Update]:
        """The series now, from the latest placed batch of every operator; series gone since last time are removed."""
        instances: dict[str, int] = {}
        ceiling: dict[str, int] = {}
        expected: dict[str, int] = {}
        reported: dict[str, float] = {}
        sst: dict[str, float] = {}
        batches = list(latest)
        self.forget((b.query_id, b.operator) for b in batches)
        for b in batches:
            key = (b.query_id, b.operator)
            provider = self._provider.get(key, "unknown")
            if provider == "hdfs" or (provider == "unknown" and self.conf.provider != "rocksdb"):
                continue  # an HDFS-backed store lives on the heap: the RocksDB estimate does not apply
            stores = self._stores.get(key, stores_per_operator(b.operator_name))
            total_parts = max(len(b.placement), 1)
            op_sst = self._sst.get(key)
            rows_of = {r.partition: r.rows_total for r in b.runs}
            for partition, ex in b.placement.items():
                share = op_sst / total_parts if op_sst is not None else None
                rows = rows_of.get(partition)
                per_store_rows = rows / stores if rows is not None else None
                per_store_sst = share / stores if share is not None else None
                top, mid = instance_bytes(self.conf, per_store_rows, per_store_sst)
                instances[ex] = instances.get(ex, 0) + stores
                ceiling[ex] = ceiling.get(ex, 0) + stores * top
                expected[ex] = expected.get(ex, 0) + stores * mid
                if share is not None:
                    sst[ex] = sst.get(ex, 0.0) + share
            for ex, memory in b.executor_memory.items():
                reported[ex] = reported.get(ex, 0.0) + memory
        if not instances:
            return self._remove_all()
        top_executors = sorted(instances, key=lambda ex: (-expected[ex], ex))[: self.top_k]
        series: dict[tuple[catalog.MetricSpec, Labels], float] = {}

        def put(ex: str, n: int, est: int, top: int, budget: int, rep: float | None, disk: float | None) -> None:
            labels: Labels = (("executor", ex),)
            series[(catalog.EXECUTOR_STORE_INSTANCES, labels)] = float(n)
            series[(catalog.EXECUTOR_ROCKSDB_MEMORY_ESTIMATE, labels)] = float(est)
            series[(catalog.EXECUTOR_ROCKSDB_MEMORY_CEILING, labels)] = float(top)
            series[(catalog.EXECUTOR_ROCKSDB_MEMORY_BUDGET, labels)] = float(budget)
            if rep is not None:
                series[(catalog.EXECUTOR_ROCKSDB_MEMORY_REPORTED, labels)] = rep
            if disk is not None:
                series[(catalog.EXECUTOR_ROCKSDB_SST, labels)] = disk

        for ex in top_executors:
            put(
                ex,
                instances[ex],
                bounded_bytes(self.conf, expected[ex]),
                bounded_bytes(self.conf, ceiling[ex]),
                self.conf.overhead_bytes,
                reported.get(ex),
                sst.get(ex),
            )
        put(
            TOTAL,
            sum(instances.values()),
            sum(bounded_bytes(self.conf, v) for v in expected.values()),
            sum(bounded_bytes(self.conf, v) for v in ceiling.values()),
            self.conf.overhead_bytes * len(instances),
            sum(reported.values()) if reported else None,
            sum(sst.values()) if sst else None,
        )
        out = [Update(spec, labels, value, None) for (spec, labels), value in series.items()]
        out += [Update(spec, labels, None, None) for spec, labels in self._shown - set(series)]
        self._shown = set(series)
        return out

    def _remove_all(self) -> list[Update]:
        out = [Update(spec, labels, None, None) for spec, labels in self._shown]
        self._shown = set()
        return out
