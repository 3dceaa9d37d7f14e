"""RocksDB memory and disk per executor against its budget, and Spark's memory reports that cannot be right.

Two rules, both fed the application's configuration (``Observer.set_spark_conf``: the listener reads
``spark.conf``, the watcher the log's ``SparkListenerEnvironmentUpdate``; Spark's defaults until then):

- ``MemoryPlausibility`` (run by the engine on every RocksDB operator of every progress) flags a
  ``rocksdb_memory_implausible`` signal when ``memoryUsedBytes`` cannot be right: above the budget by orders
  of magnitude (a 15 TB report, PR #46491), zero while the store holds rows (PR #51709), or split evenly across
  instances because bounded memory is on (SPARK-53002: each instance reports the executor's shared total
  divided by the instances, so per-operator and per-partition memory mean nothing; once per run).
- ``ExecutorCapacity`` (run by the placement feed, which knows which executor holds each partition) sums per
  executor over the application's queries the store instances, the estimate of ``spark_state_observer.model.capacity``
  from the data each holds, Spark's reported memory and the SST bytes, against the budget. Series are bounded:
  the top-K executors by estimate plus ``executor="total"``; a series that leaves the top K is removed.
"""

from __future__ import annotations

from collections import OrderedDict

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryRecord, operator_labels
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.model.capacity import StateConf, read_conf
from spark_state_observer.model.events import OperatorProgress, QueryProgress
from spark_state_observer.model.signal_kinds import ROCKSDB_MEMORY_IMPLAUSIBLE
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.rule import Context, Rule

ABOVE_BUDGET = "above_budget"
ZERO_WITH_ROWS = "zero_with_rows"
BOUNDED_DIVISION = "bounded_division"
IMPLAUSIBLE_FACTOR = 100  # "orders of magnitude": no store instance can hold 100x its whole executor's room
MAX_RUNS = 1024  # query runs remembered for the once-per-run bounded-division signal


class MemoryPlausibility(Rule):
    """Judges each RocksDB operator's reported memory; thread-confined to the worker like every rule."""

    def __init__(self, conf: StateConf | None = None) -> None:
        self.conf = conf or read_conf({})
        self._bounded_told: OrderedDict[tuple[str, str | None, int], None] = OrderedDict()

    def on_operator(self, ctx: Context, op: OperatorProgress, labels: Labels) -> None:
        memory = op.memory_bytes
        if memory is None:
            return
        if (
            not self.conf.bounded
            and not memory > IMPLAUSIBLE_FACTOR * self.conf.overhead_bytes * max(op.store_instances or 0.0, 1.0)
            and not (memory == 0 and (op.rows_total or 0) > 0)
        ):
            return  # no reason ``operator`` could find, whatever the provider (most operators of most batches)
        if op.provider != "rocksdb":
            return
        assert ctx.progress is not None
        self.operator(ctx.record, ctx.progress, op, ctx.ts, ctx.facts)

    def operator(self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, ts: float, facts: SignalFacts) -> None:
        memory = op.memory_bytes
        if memory is None or op.provider != "rocksdb":
            return
        reason = None
        if memory > IMPLAUSIBLE_FACTOR * self.conf.overhead_bytes * max(op.store_instances or 0.0, 1.0):
            reason = ABOVE_BUDGET
        elif memory == 0 and (op.rows_total or 0) > 0:
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
        labels = operator_labels(op.index, op.name)
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
