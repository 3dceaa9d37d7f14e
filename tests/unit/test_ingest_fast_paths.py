"""The ingest shortcuts of issue 17 against the paths they replace, on every recorded run.

- Operator counters added in bulk (``tracker._accumulate``'s per-operator blocks, written back on read): the
  counters read after every event, and read only at the end, equal field-by-field adds at every step, also
  when an amount is negative, missing or not finite, or an operator's metric names change mid-run.
- Label budgets (``LabelBudget.admit_batch``): a batch that repeats the previous one's values is not admitted
  value by value; the kept values, their order and last use, the count dropped and ``allows`` equal admitting
  every value, over the budgets too (values displaced and refused); ``allows``, memoized, answers as computed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from recorded_progress import recorded_runs
from test_tracker_accumulate import _changing_names, _reference

from spark_state_observer.metrics import tracker as tracker_module
from spark_state_observer.metrics.labels import LabelBudget
from spark_state_observer.metrics.tracker import QueryTracker
from spark_state_observer.model.events import QueryProgress


def _odd(events: list[QueryProgress]) -> list[QueryProgress]:
    """The recorded events with, every few batches, an operator whose amounts the bulk path must not take: a
    negative amount, a missing one, a NaN, an infinity, a metric name more or one less (a new plan), the names
    in another order, then as sent."""
    out = []
    for n, p in enumerate(events):
        if not p.operators or n % 5 == 0:
            out.append(p)
            continue
        op = p.operators[0]
        custom = dict(op.custom)
        kind = n % 7
        if n % 3 == 0:  # the same names in another order (Spark sends them so at times): the same bulk totals
            custom = dict(reversed(custom.items()))
        if kind == 1:
            op = dataclasses.replace(op, rows_updated=-1.0)
        elif kind == 2:
            op = dataclasses.replace(op, rows_removed=None)
        elif kind == 3 and custom:
            custom[next(iter(custom))] = math.nan
        elif kind == 4:
            op = dataclasses.replace(op, commit_ms=math.inf)
        elif kind == 5:
            custom["rocksdbGetCount"] = 3.0 if "rocksdbGetCount" not in custom else custom.pop("rocksdbGetCount") * 0
        elif kind == 6 and custom:
            custom.pop(next(reversed(custom)))
        out.append(dataclasses.replace(p, operators=(dataclasses.replace(op, custom=custom), *p.operators[1:])))
    return out


def _counters_at_every_step(events: list[QueryProgress], read_each: bool) -> list[Any]:
    tracker = QueryTracker()
    steps: list[Any] = []
    for event in events:
        tracker.apply(event)
        if read_each:  # what a scrape reads: copies, made after writing the bulk totals back
            steps.append([(r.query_id, list(r.counters.items())) for r in tracker.snapshot()])
    steps.append([(r.query_id, list(r.counters.items())) for r in tracker.snapshot()])
    return steps


@pytest.mark.parametrize("odd", [False, True], ids=["as recorded", "odd amounts"])
def test_bulk_operator_counters_equal_field_by_field_adds_at_every_step(monkeypatch: pytest.MonkeyPatch, odd: bool) -> None:
    runs = [(path, _odd(events) if odd else events) for path, events in recorded_runs()]
    fast = {path: (_counters_at_every_step(events, True), _counters_at_every_step(events, False)) for path, events in runs}
    monkeypatch.setattr(tracker_module, "_accumulate", _reference)
    for path, events in runs:
        want = _counters_at_every_step(events, True)
        read_each, read_at_end = fast[path]
        assert read_each == want, path  # same series, values and order after every event
        assert read_at_end[-1] == want[-1], path


def _per_value(self: LabelBudget, uses: list[tuple[str, str]], batch: int) -> list[tuple[str, str]]:
    """``admit_batch`` as it was: every value admitted in turn."""
    displaced = []
    for label, value in uses:
        _, evicted = self.admit(label, value, batch)
        if evicted is not None:
            displaced.append((label, evicted))
    return displaced


def _budget_steps(events: list[QueryProgress]) -> list[Any]:
    tracker, steps = QueryTracker(), []
    seen: set[tuple[tuple[str, str], ...]] = set()  # every label set of a series so far, and every value alone
    for event in events:
        record = tracker.apply(event)
        budget = record.labels.copy()  # a copy writes the last use of a repeated batch's values
        seen |= {labels for _, labels in record.counters}
        seen |= {(pair,) for _, labels in record.counters for pair in labels}
        label_sets = sorted(seen)  # asked at every step: a value displaced or admitted later must change the answer
        assert [record.labels.allows(labels) for labels in label_sets] == [record.labels._allows(labels) for labels in label_sets]
        steps.append(
            (
                {name: list(values.items()) for name, values in budget._values.items()},  # values, order and last use
                record.labels.dropped,
                tracker.label_values_dropped,
                [record.labels.allows(labels) for labels in label_sets],
                list(record.counters.items()),
            )
        )
    return steps


def test_a_repeated_batch_admits_as_every_value_admitted(monkeypatch: pytest.MonkeyPatch) -> None:
    # a wide batch repeated: with values refused the shortcut must not apply (the next batch displaces instead)
    wide = _changing_names(30)
    repeated = [event for event in wide for _ in range(2)]
    runs = [events for _, events in recorded_runs()] + [_changing_names(120), repeated]
    fast = [_budget_steps(events) for events in runs]
    monkeypatch.setattr(LabelBudget, "admit_batch", _per_value)
    for events, got in zip(runs, fast):
        assert got == _budget_steps(events)
    assert any(step[1] > 0 for step in fast[-1]) and any(step[1] > 0 for step in fast[-2])  # over the budgets: not vacuous
