"""The tracker's per-shape caches (one operators' plan and bulk block per shape of the operators, the label
uses of a batch reused while its names repeat) against the reference adds, on recorded batches reshaped the
ways the caches must notice: custom metrics reordered, an operator twice, a counter gone, a name changed, and
reads of the counters (snapshots) in between."""

from __future__ import annotations

import dataclasses
import json
import os

from test_tracker_accumulate import _reference

from conftest import FIXTURES
from spark_state_observer.metrics import tracker as tracker_module
from spark_state_observer.metrics.tracker import QueryRecord, QueryTracker
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.model.parse import parse_progress


def _recorded() -> list[QueryProgress]:
    with open(os.path.join(FIXTURES, "rocksdb_restart", "run1", "progress.jsonl")) as f:
        return [parse_progress(json.loads(line)) for line in f if line.strip()]


def _reshaped(events: list[QueryProgress], rounds: int) -> list[QueryProgress]:
    """The recorded batches again and again, each round reshaped another way (and some rounds as recorded)."""
    out = []
    for n in range(rounds):
        for p in events:
            ops = list(p.operators)
            if n % 5 == 1 and ops:  # custom metrics in reverse order, as a busy run sent them every other batch
                ops = [dataclasses.replace(op, custom=dict(reversed(list(op.custom.items())))) for op in ops]
            elif n % 5 == 2 and ops:  # the same operator twice: its series get both amounts
                ops = [*ops, ops[0]]
            elif n % 5 == 3 and ops:  # a counter the operator stopped sending, and a renamed operator
                first = dict(ops[0].custom)
                first.pop(next(iter(first)), None)
                ops = [dataclasses.replace(ops[0], custom=first), *(dataclasses.replace(op, name=f"{op.name}_{n}") for op in ops[1:])]
            out.append(dataclasses.replace(p, operators=tuple(ops), batch_id=len(out)))
    return out


def test_counters_equal_the_reference_however_the_operators_are_reshaped() -> None:
    events = _reshaped(_recorded(), 12)
    tracker = QueryTracker()
    expected: dict[str, QueryRecord] = {}
    for n, event in enumerate(events):
        tracker.apply(event)
        reference = expected.setdefault(event.query_id, QueryRecord(event.query_id))
        tracker._admit_labels(reference, event)
        _reference(reference, event)
        if n % 7 == 0:  # a scrape in between: the bulk totals are written back and go on
            record = tracker.get(event.query_id)
            assert record is not None and list(record.counters.items()) == list(reference.counters.items()), n
    for query_id, reference in expected.items():
        record = tracker.get(query_id)
        assert record is not None and list(record.counters.items()) == list(reference.counters.items())
        snapshot = next(r for r in tracker.snapshot() if r.query_id == query_id)
        assert snapshot.counters == reference.counters and not snapshot._blocks and not snapshot._plans


def test_reordered_custom_metrics_keep_one_block_and_repeated_names_one_use_list() -> None:
    events = _recorded()
    steady = [e for e in events if len(e.operators) == 2][-1]
    flipped = dataclasses.replace(
        steady, operators=tuple(dataclasses.replace(op, custom=dict(reversed(list(op.custom.items())))) for op in steady.operators)
    )
    tracker = QueryTracker()
    blocks, uses = [], []
    order = [steady, steady, flipped, flipped, steady, flipped]
    for n, event in enumerate(order):
        tracker.apply(dataclasses.replace(event, batch_id=n))
        record = tracker.get(steady.query_id)
        assert record is not None and record._uses is not None
        blocks.append(next(iter(record._blocks)))
        uses.append(record._uses[1])
    assert all(block is blocks[1] for block in blocks[1:])  # one block for both orders, kept from the second batch on
    assert uses[1] is uses[0] and uses[3] is uses[2] and uses[4] is not uses[3]  # the previous batch's names: its list
    assert all(u == tracker_module._uses(event) for u, event in zip(uses, order))
