"""The fast progress decoder (``observer.model.decode``) against the reference parser, on every recorded event and on hostile input.

The fast path may decline (the reference then reads the input), but whatever it returns must be exactly
what the reference returns, problems included (none).
"""

from __future__ import annotations

import copy
import glob
import json
import os
from typing import Any

import pytest

from conftest import FIXTURES
from observer.model import decode, kinds
from observer.model.parse import _FAST_RULES, MalformedEvent, parse_event, parse_progress, parse_timestamp
from observer.offline.eventlog import Record, read_records


def _recorded_texts() -> list[str]:
    """Every recorded progress as Spark's JSON text: progress.jsonl files and the progress events of every event log."""
    texts: list[str] = []
    for path in sorted(glob.glob(os.path.join(FIXTURES, "**", "progress.jsonl"), recursive=True)):
        with open(path) as f:
            texts.extend(line.rstrip("\n") for line in f if line.strip())
    for folder in sorted(glob.glob(os.path.join(FIXTURES, "**", "eventlog"), recursive=True)):
        for item in read_records([folder], progress_as_bytes=True):
            if isinstance(item, Record) and item.kind == kinds.PROGRESS:
                texts.append(item.payload.decode())
    return texts


RECORDED = _recorded_texts()


def _reference(obj: dict[str, Any]) -> Any:
    return parse_progress(obj)


def test_every_recorded_progress_decodes_fast_and_equals_the_reference() -> None:
    assert len(RECORDED) >= 500  # progress.jsonl of every run and the event logs' progress events
    for text in RECORDED:
        obj = json.loads(text)
        reference = _reference(obj)
        for payload in (text, text.encode(), obj):
            fast = decode.progress(payload, _FAST_RULES)
            assert fast is not None, f"declined a recorded event: {text[:120]}"
            assert fast == reference
            assert fast.problems == ()
            assert [o.custom for o in fast.operators] == [o.custom for o in reference.operators]  # and in the same order
            assert [list(o.custom) for o in fast.operators] == [list(o.custom) for o in reference.operators]
        assert dict(decode.progress(text, _FAST_RULES).raw) == obj  # type: ignore[union-attr]  # raw, decoded on demand
        assert obj == json.loads(text)  # the decoded object handed in is left as it was


def test_event_log_progress_lines_give_the_same_model_as_their_decoded_objects() -> None:
    folder = next(iter(sorted(glob.glob(os.path.join(FIXTURES, "rocksdb_restart", "run1", "eventlog")))))
    as_bytes = [i.payload for i in read_records([folder], progress_as_bytes=True) if isinstance(i, Record) and i.kind == kinds.PROGRESS]
    as_dicts = [i.payload for i in read_records([folder]) if isinstance(i, Record) and i.kind == kinds.PROGRESS]
    assert len(as_bytes) == len(as_dicts) > 0
    assert [parse_event(kinds.PROGRESS, b) for b in as_bytes] == [parse_progress(d) for d in as_dicts]
    assert [parse_timestamp(decode.stamp_fields(b)[0]) for b in as_bytes] == [parse_progress(d).timestamp for d in as_dicts]
    assert [decode.stamp_fields(b)[1] for b in as_bytes] == [d.get("batchDuration") for d in as_dicts]


def _mutations(base: dict[str, Any]) -> list[tuple[str, Any]]:
    """Hostile variants of a real progress object: wrong types, non-finite and out-of-range values, oversized maps."""
    op = base["stateOperators"][0]
    cases: list[tuple[str, Any]] = []

    def variant(what: str, change: Any) -> None:
        obj = copy.deepcopy(base)
        change(obj)
        cases.append((what, obj))

    variant("batchId negative", lambda o: o.update(batchId=-1))
    variant("batchId bool", lambda o: o.update(batchId=True))
    variant("batchId string", lambda o: o.update(batchId="3"))
    variant("id empty", lambda o: o.update(id=""))
    variant("id long", lambda o: o.update(id="x" * 201))
    variant("runId missing", lambda o: o.pop("runId"))
    variant("name number", lambda o: o.update(name=7))
    variant("name long", lambda o: o.update(name="n" * 2000))
    variant("timestamp garbage", lambda o: o.update(timestamp="yesterday"))
    variant("timestamp number", lambda o: o.update(timestamp=12))
    variant("batchDuration null", lambda o: o.update(batchDuration=None))
    variant("batchDuration absent", lambda o: o.pop("batchDuration", None))
    variant("batchDuration string", lambda o: o.update(batchDuration="12"))
    variant("batchDuration huge", lambda o: o.update(batchDuration=1e308 * 10))
    variant("numInputRows absent", lambda o: o.pop("numInputRows", None))
    variant("rates absent", lambda o: [o.pop(k, None) for k in ("inputRowsPerSecond", "processedRowsPerSecond")])
    variant("rate odd", lambda o: o.update(inputRowsPerSecond=0.05, processedRowsPerSecond=12.25))
    variant("durationMs list", lambda o: o.update(durationMs=[1, 2]))
    variant("durationMs string values", lambda o: o.update(durationMs={"triggerExecution": "12", "addBatch": "x"}))
    variant("durationMs huge", lambda o: o.update(durationMs={f"p{i}": i for i in range(300)}))
    variant("eventTime bad", lambda o: o.update(eventTime={"watermark": "soon"}))
    variant("eventTime list", lambda o: o.update(eventTime=["x"]))
    variant("stateOperators object", lambda o: o.update(stateOperators={"a": 1}))
    variant("operator not object", lambda o: o["stateOperators"].append(3))
    variant("many operators", lambda o: o.update(stateOperators=[copy.deepcopy(op) for _ in range(70)]))
    variant("operator name missing", lambda o: o["stateOperators"][0].pop("operatorName"))
    variant("operator name number", lambda o: o["stateOperators"][0].update(operatorName=5))
    variant("operator field string", lambda o: o["stateOperators"][0].update(numRowsTotal="5"))
    variant("operator field bool", lambda o: o["stateOperators"][0].update(numRowsTotal=False))
    variant("operator field null", lambda o: o["stateOperators"][0].update(numRowsTotal=None))
    variant("custom not object", lambda o: o["stateOperators"][0].update(customMetrics=[1]))
    variant("custom string value", lambda o: o["stateOperators"][0]["customMetrics"].update(rocksdbGetCount="x"))
    variant("custom null value", lambda o: o["stateOperators"][0]["customMetrics"].update(rocksdbGetCount=None))
    variant("custom long key", lambda o: o["stateOperators"][0]["customMetrics"].update({"k" * 300: 1, "k" * 301: 2}))
    variant("custom odd partition key", lambda o: o["stateOperators"][0]["customMetrics"].update({"x.partition_y": 1}))
    variant("custom too many", lambda o: o["stateOperators"][0]["customMetrics"].update({f"m{i}": i for i in range(400)}))
    variant("instances many", lambda o: o["stateOperators"][0]["customMetrics"].update(
        {f"SnapshotLastUploaded.partition_{i}_default": i - 5 for i in range(2000)}))
    variant("huge int", lambda o: o["stateOperators"][0]["customMetrics"].update(rocksdbGetCount=2**70))
    variant("sources not list", lambda o: o.update(sources="kafka"))
    variant("source not object", lambda o: o["sources"].append("x"))
    variant("source metrics", lambda o: o["sources"][0].update(metrics={"avgOffsetsBehindLatest": "3.0", "maxOffsetsBehindLatest": "inf",
                                                                           "note": "text"}))
    variant("many sources", lambda o: o.update(sources=[copy.deepcopy(o["sources"][0]) for _ in range(80)]))
    variant("sink not object", lambda o: o.update(sink="console"))
    variant("sink sentinel", lambda o: o.update(sink={"description": "x", "numOutputRows": -1}))
    variant("sink missing", lambda o: o.pop("sink", None))
    return cases


def test_hostile_progress_is_declined_or_read_exactly_as_the_reference_reads_it() -> None:
    base = json.loads(next(t for t in RECORDED if '"SnapshotLastUploaded.partition_' in t and '"sources":[{' in t.replace(" ", "")))
    declined = 0
    for what, obj in _mutations(base):
        text = json.dumps(obj)
        try:
            reference = parse_progress(json.loads(text))
        except MalformedEvent:
            reference = None
        for payload in (text, text.encode(), json.loads(text)):
            fast = decode.progress(payload, _FAST_RULES)
            if fast is None:
                declined += 1
                continue
            assert reference is not None, f"{what}: the fast path read what the reference rejects"
            assert fast == reference and fast.problems == (), what
        # the public entry point gives the reference's reading, problems and all
        try:
            assert parse_event(kinds.PROGRESS, text) == reference, what
            assert parse_event(kinds.PROGRESS, text).problems == reference.problems, what  # type: ignore[union-attr]
        except MalformedEvent:
            assert reference is None, what
    assert declined >= 20  # the wrong types, non-finite values and bounds above


@pytest.mark.parametrize("payload", [b"", b"{", b"[1,2]", b"null", b'{"batchId":1}', "\ud800", b"\xff\xfe", b"[" * 100_000])
def test_garbage_is_declined_and_the_reference_reports_it(payload: str | bytes) -> None:
    assert decode.progress(payload, _FAST_RULES) is None
    with pytest.raises(MalformedEvent):
        parse_event(kinds.PROGRESS, payload)


def test_json_the_typed_decoder_refuses_still_parses() -> None:
    """Python's json reads NaN (Jackson may write it); msgspec does not: the reference then reads the event."""
    text = '{"id":"a","runId":"b","batchId":1,"inputRowsPerSecond":NaN}'
    assert decode.progress(text, _FAST_RULES) is None
    event = parse_event(kinds.PROGRESS, text)
    assert event.batch_id == 1 and event.input_rows_per_second is None and event.problems  # type: ignore[union-attr]
