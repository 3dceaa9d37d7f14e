"""RocksDB memory and disk per executor against its budget, from where each state partition ran.

``ExecutorCapacity`` (run by the placement feed, which knows which executor holds each partition; fed the
application's configuration through ``Observer.set_spark_conf``) sums per executor over the application's queries
the store instances, the estimate of ``spark_state_observer.model.capacity`` from the data each holds, Spark's reported memory
and the SST bytes, against the budget. Series are bounded: the top-K executors by estimate plus
``executor="total"``; a series that leaves the top K is removed.
"""

from __future__ import annotations

from collections.abc import Iterable

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.updates import Labels, Update
from spark_state_observer.model.capacity import StateConf, bounded_bytes, instance_bytes, read_conf, stores_per_operator
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.model.fields import ROCKSDB_SST_BYTES
from spark_state_observer.placement.tracker import OperatorBatch

TOTAL = "total"


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
            sst = op.custom.get(ROCKSDB_SST_BYTES)
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
