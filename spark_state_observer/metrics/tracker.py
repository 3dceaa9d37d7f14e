"""All metric state: per query (latest progress, lifecycle, running totals, derived values) and app-wide.

The worker applies events and the signals' updates here; exporters read copies (``spark_state_observer.metrics.view``).
Memory is bounded: at most ``max_queries`` queries (terminated ones are forgotten first), one latest
progress each, and label sets bounded per query (``spark_state_observer.metrics.labels``).
"""

from __future__ import annotations

import copy
import functools
import itertools
import operator
import threading
import time
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.batch_plan import (
    BULK_SPECS,
    FIELDS,
    MAX_SHAPES,
    BatchPlan,
    OperatorBlock,
    OperatorNames,
    SeriesKey,
    add_amount,
    add_amounts,
    addable,
    batch_plan,
    operator_labels,
    phase_plan,
)
from spark_state_observer.metrics.catalog import COUNTER, MetricSpec
from spark_state_observer.metrics.labels import METRIC, OPERATOR, PHASE, SOURCE, LabelBudget
from spark_state_observer.metrics.updates import Labels, Update
from spark_state_observer.model import kinds, query_lifecycle
from spark_state_observer.model.events import Event, OperatorProgress, QueryIdle, QueryProgress, QueryStarted, QueryTerminated

__all__ = ["Labels", "QueryLife", "QueryRecord", "QueryTotals", "QueryTracker", "operator_labels", "source_labels"]

_NOBODY = object()  # no query looked up yet (``apply_updates``): not None, which means application-wide
# the signal gauges ``QueryRecord.lifecycle`` reads: a change re-renders the query's lifecycle series
_LIFECYCLE_GAUGES = frozenset({catalog.QUERY_CRASH_LOOP, catalog.QUERY_SCHEDULED, catalog.QUERY_LOST, catalog.QUERY_LOST_SINCE})


class QueryLife(NamedTuple):
    """A query's lifecycle state and the run it is about."""

    query_id: str
    name: str | None
    run_id: str | None
    state: str  # spark_state_observer.model.query_lifecycle
    run_start: float | None = None  # when its latest run started (spark_streaming_query_last_start_timestamp_seconds)
    schedule_seconds: float | None = None  # a scheduled query's interval (spark_streaming_query_schedule_interval_seconds)
    lost_since: float | None = None  # a lost query's last sign of life (spark_streaming_query_lost_since_timestamp_seconds)


class QueryTotals(NamedTuple):
    """A query's running totals (every ``_total`` series it carries), as one application counted them: what the
    next application of the query continues from under the watcher (``QueryTracker.inherit``)."""

    starts: int
    terminations: dict[str, int]
    counters: dict[SeriesKey, float]


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
    _counters: dict[SeriesKey, float] = field(default_factory=dict, repr=False)  # read through ``counters``
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
    run_batches: int = 0  # batches the latest run completed: a crash loop ends with a run that completes one
    # The totals of the operators' counters while ``_accumulate`` adds to them in bulk, in the order of the
    # block's keys: those series' values in ``_counters`` are stale until written back, which every read of
    # ``counters`` (and every copy) does. One block at most (the latest operators'), a key in it once.
    _blocks: dict[OperatorBlock, list[float]] = field(default_factory=dict, repr=False)
    # The batch plans per phase and operator names (``batch_plan``), while the label budget's generation
    # is ``_plans_generation``: what a new label value changes is decided again after it.
    _plans: dict[tuple[tuple[str, ...], OperatorNames], BatchPlan] = field(default_factory=dict, repr=False)
    _plans_generation: int = -1
    _plan: tuple[_Names, BatchPlan] | None = field(default=None, repr=False)  # the latest batch's
    # The names the latest batch carried (``_names``) and the label values they use (``_uses``): a batch
    # with the same names (the common case) uses the same list, which the budget then sees is a repeat.
    _uses: tuple[_Names, list[tuple[str, str]]] | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """The ``query`` label: the query's name, falling back to its id."""
        return self.name or self.query_id

    @property
    def lifecycle(self) -> str:
        """The query's lifecycle state (``spark_state_observer.model.query_lifecycle``), from its latest run and the crash-loop verdict."""
        gauges = self.signal_gauges
        crash_loop = gauges.get((catalog.QUERY_CRASH_LOOP, ()), 0.0) == 1.0
        scheduled = gauges.get((catalog.QUERY_SCHEDULED, ()), 0.0) == 1.0
        lost = gauges.get((catalog.QUERY_LOST, ()), 0.0) == 1.0
        return query_lifecycle.state_of(self.status, crash_loop, self.run_batches, scheduled, lost)

    @property
    def life(self) -> QueryLife:
        """The lifecycle state with what a lasting one keeps: the latest start and a schedule's interval."""
        gauges = self.signal_gauges
        return QueryLife(
            self.query_id,
            self.name,
            self.run_id,
            self.lifecycle,
            gauges.get((catalog.QUERY_LAST_START, ())),
            gauges.get((catalog.QUERY_SCHEDULE_INTERVAL, ())),
            gauges.get((catalog.QUERY_LOST_SINCE, ())),
        )

    @property
    def counters(self) -> dict[SeriesKey, float]:
        """The running totals by series, in the order the series were created."""
        self._write_back()
        return self._counters

    def add(self, spec: MetricSpec, labels: Labels, value: float | None) -> None:
        """Add to a counter; a zero creates it, so rate() and increase() see its first real increment."""
        if value is not None and value >= 0:
            self._settle()
            key = (spec, labels)
            self._counters[key] = self._counters.get(key, 0.0) + value

    def _write_back(self) -> None:
        """Bring ``_counters`` up to date with the operators' bulk totals."""
        for plan, totals in self._blocks.items():
            self._counters.update(zip(plan.keys, totals))

    def _settle(self) -> None:
        """Write back and drop the bulk totals before ``_counters`` is changed otherwise; ``_accumulate``
        builds them again from it."""
        self._write_back()
        self._blocks.clear()


@functools.lru_cache(maxsize=4096)  # every rule asks for them per operator and batch; names come from the job: bounded
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
            if type(event) is QueryProgress or isinstance(event, QueryProgress):  # nearly every event: asked first
                record.run_batches = record.run_batches + 1 if record.run_id == event.run_id else 1
                record.run_id, record.status = event.run_id, kinds.ACTIVE
                record.name = event.name or record.name
                record.last_progress = event
                self._admit_labels(record, event)
                _accumulate(record, event)
            elif isinstance(event, QueryStarted):
                record.starts += 1
                record.run_id, record.status, record.exception = event.run_id, kinds.ACTIVE, None
                record.run_batches = 0
                record.name = event.name or record.name
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
        (``query_id`` None) are kept apart from every query. About 18 updates a progress event: the loop
        keeps its state in locals, and looks up a query and checks an operator's labels only when they change.
        """
        with self._lock:
            looked_up: object = _NOBODY  # an event's updates are all of its query: looked up once
            record: QueryRecord | None = None
            gauges: dict[SeriesKey, float] = {}
            checked: Labels | None = None  # a rule sets several series of one operator: its labels are checked once
            allowed = False
            # What changed of ``record``: it draws one new version when its updates end, not one per series
            # (the exporters only ask whether a version differs: one number or several, they re-render alike).
            changed = state_changed = False
            for spec, labels, value, query_id in updates:
                if query_id is not looked_up and query_id != looked_up:
                    if query_id is None:
                        self._apply_app(spec, labels, value)
                        continue
                    if changed:
                        self._new_version(record, state_changed)  # type: ignore[arg-type]
                        changed = state_changed = False
                    looked_up, record, checked = query_id, self._queries.get(query_id), None
                    if record is not None:
                        gauges = record.signal_gauges
                if record is None:
                    continue
                if labels is not checked:  # the budget does not change while updates are applied
                    checked, allowed = labels, record.labels.allows(labels)
                if not allowed:
                    continue
                key = (spec, labels)
                if spec.kind == COUNTER:
                    amount = value or 0.0
                    if spec in BULK_SPECS:  # never so far: the signals count in series of their own
                        record._settle()
                    counters = record._counters
                    if amount or key not in counters:
                        counters[key] = counters.get(key, 0.0) + amount
                        changed = state_changed = True
                    continue
                before = gauges.get(key)
                if value is None:
                    if before is None:
                        continue
                    del gauges[key]
                else:
                    gauges[key] = value
                    if before == value and type(before) is type(value):  # ticks mostly re-set the same value: nothing to re-render
                        continue
                changed = True
                # a verdict the lifecycle state reads (a tick may set one: a driver lost): the state's series too
                if not state_changed and spec in _LIFECYCLE_GAUGES:
                    state_changed = True
            if changed:
                self._new_version(record, state_changed)  # type: ignore[arg-type]

    def _new_version(self, record: QueryRecord, state_changed: bool) -> None:
        """A new version for a record whose metrics changed (and a new state version, if more than its signal gauges did)."""
        record.version = next(self._versions)
        if state_changed:
            record.state_version = record.version

    def _apply_app(self, spec: MetricSpec, labels: Labels, value: float | None) -> None:
        key = (spec, labels)
        if spec.kind == COUNTER:
            self._app[key] = self._app.get(key, 0.0) + (value or 0.0)
        elif value is None:
            self._app.pop(key, None)
        else:
            self._app[key] = value

    def _admit_labels(self, record: QueryRecord, p: QueryProgress) -> None:
        """Admit this batch's label values to the query's budget; drop the series of values it displaces."""
        record.batches_seen += 1
        budget, before = record.labels, record.labels.dropped
        names = _names(p)
        if record._uses is not None and record._uses[0] == names:  # the names of the previous batch: its uses
            uses = record._uses[1]
        else:
            uses = _uses(p)
            record._uses = (names, uses)
        evicted = budget.admit_batch(uses, record.batches_seen)
        if evicted:
            gone = set(evicted)
            record._settle()
            for series in (record._counters, record.signal_gauges):
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

    def open_runs(self) -> list[tuple[str, str]]:
        """``(query_id, run_id)`` of every query whose latest run has not terminated (active or idle)."""
        with self._lock:
            return [
                (r.query_id, r.run_id) for r in self._queries.values() if r.run_id is not None and r.status in (kinds.ACTIVE, kinds.IDLE)
            ]

    def lifecycles(self) -> list[QueryLife]:
        """Every query's lifecycle state, without copying records (the watcher reads it after each round)."""
        with self._lock:
            return [r.life for r in self._queries.values()]

    def totals(self, query_id: str) -> QueryTotals | None:
        """A copy of ``query_id``'s running totals (None: not kept here)."""
        with self._lock:
            r = self._queries.get(query_id)
            return None if r is None else QueryTotals(r.starts, dict(r.terminations), dict(r.counters))

    def inherit(self, query_id: str, base: QueryTotals) -> None:
        """Add ``base`` (the totals of the applications that ran the query before this one) to ``query_id``'s
        totals, so that its counters go on from there instead of starting again: a series without the application
        id (``spark_state_observer.model.identity``) that read 1 in each new application made ``increase()`` over a
        crash loop of many applications see one restart."""
        with self._lock:
            r = self._queries.get(query_id)
            if r is None:
                return
            r.starts += base.starts
            for outcome, n in base.terminations.items():
                r.terminations[outcome] = r.terminations.get(outcome, 0) + n
            r._settle()
            for key, value in base.counters.items():
                r._counters[key] = r._counters.get(key, 0.0) + value
            self._new_version(r, True)

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


_Names = tuple[tuple[str, ...], tuple[tuple[int, str, tuple[str, ...]], ...], OperatorNames]


def _names(p: QueryProgress) -> _Names:
    """Every name of a batch that ``_uses`` reads: its phases, its sources' and its operators' names and metric keys."""
    return (
        tuple(p.duration_ms),
        tuple([(src.index, src.description, tuple(src.metrics)) for src in p.sources]),
        # map, not an inner list comprehension: that makes a function and calls it for every operator
        tuple([(op.index, op.name, tuple(op.custom), tuple(map(_PREFIX, op.instances))) for op in p.operators]),
    )


_PREFIX = operator.attrgetter("prefix")


def _uses(p: QueryProgress) -> list[tuple[str, str]]:
    """The label values a batch uses, in order (``LabelBudget.admit_batch``): never changed once made."""
    uses = [(PHASE, phase) for phase in p.duration_ms]
    for src in p.sources:
        uses.append((SOURCE, source_labels(src.index, src.description)[1][1]))
        uses += [(METRIC, key) for key in src.metrics if key not in catalog.KAFKA_LAG_KEYS]
    for op in p.operators:
        uses.append((OPERATOR, op.name))
        uses += _unknown_custom(tuple(op.custom))
        if op.instances:
            uses += [(METRIC, prefix) for prefix in {m.prefix for m in op.instances} - catalog.KNOWN_INSTANCE_PREFIXES]
    return uses


def _copy_record(r: QueryRecord) -> QueryRecord:
    clone = copy.copy(r)
    clone.terminations = dict(r.terminations)
    clone._counters = dict(r.counters)
    clone._blocks = {}
    clone._plans, clone._plans_generation, clone._uses, clone._plan = {}, -1, None, None
    clone.signal_gauges = dict(r.signal_gauges)
    clone.labels = r.labels.copy()
    return clone


def _accumulate(record: QueryRecord, p: QueryProgress) -> None:
    """Add this batch's per-batch amounts to the record's ``_total`` counters.

    The hot path of ingest (~80 counters per event of a two-operator RocksDB query). The phases' and the
    operators' series keys, scales and value getters come from one plan per batch shape (``_plan_of``: by
    the names object while the names repeat), and their amounts are added to one block of bulk totals in
    one step when every one is addable; else (a new shape, a None or negative amount) phase by phase and
    operator by operator (``add_amounts``), where a zero is added only where it creates the series.
    """
    counters = record._counters
    add_amount(counters, _BATCHES_KEY, 1.0)
    if p.batch_duration_ms is not None:
        add_amount(counters, _BATCH_SECONDS_KEY, p.batch_duration_ms * catalog.BATCH_SECONDS.scale)
    add_amount(counters, _INPUT_ROWS_KEY, p.input_rows)
    allows = record.labels.allows  # the query's label budget: a value it dropped or refused makes no series
    plan = _plan_of(record, record._uses[0] if record._uses is not None else _names(p))  # _admit_labels named p
    block = plan.block
    totals = record._blocks.get(block)
    bulk = False
    if totals is not None:
        values: list[float | None] = list(p.duration_ms.values()) if plan.phases else []
        operators = p.operators
        for position, keys in zip(plan.positions, block.custom_keys):
            op = operators[position]
            values += FIELDS(op)
            values += map(op.custom.__getitem__, keys)
        if addable(values):
            totals[:] = map(operator.add, totals, map(operator.mul, values, block.scales))  # no None: addable
            bulk = True
    if not bulk:
        record._settle()  # a new plan (first batch, other names), or values to take one by one
    if p.duration_ms and not (bulk and plan.phases):
        phase_keys, phase_labels, phase_scales = phase_plan(tuple(p.duration_ms))
        if all(map(allows, phase_labels)):
            add_amounts(counters, phase_keys, list(p.duration_ms.values()), phase_scales)
        else:
            for key, ms in zip(phase_keys, p.duration_ms.values()):
                if allows(key[1]):
                    add_amount(counters, key, ms * catalog.PHASE_SECONDS.scale)
    for src in p.sources:
        labels = source_labels(src.index, src.description)
        if allows(labels):
            add_amount(counters, (catalog.SOURCE_INPUT_ROWS, labels), src.input_rows)
    if p.sink is not None:
        add_amount(counters, _SINK_OUTPUT_ROWS_KEY, p.sink.output_rows)
    if not bulk:
        _add_operators(record, p.operators, plan)


def _plan_of(record: QueryRecord, names: _Names) -> BatchPlan:
    """The plan of a batch named ``names``: the latest batch's when its names are the same object (the label
    uses' memo keeps them while they repeat), else from the query's plans, decided again whenever the label
    budget's values change (``LabelBudget.generation``)."""
    budget = record.labels
    if record._plans_generation != budget.generation:  # a label value came or went: decide again
        record._plans.clear()
        record._plans_generation, record._plan = budget.generation, None
    if record._plan is not None and record._plan[0] is names:
        return record._plan[1]
    shape = (names[0], names[2])
    plans = record._plans
    found = plans.get(shape)
    if found is None:
        if len(plans) >= MAX_SHAPES:  # names that change every batch: start over rather than grow
            plans.clear()
        found = plans[shape] = batch_plan(names[0], names[2], budget.allows)
    record._plan = (names, found)
    return found


def _add_operators(record: QueryRecord, operators: tuple[OperatorProgress, ...], plan: BatchPlan) -> None:
    """The operators' counters one operator at a time (``add_amounts``, in the event's order of custom metrics),
    after which the batch's block holds the bulk totals, when every series of it exists.

    The bulk path (``_accumulate``) adds every phase's and allowed operator's amounts in one step when all
    are addable: what ``add_amounts`` adds per phase and operator, since each series is in the block once."""
    counters = record._counters
    for position, op_plan in zip(plan.positions, plan.ops):
        op = operators[position]
        custom = op.custom
        add_amounts(counters, op_plan.keys, [*op_plan.fields(op), *map(custom.__getitem__, op_plan.custom_keys)], op_plan.scales)
    block = plan.block
    if block.unique and all(map(counters.__contains__, block.keys)):
        record._blocks[block] = list(map(counters.__getitem__, block.keys))


_BATCHES_KEY: SeriesKey = (catalog.BATCHES, ())
_BATCH_SECONDS_KEY: SeriesKey = (catalog.BATCH_SECONDS, ())
_INPUT_ROWS_KEY: SeriesKey = (catalog.INPUT_ROWS, ())
_SINK_OUTPUT_ROWS_KEY: SeriesKey = (catalog.SINK_OUTPUT_ROWS, ())


@functools.lru_cache(maxsize=1024)  # keyed by every name of an operator's custom metrics: ~4 kB an entry at most
def _unknown_custom(custom: tuple[str, ...]) -> list[tuple[str, str]]:
    """The label values an operator's custom metrics named ``custom`` use: the keys the catalog does not know."""
    return [(METRIC, key) for key in custom if key not in catalog.CUSTOM_BY_KEY]
