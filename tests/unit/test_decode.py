"""The fast progress decoder (``spark_state_observer.model.decode``) against the reference parser, on every recorded event and on hostile input.

The fast path may decline (the reference then reads the input), but whatever it returns must be exactly
what the reference returns, problems included (none).
"""

from __future__ import annotations

import copy
import dataclasses
import glob
import json
import os
from typing import Any

import pytest
from test_hostile import BASE, PROGRESS_EVENT, all_mutations, as_text, mutate, special_payloads

from conftest import FIXTURES
from spark_state_observer.model import decode, kinds
from spark_state_observer.model.events import InstanceMetric, QueryProgress, assemble
from spark_state_observer.model.parse import (
    _FAST_RULES,
    MalformedEvent,
    _rate,
    _rate_decimal,
    parse_event,
    parse_progress,
    parse_timestamp,
    parse_timestamp_memo,
)
from spark_state_observer.offline.eventlog import EventLogError, Record, read_records
from spark_state_observer.signals.kafka_offsets import KAFKA_PREFIX, kafka_sources


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
    variant(
        "instances many",
        lambda o: o["stateOperators"][0]["customMetrics"].update(
            {f"SnapshotLastUploaded.partition_{i}_default": i - 5 for i in range(2000)}
        ),
    )
    variant("huge int", lambda o: o["stateOperators"][0]["customMetrics"].update(rocksdbGetCount=2**70))
    variant("sources not list", lambda o: o.update(sources="kafka"))
    variant("source not object", lambda o: o["sources"].append("x"))
    variant(
        "source metrics",
        lambda o: o["sources"][0].update(metrics={"avgOffsetsBehindLatest": "3.0", "maxOffsetsBehindLatest": "inf", "note": "text"}),
    )
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


# --- the hostile corpus (tests/unit/test_hostile.py): wherever the hardened reference cleans, bounds or refuses,
# the fast path declines; wherever it keeps a value as it is, both read the same --------------------------


def _same_or_declined(payload: str | bytes | dict[str, Any], reference_text: str | None = None) -> bool:
    """Assert the fast path declines or equals the reference (parse_event's own path, hardened); True if it read it."""
    fast = decode.progress(payload, _FAST_RULES)
    try:
        reference = parse_event(kinds.PROGRESS, payload if reference_text is None else reference_text)
    except MalformedEvent:
        reference = None
    if fast is None:
        return False
    assert isinstance(reference, QueryProgress), f"the fast path read what the reference rejects: {str(payload)[:160]!r}"
    assert fast == reference and fast.problems == reference.problems == (), str(payload)[:160]
    assert [list(o.custom) for o in fast.operators] == [list(o.custom) for o in reference.operators]
    return True


def test_every_hostile_value_in_every_field_is_declined_or_read_as_the_hardened_reference_reads_it() -> None:
    read = declined = 0
    for path, value in all_mutations():
        obj = mutate(BASE, path, value)
        for text in (as_text(obj), as_text(obj, raw_unicode=True)):
            for payload in (text, json.loads(text)):
                if _same_or_declined(payload, text if isinstance(payload, dict) else None):
                    read += 1
                else:
                    declined += 1
    assert read > 1000 and declined > 1000  # both sides of the line are exercised, not only one


@pytest.mark.parametrize("text", special_payloads(), ids=lambda t: t[-40:])
def test_hostile_texts_are_declined_or_read_as_the_reference_reads_them(text: str) -> None:
    for payload in (text, text.encode("utf-8", "surrogatepass")):
        _same_or_declined(payload, text)


def _with(change: Any) -> dict[str, Any]:
    obj = copy.deepcopy(BASE)
    change(obj)
    return obj


def _op(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["stateOperators"][0]  # type: ignore[no-any-return]


# what the hardened parser would change (clean, cut, refuse, drop as non-finite): the fast path must decline
CHANGED_BY_THE_REFERENCE = {
    "lone surrogate in the query name": lambda o: o.update(name="q\ud800"),
    "control character in the query name": lambda o: o.update(name="q\x00\x1b[31m"),
    "DEL in the query name": lambda o: o.update(name="q\x7f"),
    "query name over 200": lambda o: o.update(name="n" * 201),
    "surrogate in the run id": lambda o: o.update(runId="r\udfff"),
    "control character in the id": lambda o: o.update(id="i\x01"),
    "control character in an operator name": lambda o: _op(o).update(operatorName="agg\x00"),
    "operator name over 100": lambda o: _op(o).update(operatorName="o" * 101),
    "surrogate in a custom metric key": lambda o: _op(o)["customMetrics"].update({"rocksdb\ud800": 1}),
    "control character in a store name": lambda o: _op(o)["customMetrics"].update({"SnapshotLastUploaded.partition_0_st\x1bore": 3}),
    "store name over 100": lambda o: _op(o)["customMetrics"].update({"SnapshotLastUploaded.partition_0_" + "s" * 101: 3}),
    "partition number over 18 digits": lambda o: _op(o)["customMetrics"].update(
        {"SnapshotLastUploaded.partition_" + "1" * 19 + "_default": 3}
    ),
    "partition number beyond Python's int-string limit": lambda o: _op(o)["customMetrics"].update(
        {"SnapshotLastUploaded.partition_" + "1" * 5000 + "_default": 3}
    ),
    "control character in a source description": lambda o: o["sources"][0].update(description="Kafka\x00[t]"),
    "source description over 200": lambda o: o["sources"][0].update(description="d" * 201),
    "surrogate in the sink description": lambda o: o.update(sink={"description": "s\ud800", "numOutputRows": 1}),
    "control character in a phase": lambda o: o["durationMs"].update({"walCommit\x07": 3}),
    "phase over 100": lambda o: o["durationMs"].update({"p" * 101: 3}),
    "control character in a source metric key": lambda o: o["sources"][0].update(metrics={"lag\x00": "3"}),
    "source metric key over 100": lambda o: o["sources"][0].update(metrics={"k" * 101: "3"}),
    "int beyond a double in a field": lambda o: o.update(numInputRows=10**400),
    "int beyond a double in a custom metric": lambda o: _op(o)["customMetrics"].update(rocksdbGetCount=10**400),
    "batch id beyond a long": lambda o: o.update(batchId=2**63),
    "batch id beyond an unsigned long": lambda o: o.update(batchId=2**64),
    "sources summing beyond a double": lambda o: [
        o.pop("numInputRows", None),
        o.update(sources=[{**o["sources"][0], "numInputRows": 1.5e308}, {**o["sources"][0], "numInputRows": 1.5e308}]),
    ],
    "time beyond year 9999": lambda o: o.update(eventTime={"watermark": "+275760-09-13T00:00:00Z"}),
}


@pytest.mark.parametrize("what", sorted(CHANGED_BY_THE_REFERENCE))
def test_whatever_the_hardened_reference_would_change_is_declined(what: str) -> None:
    obj = _with(CHANGED_BY_THE_REFERENCE[what])
    text = json.dumps(obj, ensure_ascii=True)
    for payload in (text, text.encode(), json.loads(text)):
        assert decode.progress(payload, _FAST_RULES) is None, what
    assert not _same_or_declined(text)  # and the reference reads (or rejects) it on its own


# what the hardened parser keeps as it is: the fast path reads it, the same
KEPT_BY_THE_REFERENCE = {
    "accented query name": lambda o: o.update(name="requête é" * 10),
    "astral character (a valid surrogate pair)": lambda o: o.update(name="q \U0001f600"),
    "tab and newline in a name": lambda o: o.update(name="a\tb\nc"),
    "query name of 200": lambda o: o.update(name="n" * 200),
    "largest batch id": lambda o: o.update(batchId=2**63 - 1),
    "int beyond a long, within a double": lambda o: _op(o)["customMetrics"].update(rocksdbGetCount=2**70),
    "largest double": lambda o: o.update(numInputRows=1.7976931348623157e308),
    "unicode store name": lambda o: _op(o)["customMetrics"].update({"SnapshotLastUploaded.partition_0_défaut": 3}),
}


@pytest.mark.parametrize("what", sorted(KEPT_BY_THE_REFERENCE))
def test_what_the_hardened_reference_keeps_is_read_fast_and_the_same(what: str) -> None:
    obj = _with(KEPT_BY_THE_REFERENCE[what])
    for text in (json.dumps(obj), json.dumps(obj, ensure_ascii=False)):
        for payload in (text, text.encode(), json.loads(text)):
            assert _same_or_declined(payload, text), what


def test_an_event_log_line_of_millions_of_items_is_refused_with_progress_as_bytes_too(tmp_path: Any) -> None:
    """The line-level guard (``bounded.loads``) holds when progress is cut out as bytes: same error, same place."""
    line = json.dumps({"Event": PROGRESS_EVENT, "progress": {**BASE, "x": [{}] * 1_200_000}}, separators=(",", ":"))
    path = tmp_path / "events.log"
    path.write_text(line + "\n" + json.dumps({"Event": PROGRESS_EVENT, "progress": BASE}) + "\n")
    for as_bytes in (False, True):
        items = list(read_records([str(path)], progress_as_bytes=as_bytes))
        assert isinstance(items[0], EventLogError) and "items" in str(items[0])
        assert isinstance(items[1], Record) and parse_event(kinds.PROGRESS, items[1].payload) == parse_progress(BASE)


def _placement_view(obj: Any) -> Any:
    """What placement's reader (``spark_state_observer.placement.tasks``) reads of a parsed progress line, or of the
    typed ids ``event_progress_ids`` gives (only for a progress event's line)."""
    if not isinstance(obj, dict):
        ops = obj.stateOperators
        return PROGRESS_EVENT, obj.id, obj.batchId, obj.name, None if ops is None else [op.operatorName for op in ops]
    progress = obj.get("progress")
    if not isinstance(progress, dict):
        return obj.get("Event"), progress
    ops = progress.get("stateOperators")
    names = [op.get("operatorName") if isinstance(op, dict) else op for op in ops] if isinstance(ops, list) else ops
    return obj.get("Event"), progress.get("id"), progress.get("batchId"), progress.get("name"), names


def test_placement_reads_the_same_ids_and_operator_names_from_a_progress_line() -> None:
    """``event_progress_ids`` (what the placement tap reads of a progress line) equals json.loads of the line, or declines."""
    lines = [json.dumps({"Event": PROGRESS_EVENT, "progress": json.loads(text)}).encode() for text in RECORDED]
    line = lines[-1].decode()
    lines += [
        line.replace('"stateOperators": [', '"stateOperators": [7, ').encode(),  # an operator that is no object
        line.replace('"stateOperators": [', '"stateOperators": {"a": [').replace("], ", "]}, ", 1).encode(),
        line.replace('"operatorName": "', '"operatorName": 5, "x": "', 1).encode(),
        line[:-1].encode() + b', "Event": "SparkListenerTaskEnd"}',  # a second Event key wins in json.loads
        line[:-1].encode() + b', "x": NaN}',
        line[:-2].encode(),
        b"{}",
        json.dumps({"Event": PROGRESS_EVENT, "progress": {"id": "\ud800", "batchId": 2**70, "name": None}}).encode(),
    ]
    read = 0
    for raw in lines:
        ids = decode.event_progress_ids(raw)
        if ids is None:
            continue
        read += 1
        assert _placement_view(ids) == _placement_view(json.loads(raw)), raw[-200:]
    assert read >= len(RECORDED)


def test_a_fast_event_tells_its_kafka_sources_without_its_raw_json() -> None:
    """The Kafka rule skips an event whose sources (as sent) name no Kafka source: the same answer as reading the raw JSON."""
    kafka = 0
    texts = RECORDED + [
        json.dumps({**BASE, "sources": [{**BASE["sources"][0], "description": d}]}) for d in ("KafkaV2[Subscribe[t]]", "kafka", None, "")
    ]
    for text in texts:
        fast = decode.progress(text, _FAST_RULES)
        assert fast is not None and decode.sources_as_sent(fast)
        named = any(s.description.startswith(KAFKA_PREFIX) for s in fast.sources)
        assert named == bool(kafka_sources(json.loads(text)))
        kafka += named
    assert kafka >= 2  # the Kafka recordings and the variant above
    assert not decode.sources_as_sent(parse_progress(BASE)) and not decode.sources_as_sent(decode.progress(BASE, _FAST_RULES))  # type: ignore[arg-type]


def _rates(obj: dict[str, Any]) -> list[float]:
    """Every rate of a progress object as Spark sent it: the query's and each source's."""
    found = [obj.get(key) for key in ("inputRowsPerSecond", "processedRowsPerSecond")]
    for source in obj.get("sources") or []:
        found += [source.get(key) for key in ("inputRowsPerSecond", "processedRowsPerSecond")]
    return [float(v) for v in found if isinstance(v, (int, float)) and not isinstance(v, bool)]


RATE_EDGES = [0.0, -0.0, 0.05, -0.05, 0.04999999999999999, 0.15, 0.25, 0.35, 1.45, 2.675, -2.675, 9.95, 99.95, -99.95, 0.1, 5.0]
RATE_EDGES += [1e-5, -1e-5, 5e-5, 1e-300, 123456789012345.67, 999999999999999.9, 9007199254740.993, 1e15 - 0.05, 4.35, 1e14 + 0.05]


def test_float_rate_rounding_is_the_decimal_reference_on_every_recorded_rate_and_edge() -> None:
    import random

    rates = [rate for text in RECORDED for rate in _rates(json.loads(text))]
    assert len(rates) >= 1000  # the event logs carry Spark's raw doubles, progress.jsonl the rounded ones
    generator = random.Random(17)  # doubles at every magnitude a rate has, and their rounded forms (ties in decimal)
    drawn = [generator.random() * 10 ** generator.randint(-8, 14) * generator.choice((1, -1)) for _ in range(100_000)]
    drawn += [round(value, generator.randint(0, 3)) for value in drawn]
    for value in rates + RATE_EDGES + drawn:
        assert repr(_rate(value)) == repr(_rate_decimal(value)), value  # repr: -0.0 stays -0.0
    assert _rate(None) is None and _rate(1e15) == 1e15 and _rate(-3e20) == -3e20


def test_the_memoized_trigger_time_is_parse_timestamp() -> None:
    stamps = [json.loads(text).get("timestamp") for text in RECORDED]
    for stamp in stamps + ["2026-11-21T22:19:17.166Z", "2026-11-21T22:19:17", "not a time", "", "0001-01-01T00:00:00+01:00", None]:
        assert parse_timestamp_memo(stamp) == parse_timestamp(stamp), stamp
        assert parse_timestamp_memo(stamp) == parse_timestamp(stamp)  # and from the memo, the second time


def _assembled(p: QueryProgress) -> list[Any]:
    return [p, *p.operators, *p.sources, *([p.sink] if p.sink is not None else [])]


def test_assembled_events_are_the_init_built_ones_field_by_field() -> None:
    """The decoder assembles its events (``events.assemble``): every field present, under its name, equal to
    what the reference parser's ``__init__`` built, raw ones included, and as frozen."""
    for text in RECORDED:
        fast = decode.progress(text, _FAST_RULES)
        reference = parse_progress(json.loads(text), raw_text=text)
        assert fast is not None
        for built, expected in zip(_assembled(fast), _assembled(reference), strict=True):
            assert type(built) is type(expected)
            names = [f.name for f in dataclasses.fields(expected)]
            assert sorted(vars(built)) == sorted(names)
            for name in names:
                if name != "raw":  # raw: a lazy view of the same JSON (compared in the test above)
                    assert getattr(built, name) == getattr(expected, name), name
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.batch_id = 0  # type: ignore[misc]
        for operator in fast.operators:
            with pytest.raises(dataclasses.FrozenInstanceError):
                operator.name = "x"  # type: ignore[misc]


def test_assemble_refuses_a_wrong_number_of_fields_and_hashes_as_init_does() -> None:
    metric = InstanceMetric("SnapshotLastUploaded", 3, "default", 7.0)
    assert assemble(InstanceMetric, dict(vars(metric))) == metric
    assert hash(assemble(InstanceMetric, dict(vars(metric)))) == hash(metric)
    with pytest.raises(TypeError):
        assemble(InstanceMetric, {"prefix": "SnapshotLastUploaded", "partition": 3, "store": "default"})
    with pytest.raises(TypeError):
        assemble(InstanceMetric, {**vars(metric), "extra": 1})
