"""The tracker's per-batch counters (its cached-key fast path) against ``QueryRecord.add`` applied field by field."""

from __future__ import annotations

import glob
import json
import os

from conftest import FIXTURES
from observer.metrics import catalog
from observer.metrics.catalog import COUNTER
from observer.metrics.tracker import QueryRecord, QueryTracker, operator_labels, source_labels
from observer.model.events import QueryProgress
from observer.model.fields import OPERATOR_FIELDS
from observer.model.parse import parse_progress


def _reference(record: QueryRecord, p: QueryProgress) -> None:
    """What every batch adds, one ``add`` per value, as the tracker did before its fast path."""
    record.add(catalog.BATCHES, (), 1.0)
    if p.batch_duration_ms is not None:
        record.add(catalog.BATCH_SECONDS, (), p.batch_duration_ms * catalog.BATCH_SECONDS.scale)
    record.add(catalog.INPUT_ROWS, (), p.input_rows)
    for phase, ms in p.duration_ms.items():
        record.add(catalog.PHASE_SECONDS, (("phase", phase),), ms * catalog.PHASE_SECONDS.scale)
    for src in p.sources:
        record.add(catalog.SOURCE_INPUT_ROWS, source_labels(src.index, src.description), src.input_rows)
    if p.sink is not None:
        record.add(catalog.SINK_OUTPUT_ROWS, (), p.sink.output_rows)
    custom_counters = {s.key: s for s in catalog.CUSTOM_METRICS if s.kind == COUNTER}
    for op in p.operators:
        labels = operator_labels(op.index, op.name)
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
            _reference(expected.setdefault(event.query_id, QueryRecord(event.query_id)), event)
        for query_id, reference in expected.items():
            record = tracker.get(query_id)
            assert record is not None
            assert list(record.counters.items()) == list(reference.counters.items()), path  # same series, values and order


def test_a_negative_or_missing_amount_creates_no_series_and_a_zero_does() -> None:
    base = parse_progress(json.loads(open(sorted(glob.glob(os.path.join(FIXTURES, "rocksdb_restart", "run1", "progress.jsonl")))[0]).readline()))
    op = base.operators[0]
    odd = QueryProgress(**{**base.__dict__, "operators": (type(op)(**{**op.__dict__, "rows_updated": -1.0, "rows_removed": None,
                                                                     "custom": {**op.custom, "rocksdbGetCount": 0.0}}),)})
    tracker, reference = QueryTracker(), QueryRecord(base.query_id)
    tracker.apply(odd)
    _reference(reference, odd)
    record = tracker.get(base.query_id)
    assert record is not None and record.counters == reference.counters
    labels = operator_labels(op.index, op.name)
    rows_updated = next(s for s in catalog.OPERATOR_METRICS if s.key == "numRowsUpdated")
    get_count = next(s for s in catalog.CUSTOM_METRICS if s.key == "rocksdbGetCount")
    assert (rows_updated, labels) not in record.counters and record.counters[(get_count, labels)] == 0.0
