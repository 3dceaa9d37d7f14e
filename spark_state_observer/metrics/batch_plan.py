"""Where one batch's counters go: a plan per batch shape (the phases' and operators' series keys, scales and value
getters), cached, and the amounts added in bulk where every one is addable.

``spark_state_observer.metrics.tracker`` keeps the per-query plans and adds each batch through them: the hot path
of ingest (~80 counters per event of a two-operator RocksDB query), so the plans are built once per shape of
names and their blocks of totals are added in C loops.
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass
from typing import Callable

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import COUNTER, MetricSpec
from spark_state_observer.metrics.labels import PHASE
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.model.events import OperatorProgress
from spark_state_observer.model.fields import OPERATOR_FIELDS

SeriesKey = tuple[MetricSpec, Labels]
OperatorNames = tuple[tuple[int, str, tuple[str, ...], tuple[str, ...]], ...]  # index, name, custom metric keys, instance prefixes


@functools.lru_cache(maxsize=4096)  # names come from the job, and the label budget bounds them per query
def operator_labels(index: int, name: str) -> Labels:
    """An operator's labels, one tuple per operator: every rule sets its series, and the tracker checks an
    update's labels against the budget once while they are the same object (``apply_updates``). Cached, so
    the rules' updates of one operator carry the same object and the check is made once per operator."""
    return (("operator_index", str(index)), ("operator", name))


def add_amount(counters: dict[SeriesKey, float], key: SeriesKey, value: float | None) -> None:
    """``QueryRecord.add`` for a key already built."""
    if value is not None and value >= 0 and (value or key not in counters):
        counters[key] = counters.get(key, 0.0) + value


def add_amounts(
    counters: dict[SeriesKey, float], keys: tuple[SeriesKey, ...], values: list[float | None], scales: tuple[float, ...]
) -> None:
    """``add_amount(counters, key, value * scale)`` for each key, value and scale, in that order.

    In bulk (each step a C loop) when every series exists and every value is a finite number >= 0, where
    adding a zero changes nothing, so adding every amount gives what adding the positive ones gives; else
    value by value. Either way each total is ``total + value * scale``, the same float operations.
    """
    if addable(values):
        try:
            totals = list(map(counters.__getitem__, keys))  # all of them before any is written
        except KeyError:
            pass  # a series to create: value by value, in order, as the reference does
        else:
            counters.update(zip(keys, map(operator.add, totals, map(operator.mul, values, scales))))
            return
    for key, value, scale in zip(keys, values, scales):
        if value is not None:
            add_amount(counters, key, value * scale)


def addable(values: list[float | None]) -> bool:
    """Whether adding ``value * scale`` for every value gives what ``add_amount`` gives for each: no None, nothing
    negative, NaN or infinite (then a zero amount adds nothing to an existing total). C loops only."""
    try:
        return min(values, default=0.0) >= 0 and math.isfinite(sum(values))  # type: ignore[type-var,operator,arg-type]
    except TypeError:  # a None among them (compared with a number, or alone)
        return False


OPERATOR_COUNTERS = tuple((OPERATOR_FIELDS[s.key], s) for s in catalog.OPERATOR_METRICS if s.kind == COUNTER)
CUSTOM_COUNTERS = {s.key: s for s in catalog.CUSTOM_METRICS if s.kind == COUNTER}


@functools.lru_cache(maxsize=256)
def phase_key(phase: str) -> SeriesKey:
    return (catalog.PHASE_SECONDS, ((PHASE, phase),))


@functools.lru_cache(maxsize=256)
def phase_plan(phases: tuple[str, ...]) -> tuple[tuple[SeriesKey, ...], tuple[Labels, ...], tuple[float, ...]]:
    """The series keys of a batch's phases, in order, their labels and scales."""
    keys = tuple(phase_key(phase) for phase in phases)
    return keys, tuple(key[1] for key in keys), (catalog.PHASE_SECONDS.scale,) * len(keys)


@dataclass(frozen=True, eq=False)  # identity: plans are cached, and a block is found by its plan on the hot path
class OperatorPlan:
    """Where an operator's counters go: its labels, and per counter (fields first, then its custom metrics
    in the event's order) the series key and scale; ``fields`` reads the fields' values off the operator."""

    labels: Labels
    keys: tuple[SeriesKey, ...]
    scales: tuple[float, ...]
    fields: Callable[[OperatorProgress], tuple[float | None, ...]]
    custom_keys: tuple[str, ...]  # the custom metrics that are counters, in the event's order


BULK_SPECS = frozenset(spec for _, spec in OPERATOR_COUNTERS) | frozenset(CUSTOM_COUNTERS.values())
FIELDS = operator.attrgetter(*(attr for attr, _ in OPERATOR_COUNTERS))


@functools.lru_cache(maxsize=1024)  # keyed by every metric name of an operator (~4 kB an entry): bounded, names come from the job
def operator_plans(index: int, name: str, custom: tuple[str, ...]) -> tuple[OperatorPlan, OperatorPlan]:
    """The plans of an operator whose custom metrics are named ``custom``: in their order (series are created
    in it), and in sorted order for the bulk totals. Spark sends the same names every batch, but not always in
    the same order (a recorded busy run reordered them every other batch): the bulk totals are one block still."""
    counters = tuple(key for key in custom if key in CUSTOM_COUNTERS)
    return operator_plan(index, name, counters), operator_plan(index, name, tuple(sorted(counters)))


@dataclass(frozen=True, eq=False)  # identity: cached per set of operator plans, found by it on the hot path
class OperatorBlock:
    """The bulk totals of several operators in one list: their sorted plans' keys and scales end to end."""

    keys: tuple[SeriesKey, ...]
    scales: tuple[float, ...]
    custom_keys: tuple[tuple[str, ...], ...]  # per operator, its custom counters in the sorted plan's order
    unique: bool  # no series twice (two operators of the same index and name): else no block, add one by one


@dataclass(frozen=True)
class BatchPlan:
    """Where a batch of one shape adds its phases' and operators' counters: whether its phases are in the
    block (all of them allowed), the allowed operators' positions in the event and their plans (in the
    event's order of custom metrics), and the block their bulk totals share."""

    phases: bool
    positions: tuple[int, ...]
    ops: tuple[OperatorPlan, ...]
    block: OperatorBlock


MAX_SHAPES = 16  # per query: Spark sends one shape of names, or two (custom metrics in two orders)


def batch_plan(phases: tuple[str, ...], shape: OperatorNames, allows: Callable[[Labels], bool]) -> BatchPlan:
    """The plan of a batch with ``phases`` and operators named as in ``shape`` under ``allows``."""
    phase_keys, phase_labels, _ = phase_plan(phases)
    in_block = bool(phases) and all(map(allows, phase_labels))
    positions, ops, bulks = [], [], []
    for position, (index, name, custom, _) in enumerate(shape):
        plan, bulk = operator_plans(index, name, custom)
        if allows(plan.labels):
            positions.append(position)
            ops.append(plan)
            bulks.append(bulk)
    return BatchPlan(in_block, tuple(positions), tuple(ops), operator_block(phase_keys if in_block else (), tuple(bulks)))


@functools.lru_cache(maxsize=1024)  # keyed by phase keys and plans (identity), which are cached themselves: bounded
def operator_block(phase_keys: tuple[SeriesKey, ...], bulks: tuple[OperatorPlan, ...]) -> OperatorBlock:
    """One block for the phases' series ``phase_keys`` and the bulk plans ``bulks``: shared by every shape
    with the same phases and operators and names in any order, so custom metrics that Spark reorders every
    other batch keep one block."""
    keys = phase_keys + tuple(key for bulk in bulks for key in bulk.keys)
    return OperatorBlock(
        keys,
        (catalog.PHASE_SECONDS.scale,) * len(phase_keys) + tuple(scale for bulk in bulks for scale in bulk.scales),
        tuple(bulk.custom_keys for bulk in bulks),
        len(set(keys)) == len(keys),
    )


@functools.lru_cache(maxsize=1024)
def operator_plan(index: int, name: str, counters: tuple[str, ...]) -> OperatorPlan:
    """The plan of an operator whose custom metrics that are counters are named ``counters``, in that order."""
    labels = operator_labels(index, name)
    specs = [spec for _, spec in OPERATOR_COUNTERS] + [CUSTOM_COUNTERS[key] for key in counters]
    return OperatorPlan(labels, tuple((spec, labels) for spec in specs), tuple(spec.scale for spec in specs), FIELDS, counters)
