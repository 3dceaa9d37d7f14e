"""Where the work runs: executors coming and going, and an operator's state partitions changing.

Executors are polled from the driver (one JVM call per progress event, or the event log's executor
events in replay); a change of an operator's shuffle partitions or store instances between batches
means its state was laid out anew.
"""

from __future__ import annotations

from observer.metrics import catalog
from observer.metrics.tracker import QueryRecord, operator_labels
from observer.model.events import OperatorProgress, QueryProgress
from observer.signals import kinds
from observer.signals.facts import Facts

OperatorKey = tuple[str, int, str]  # query id, operator index, operator name
Layout = tuple["float | None", "float | None"]  # shuffle partitions, store instances


class Executors:
    """The application's executors: a gauge of how many, a counter and a signal per change."""

    def __init__(self) -> None:
        self._known: set[str] | None = None

    def observe(self, record: QueryRecord, executors: set[str], now: float, facts: Facts) -> None:
        """``executors`` as polled now; changes are attributed to ``record``'s query, whose event polled them."""
        facts.app(catalog.EXECUTORS, (), float(len(executors)))
        if self._known is not None:
            for change, kind, ids in (("added", kinds.EXECUTOR_ADDED, executors - self._known),
                                      ("removed", kinds.EXECUTOR_REMOVED, self._known - executors)):
                for executor_id in sorted(ids):
                    facts.app(catalog.EXECUTOR_CHANGES, (("change", change),), 1.0)
                    facts.signal(kind, record, record.run_id, now, executor_id=executor_id)
        self._known = set(executors)


class Partitions:
    """Each operator's (shuffle partitions, store instances), to see them change between batches."""

    def __init__(self) -> None:
        self._layouts: dict[OperatorKey, Layout] = {}

    def forget(self, query_id: str) -> None:
        for key in [k for k in self._layouts if k[0] == query_id]:
            del self._layouts[key]

    def forget_operator(self, key: OperatorKey) -> None:
        """An operator (name) the query's label budget dropped."""
        self._layouts.pop(key, None)

    def operator(self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, ts: float, facts: Facts) -> None:
        key = (record.query_id, op.index, op.name)
        layout = (op.shuffle_partitions, op.store_instances)
        before = self._layouts.get(key)
        if before is not None and layout != before:
            facts.add(record, catalog.PARTITION_CHANGES, operator_labels(op.index, op.name))
            facts.signal(kinds.PARTITIONS_CHANGED, record, p.run_id, ts, operator=op.name, before=before, after=layout)
        self._layouts[key] = layout
