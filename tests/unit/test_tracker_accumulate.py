"""The tracker's per-batch counters (its cached-key fast path) against ``QueryRecord.add`` applied field by field,
gated by the query's label budget as the tracker did before its fast path."""

from __future__ import annotations

import dataclasses
import glob
import json
import os

import pytest

from conftest import FIXTURES
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics import tracker as tracker_module
from spark_state_observer.metrics.catalog import COUNTER
from spark_state_observer.metrics.labels import DEFAULT_LIMITS, OPERATOR, PHASE, SOURCE
from spark_state_observer.metrics.tracker import QueryRecord, QueryTracker, operator_labels, source_labels
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.model.fields import OPERATOR_FIELDS
from spark_state_observer.model.parse import parse_progress


def _reference(record: QueryRecord, p: QueryProgress) -> None:
    """What every batch adds, one ``add`` per value where the label budget allows, as the tracker did before its fast path."""
    allows = record.labels.allows
    record.add(catalog.BATCHES, (), 1.0)
    if p.batch_duration_ms is not None:
        record.add(catalog.BATCH_SECONDS, (), p.batch_duration_ms * catalog.BATCH_SECONDS.scale)
    record.add(catalog.INPUT_ROWS, (), p.input_rows)
    for phase, ms in p.duration_ms.items():
        if allows((("phase", phase),)):
            record.add(catalog.PHASE_SECONDS, (("phase", phase),), ms * catalog.PHASE_SECONDS.scale)
    for src in p.sources:
        if allows(source_labels(src.index, src.description)):
            record.add(catalog.SOURCE_INPUT_ROWS, source_labels(src.index, src.description), src.input_rows)
    if p.sink is not None:
        record.add(catalog.SINK_OUTPUT_ROWS, (), p.sink.output_rows)
    custom_counters = {s.key: s for s in catalog.CUSTOM_METRICS if s.kind == COUNTER}
    for op in p.operators:
        labels = operator_labels(op.index, op.name)
        if not allows(labels):
            continue
        for spec in catalog.OPERATOR_METRICS:
            if spec.kind == COUNTER:
                value = getattr(op, OPERATOR_FIELDS[spec.key])
                record.add(spec, labels, None if value is None else value * spec.scale)
        for key, value in op.custom.items():
            if key in custom_counters:
                record.add(custom_counters[key], labels, value * custom_counters[key].scale)


def test_counters_equal_field_by_field_adds_on_every_recorded_run() -> None:
    files = sorted(glob.glob(os.path.join(FIXTURES, "**", "progress.jsonl"), recursive=True))
    assert len(files) >= 20
    for path in files:
        with open(path) as f:
            events = [parse_progress(json.loads(line)) for line in f if line.strip()]
        tracker = QueryTracker()
        expected: dict[str, QueryRecord] = {}
        for event in events:
            tracker.apply(event)
            reference = expected.setdefault(event.query_id, QueryRecord(event.query_id))
            tracker._admit_labels(reference, event)  # the same budget (nothing is over it in these runs)
            _reference(reference, event)
        for query_id, reference in expected.items():
            record = tracker.get(query_id)
            assert record is not None
            assert list(record.counters.items()) == list(reference.counters.items()), path  # same series, values and order


def _changing_names(batches: int) -> list[QueryProgress]:
    """A recorded query whose phase, source and operator names change every batch (with some recurring), every third
    batch with 40 phases and 40 sources: over every budget, values displaced and refused."""
    with open(os.path.join(FIXTURES, "rocksdb_restart", "run1", "progress.jsonl")) as f:
        recorded = [parse_progress(json.loads(line)) for line in f if line.strip()]
    out = []
    for n in range(batches):
        p = recorded[n % len(recorded)]
        wide = n % 3 == 0  # more values in one batch than the budget holds: the newest are refused
        phases = {f"p{n}-{k}": 10.0 + k for k in range(40)} if wide else {f"{phase}{n % 45}": ms for phase, ms in p.duration_ms.items()}
        sources = (
            tuple(dataclasses.replace(p.sources[0], index=k, description=f"src{n}-{k}[opts]") for k in range(40))
            if wide
            else tuple(dataclasses.replace(s, description=f"src{n % 50}-{s.index}[opts]") for s in p.sources)
        )
        out.append(
            dataclasses.replace(
                p,
                batch_id=n,
                duration_ms=phases,
                sources=sources,
                operators=tuple(dataclasses.replace(op, name=f"{op.name}{n % 90}") for op in p.operators),
            )
        )
    return out


def test_the_label_budget_keeps_and_drops_the_same_series_as_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the budgets (phases, sources, operators renamed every batch), the fast path keeps exactly the
    series the reference keeps, with the same values and the same count of dropped label values."""
    events = _changing_names(400)
    fast = QueryTracker()
    for event in events:
        fast.apply(event)
    monkeypatch.setattr(tracker_module, "_accumulate", _reference)
    reference = QueryTracker()
    for event in events:
        reference.apply(event)
    query_id = events[0].query_id
    got, want = fast.get(query_id), reference.get(query_id)
    assert got is not None and want is not None
    assert list(got.counters.items()) == list(want.counters.items())
    assert fast.label_values_dropped == reference.label_values_dropped > 0
    # the budgets were at their limits, so values were dropped and refused, and the series show it
    for label in (PHASE, SOURCE, OPERATOR):
        assert got.labels.size(label) == DEFAULT_LIMITS[label]
        values = {v for (_, labels) in got.counters for name, v in labels if name == label}
        assert values and len(values) <= DEFAULT_LIMITS[label]


def test_a_negative_or_missing_amount_creates_no_series_and_a_zero_does() -> None:
    base = parse_progress(
        json.loads(open(sorted(glob.glob(os.path.join(FIXTURES, "rocksdb_restart", "run1", "progress.jsonl")))[0]).readline())
    )
    op = base.operators[0]
    odd = QueryProgress(
        **{
            **base.__dict__,
            "operators": (
                type(op)(**{**op.__dict__, "rows_updated": -1.0, "rows_removed": None, "custom": {**op.custom, "rocksdbGetCount": 0.0}}),
            ),
        }
    )
    tracker, reference = QueryTracker(), QueryRecord(base.query_id)
    tracker.apply(odd)
    tracker._admit_labels(reference, odd)
    _reference(reference, odd)
    record = tracker.get(base.query_id)
    assert record is not None and record.counters == reference.counters
    labels = operator_labels(op.index, op.name)
    rows_updated = next(s for s in catalog.OPERATOR_METRICS if s.key == "numRowsUpdated")
    get_count = next(s for s in catalog.CUSTOM_METRICS if s.key == "rocksdbGetCount")
    assert (rows_updated, labels) not in record.counters and record.counters[(get_count, labels)] == 0.0
