"""What the observer knows about each query right now: latest progress, lifecycle, running totals.

The worker applies events here; exporters read copies. Memory is bounded: at most ``max_queries``
queries (terminated ones are forgotten first), one latest progress each, and counters whose label sets
are bounded by the parser's caps.
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
from dataclasses import dataclass, field

from observer import registry
from observer.model import Event, QueryIdle, QueryProgress, QueryStarted, QueryTerminated

Labels = tuple[tuple[str, str], ...]


@dataclass
class QueryRecord:
    query_id: str
    name: str | None = None
    run_id: str | None = None
    status: str = "active"  # active, idle, terminated, failed
    last_progress: QueryProgress | None = None
    exception: str | None = None
    starts: int = 0
    terminations: dict[str, int] = field(default_factory=dict)
    counters: dict[tuple[str, Labels], float] = field(default_factory=dict)
    # written by the signals: gauges and counters beyond the registry's per-field ones
    signal_gauges: dict[tuple[str, Labels], float] = field(default_factory=dict)
    touched: float = field(default_factory=time.monotonic)
    # Drawn from the tracker's counter at every change that shows in the metrics, so exporters can cache
    # what they rendered per (query, version); never reused, not even by a query re-admitted after
    # eviction. ``state_version`` moves at every change but to ``signal_gauges``, which the live worker's
    # tick rewrites every second (seconds since progress): a scrape re-renders only those then.
    version: int = 0
    state_version: int = 0

    @property
    def label(self) -> str:
        """The ``query`` label: the query's name, falling back to its id."""
        return self.name or self.query_id

    def add(self, name: str, labels: Labels, value: float | None) -> None:
        """Add to a counter; a zero creates it, so rate() and increase() see its first real increment."""
        if value is not None and value >= 0:
            key = (name, labels)
            self.counters[key] = self.counters.get(key, 0.0) + value


def operator_labels(index: int, name: str) -> Labels:
    return (("operator_index", str(index)), ("operator", name))


class QueryTracker:
    """Latest state per query; thread-safe between the worker (writer) and exporters (readers)."""

    def __init__(self, max_queries: int = 1000) -> None:
        self._lock = threading.Lock()
        self._queries: dict[str, QueryRecord] = {}
        self._max = max_queries
        self._versions = itertools.count(1)
        self.evicted = 0

    def apply(self, event: Event) -> QueryRecord:
        """Fold one event into its query's record and return the record (for the signals)."""
        with self._lock:
            record = self._queries.get(event.query_id)
            if record is None:
                record = self._admit(event.query_id)
            record.touched = time.monotonic()
            record.version = record.state_version = next(self._versions)
            if isinstance(event, QueryStarted):
                record.starts += 1
                record.run_id, record.status, record.exception = event.run_id, "active", None
                record.name = event.name or record.name
            elif isinstance(event, QueryProgress):
                record.run_id, record.status = event.run_id, "active"
                record.name = event.name or record.name
                record.last_progress = event
                _accumulate(record, event)
            elif isinstance(event, QueryIdle):
                record.run_id, record.status = event.run_id, "idle"
            elif isinstance(event, QueryTerminated):
                outcome = "exception" if event.exception else "clean"
                record.terminations[outcome] = record.terminations.get(outcome, 0) + 1
                record.status = "failed" if event.exception else "terminated"
                record.exception = event.exception
            return record

    def _admit(self, query_id: str) -> QueryRecord:
        if len(self._queries) >= self._max:
            # forget the least recently touched query, terminated ones first
            victim = min(self._queries.values(), key=lambda r: (r.status in ("active", "idle"), r.touched))
            del self._queries[victim.query_id]
            self.evicted += 1
        record = QueryRecord(query_id)
        self._queries[query_id] = record
        return record

    def get(self, query_id: str) -> QueryRecord | None:
        with self._lock:
            return self._queries.get(query_id)

    def snapshot(self) -> list[QueryRecord]:
        """Copies of every record, safe to read while the worker goes on."""
        with self._lock:
            return [_copy_record(r) for r in self._queries.values()]

    def changed_since(self, known: dict[str, int]) -> tuple[list[tuple[str, int]], dict[str, QueryRecord]]:
        """Every query's ``(query_id, version)`` in order, and copies of only the records whose version
        differs from ``known[query_id]``: a scrape after few changes copies few records."""
        with self._lock:
            order = [(qid, r.version) for qid, r in self._queries.items()]
            changed = {qid: _copy_record(self._queries[qid]) for qid, version in order if known.get(qid) != version}
            return order, changed

    def __len__(self) -> int:
        return len(self._queries)

    def set_gauge(self, query_id: str, name: str, labels: Labels, value: float | None) -> None:
        """Set (or, with ``None``, remove) a derived gauge of a query; used by the signals."""
        with self._lock:
            record = self._queries.get(query_id)
            if record is None:
                return
            key = (name, labels)
            before = record.signal_gauges.get(key)
            if value is None:
                record.signal_gauges.pop(key, None)
            else:
                record.signal_gauges[key] = value
            if repr(before) != repr(value):  # ticks mostly re-set the same value: nothing to re-render then
                record.version = next(self._versions)

    def add_counter(self, query_id: str, name: str, labels: Labels, value: float = 1.0) -> None:
        """Add to a derived counter of a query; used by the signals."""
        with self._lock:
            record = self._queries.get(query_id)
            if record is not None:
                key = (name, labels)
                if key not in record.counters or value:
                    record.counters[key] = record.counters.get(key, 0.0) + value
                    record.version = record.state_version = next(self._versions)


def _copy_record(r: QueryRecord) -> QueryRecord:
    clone = copy.copy(r)
    clone.terminations = dict(r.terminations)
    clone.counters = dict(r.counters)
    clone.signal_gauges = dict(r.signal_gauges)
    return clone


def _accumulate(record: QueryRecord, p: QueryProgress) -> None:
    """Add this batch's per-batch amounts to the record's ``_total`` counters."""
    record.add("spark_streaming_batches_total", (), 1.0)
    if p.batch_duration_ms is not None:
        record.add("spark_streaming_batch_seconds_total", (), p.batch_duration_ms * registry.MS)
    record.add("spark_streaming_input_rows_total", (), p.input_rows)
    for phase, ms in p.duration_ms.items():
        record.add("spark_streaming_phase_seconds_total", (("phase", phase),), ms * registry.MS)
    for src in p.sources:
        record.add("spark_streaming_source_input_rows_total", source_labels(src.index, src.description), src.input_rows)
    if p.sink is not None:
        record.add("spark_streaming_sink_output_rows_total", (), p.sink.output_rows)
    for op in p.operators:
        labels = operator_labels(op.index, op.name)
        for attr, name, scale in _OPERATOR_COUNTERS:
            value = getattr(op, attr)
            record.add(name, labels, None if value is None else value * scale)
        for key, value in op.custom.items():
            counter = _CUSTOM_COUNTERS.get(key)
            if counter is not None:
                record.add(counter[0], labels, value * counter[1])


_OPERATOR_FIELDS = {
    "numRowsTotal": "rows_total", "numRowsUpdated": "rows_updated", "numRowsRemoved": "rows_removed",
    "numRowsDroppedByWatermark": "rows_dropped_by_watermark", "allUpdatesTimeMs": "updates_ms",
    "allRemovalsTimeMs": "removals_ms", "commitTimeMs": "commit_ms", "memoryUsedBytes": "memory_bytes",
    "numShufflePartitions": "shuffle_partitions", "numStateStoreInstances": "store_instances",
}


_OPERATOR_COUNTERS = tuple((_OPERATOR_FIELDS[s.key], s.prometheus_name, s.scale) for s in registry.OPERATOR_METRICS if s.kind == registry.COUNTER)
_CUSTOM_COUNTERS = {s.key: (s.prometheus_name, s.scale) for s in registry.CUSTOM_METRICS if s.kind == registry.COUNTER}


def operator_field(op, key: str) -> float | None:  # type: ignore[no-untyped-def]
    """An operator's value for a registry key of ``OPERATOR_METRICS`` (Spark's JSON field name)."""
    return getattr(op, _OPERATOR_FIELDS[key])


def source_labels(index: int, description: str) -> Labels:
    """Source labels: its position and a short description (Spark's can be long and carry options)."""
    short = description.split("[", 1)[0] if description else "unknown"
    return (("source_index", str(index)), ("source", short[:60] or "unknown"))
