"""All metric state: per query (latest progress, lifecycle, running totals, derived values) and app-wide.

The worker applies events and the signals' updates here; exporters read copies (``observer.metrics.view``).
Memory is bounded: at most ``max_queries`` queries (terminated ones are forgotten first), one latest
progress each, and label sets bounded per query (``observer.metrics.labels``).
"""

from __future__ import annotations

import copy
import functools
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Iterable

from observer.metrics import catalog
from observer.metrics.catalog import COUNTER, MetricSpec
from observer.metrics.labels import METRIC, OPERATOR, PHASE, SOURCE, LabelBudget
from observer.metrics.updates import Labels, Update
from observer.model import kinds
from observer.model.events import Event, QueryIdle, QueryProgress, QueryStarted, QueryTerminated
from observer.model.fields import OPERATOR_FIELDS

__all__ = ["Labels", "QueryRecord", "QueryTracker", "operator_labels", "source_labels"]

SeriesKey = tuple[MetricSpec, Labels]


@dataclass
class QueryRecord:
    query_id: str
    name: str | None = None
    run_id: str | None = None
    status: str = kinds.ACTIVE  # one of kinds.QUERY_STATUSES
    last_progress: QueryProgress | None = None
    exception: str | None = None
    starts: int = 0
    terminations: dict[str, int] = field(default_factory=dict)
    counters: dict[SeriesKey, float] = field(default_factory=dict)
    # derived by the signals: gauges beyond the catalog's per-field ones
    signal_gauges: dict[SeriesKey, float] = field(default_factory=dict)
    touched: float = field(default_factory=time.monotonic)
    # Drawn from the tracker's counter at every change that shows in the metrics, so exporters can cache
    # what they rendered per (query, version); never reused, not even by a query re-admitted after
    # eviction. ``state_version`` moves at every change but to ``signal_gauges``, which the live worker's
    # tick rewrites every second (seconds since progress): a scrape re-renders only those then.
    version: int = 0
    state_version: int = 0
    labels: LabelBudget = field(default_factory=LabelBudget)
    batches_seen: int = 0

    @property
    def label(self) -> str:
        """The ``query`` label: the query's name, falling back to its id."""
        return self.name or self.query_id

    def add(self, spec: MetricSpec, labels: Labels, value: float | None) -> None:
        """Add to a counter; a zero creates it, so rate() and increase() see its first real increment."""
        if value is not None and value >= 0:
            key = (spec, labels)
            self.counters[key] = self.counters.get(key, 0.0) + value


def operator_labels(index: int, name: str) -> Labels:
    return (("operator_index", str(index)), ("operator", name))


def source_labels(index: int, description: str) -> Labels:
    """Source labels: its position and a short description (Spark's can be long and carry options)."""
    short = description.split("[", 1)[0] if description else "unknown"
    return (("source_index", str(index)), ("source", short[:60] or "unknown"))


class QueryTracker:
    """Latest state per query and the application-wide values; thread-safe between the worker (writer)
    and exporters (readers)."""

    def __init__(self, max_queries: int = 1000) -> None:
        self._lock = threading.Lock()
        self._queries: dict[str, QueryRecord] = {}
        self._app: dict[SeriesKey, float] = {}
        self._max = max_queries
        self._versions = itertools.count(1)
        self.evicted = 0
        self.label_values_dropped = 0  # label values forgotten or refused over all queries (LabelBudget)

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
                record.run_id, record.status, record.exception = event.run_id, kinds.ACTIVE, None
                record.name = event.name or record.name
            elif isinstance(event, QueryProgress):
                record.run_id, record.status = event.run_id, kinds.ACTIVE
                record.name = event.name or record.name
                record.last_progress = event
                self._admit_labels(record, event)
                _accumulate(record, event)
            elif isinstance(event, QueryIdle):
                record.run_id, record.status = event.run_id, kinds.IDLE
            elif isinstance(event, QueryTerminated):
                outcome = kinds.EXCEPTION if event.exception else kinds.CLEAN
                record.terminations[outcome] = record.terminations.get(outcome, 0) + 1
                record.status = kinds.FAILED if event.exception else kinds.TERMINATED
                record.exception = event.exception
            return record

    def apply_updates(self, updates: Iterable[Update]) -> None:
        """Apply the signals' derived values: counters are added to, gauges set (``None`` removes one).

        An update for a query the tracker no longer keeps is dropped; application-wide updates
        (``query_id`` None) are kept apart from every query.
        """
        with self._lock:
            for u in updates:
                key = (u.spec, u.labels)
                if u.query_id is None:
                    self._apply_app(key, u)
                    continue
                record = self._queries.get(u.query_id)
                if record is None or not record.labels.allows(u.labels):
                    continue
                if u.spec.kind == COUNTER:
                    amount = u.value or 0.0
                    if key not in record.counters or amount:
                        record.counters[key] = record.counters.get(key, 0.0) + amount
                        record.version = record.state_version = next(self._versions)
                    continue
                before = record.signal_gauges.get(key)
                if u.value is None:
                    record.signal_gauges.pop(key, None)
                else:
                    record.signal_gauges[key] = u.value
                if before != u.value or type(before) is not type(u.value):  # ticks mostly re-set the same value: nothing to re-render then
                    record.version = next(self._versions)

    def _apply_app(self, key: SeriesKey, u: Update) -> None:
        if u.spec.kind == COUNTER:
            self._app[key] = self._app.get(key, 0.0) + (u.value or 0.0)
        elif u.value is None:
            self._app.pop(key, None)
        else:
            self._app[key] = u.value

    def _admit_labels(self, record: QueryRecord, p: QueryProgress) -> None:
        """Admit this batch's label values to the query's budget; drop the series of values it displaces."""
        record.batches_seen += 1
        budget, batch, before = record.labels, record.batches_seen, record.labels.dropped
        evicted: list[tuple[str, str]] = []

        def use(label: str, value: str) -> None:
            _, displaced = budget.admit(label, value, batch)
            if displaced is not None:
                evicted.append((label, displaced))

        for phase in p.duration_ms:
            use(PHASE, phase)
        for src in p.sources:
            use(SOURCE, source_labels(src.index, src.description)[1][1])
            for key in src.metrics:
                if key not in catalog.KAFKA_LAG_KEYS:
                    use(METRIC, key)
        for op in p.operators:
            use(OPERATOR, op.name)
            for key in op.custom:
                if key not in catalog.CUSTOM_BY_KEY:
                    use(METRIC, key)
            for prefix in {m.prefix for m in op.instances} - catalog.KNOWN_INSTANCE_PREFIXES:
                use(METRIC, prefix)
        if evicted:
            gone = set(evicted)
            for series in (record.counters, record.signal_gauges):
                for stale in [k for k in series if any(pair in gone for pair in k[1])]:
                    del series[stale]
        self.label_values_dropped += budget.dropped - before

    def _admit(self, query_id: str) -> QueryRecord:
        if len(self._queries) >= self._max:
            # forget the least recently touched query, terminated ones first
            victim = min(self._queries.values(), key=lambda r: (r.status in (kinds.ACTIVE, kinds.IDLE), r.touched))
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

    def app_values(self) -> list[tuple[MetricSpec, Labels, float]]:
        """The application-wide series (executors), which belong to no query."""
        with self._lock:
            return [(spec, labels, value) for (spec, labels), value in self._app.items()]

    def changed_since(self, known: dict[str, int]) -> tuple[list[tuple[str, int]], dict[str, QueryRecord]]:
        """Every query's ``(query_id, version)`` in order, and copies of only the records whose version
        differs from ``known[query_id]``: a scrape after few changes copies few records."""
        with self._lock:
            order = [(qid, r.version) for qid, r in self._queries.items()]
            changed = {qid: _copy_record(self._queries[qid]) for qid, version in order if known.get(qid) != version}
            return order, changed

    def __len__(self) -> int:
        return len(self._queries)


def _copy_record(r: QueryRecord) -> QueryRecord:
    clone = copy.copy(r)
    clone.terminations = dict(r.terminations)
    clone.counters = dict(r.counters)
    clone.signal_gauges = dict(r.signal_gauges)
    clone.labels = r.labels.copy()
    return clone


def _accumulate(record: QueryRecord, p: QueryProgress) -> None:
    """Add this batch's per-batch amounts to the record's ``_total`` counters.

    The hot path of ingest (~80 counters per event of a two-operator RocksDB query): series keys come
    from caches instead of being built per value, and a zero is added only where it creates the series
    (adding it to an existing one changes nothing).
    """
    counters = record.counters
    _add(counters, _BATCHES_KEY, 1.0)
    if p.batch_duration_ms is not None:
        _add(counters, _BATCH_SECONDS_KEY, p.batch_duration_ms * catalog.BATCH_SECONDS.scale)
    _add(counters, _INPUT_ROWS_KEY, p.input_rows)
    allows = record.labels.allows  # the query's label budget: a value it dropped or refused makes no series
    for phase, ms in p.duration_ms.items():
        key = _phase_key(phase)
        if allows(key[1]):
            _add(counters, key, ms * catalog.PHASE_SECONDS.scale)
    for src in p.sources:
        labels = source_labels(src.index, src.description)
        if allows(labels):
            _add(counters, (catalog.SOURCE_INPUT_ROWS, labels), src.input_rows)
    if p.sink is not None:
        _add(counters, _SINK_OUTPUT_ROWS_KEY, p.sink.output_rows)
    for op in p.operators:
        labels, fields, custom_keys = _operator_keys(op.index, op.name)
        if not allows(labels):
            continue
        for attr, scale, key in fields:
            value = getattr(op, attr)
            if value is not None:
                _add(counters, key, value * scale)
        for name, value in op.custom.items():  # _add inlined: ~40 per operator
            found = custom_keys.get(name)
            if found is not None:
                amount, key = value * found[0], found[1]
                if amount > 0:
                    counters[key] = counters.get(key, 0.0) + amount
                elif amount == 0 and key not in counters:
                    counters[key] = 0.0


def _add(counters: dict[SeriesKey, float], key: SeriesKey, value: float | None) -> None:
    """``QueryRecord.add`` for a key already built."""
    if value is not None and value >= 0 and (value or key not in counters):
        counters[key] = counters.get(key, 0.0) + value


_OPERATOR_COUNTERS = tuple((OPERATOR_FIELDS[s.key], s) for s in catalog.OPERATOR_METRICS if s.kind == COUNTER)
_CUSTOM_COUNTERS = {s.key: s for s in catalog.CUSTOM_METRICS if s.kind == COUNTER}
_BATCHES_KEY: SeriesKey = (catalog.BATCHES, ())
_BATCH_SECONDS_KEY: SeriesKey = (catalog.BATCH_SECONDS, ())
_INPUT_ROWS_KEY: SeriesKey = (catalog.INPUT_ROWS, ())
_SINK_OUTPUT_ROWS_KEY: SeriesKey = (catalog.SINK_OUTPUT_ROWS, ())


@functools.lru_cache(maxsize=256)
def _phase_key(phase: str) -> SeriesKey:
    return (catalog.PHASE_SECONDS, ((PHASE, phase),))


@functools.lru_cache(maxsize=4096)  # operators are few per query; bounded all the same (names come from the job)
def _operator_keys(index: int, name: str) -> tuple[Labels, tuple[tuple[str, float, SeriesKey], ...], dict[str, tuple[float, SeriesKey]]]:
    """An operator's labels and counter series keys: per field ``(attribute, scale, key)``, per custom metric ``(scale, key)``."""
    labels = operator_labels(index, name)
    return (
        labels,
        tuple((attr, spec.scale, (spec, labels)) for attr, spec in _OPERATOR_COUNTERS),
        {key: (spec.scale, (spec, labels)) for key, spec in _CUSTOM_COUNTERS.items()},
    )
