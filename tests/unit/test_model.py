"""The normalized model on progress recorded from real runs, and on bad input of every kind."""

from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import fixture_runs, progress_lines
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.metrics import catalog
from spark_state_observer.model.parse import MalformedEvent, parse_event, parse_progress
from spark_state_observer.settings import Settings

RECORDED = [p for run in fixture_runs() for p in progress_lines(run)]
KNOWN_OPERATORS = {
    "stateStoreSave",
    "dedupe",
    "dedupeWithinWatermark",
    "symmetricHashJoin",
    "sessionWindowStateStoreSaveExec",
    "flatMapGroupsWithState",
    "transformWithStateExec",
    "transformWithStateInPandasExec",
    "globalLimit",
}


def test_every_recorded_progress_parses_without_problems() -> None:
    assert len(RECORDED) >= 15
    for raw in RECORDED:
        p = parse_progress(raw)
        assert p.problems == ()
        assert p.batch_id == raw["batchId"] and p.query_id == raw["id"] and p.run_id == raw["runId"]
        assert [o.name for o in p.operators] == [o["operatorName"] for o in raw["stateOperators"]]
        for op, raw_op in zip(p.operators, raw["stateOperators"]):
            assert op.name in KNOWN_OPERATORS
            assert op.rows_total == raw_op["numRowsTotal"] and op.memory_bytes == raw_op["memoryUsedBytes"]
        assert p.duration_ms["triggerExecution"] == raw["durationMs"]["triggerExecution"]


def test_registry_types_every_custom_metric_spark_reported() -> None:
    """A custom metric Spark emits that the registry does not know shows up here first."""
    seen = {k for raw in RECORDED for op in raw["stateOperators"] for k in op.get("customMetrics", {})}
    unknown = {k for k in seen if k not in catalog.CUSTOM_BY_KEY and not k.startswith("SnapshotLastUploaded.")}
    assert unknown == set()
    assert any(k.startswith("rocksdb") for k in seen) and "loadedMapCacheMissCount" in seen


def test_minus_one_snapshot_sentinel_is_absent_not_a_value() -> None:
    raws = [
        r
        for r in RECORDED
        if any(
            v == -1 for op in r["stateOperators"] for k, v in op.get("customMetrics", {}).items() if k.startswith("SnapshotLastUploaded.")
        )
    ]
    assert raws, "recorded runs should include a batch before the first snapshot upload"
    p = parse_progress(raws[0])
    values = [m.value for op in p.operators for m in op.instances]
    assert None in values and all(v is None or v >= 0 for v in values)


def test_dsv1_sink_minus_one_is_absent() -> None:
    raw = copy.deepcopy(RECORDED[-1])
    raw["sink"]["numOutputRows"] = -1
    assert parse_progress(raw).sink.output_rows is None


@pytest.mark.parametrize(
    "payload, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be an object"),
        ('{"runId": "r", "batchId": 1}', "'id'"),
        ('{"id": "q", "runId": "r", "batchId": -3}', "batchId"),
        ('{"id": "q", "runId": "r", "batchId": "7"}', "batchId"),
        (b"\xff\xfe", "not valid JSON"),
        (12, "JSON text or an object"),
    ],
)
def test_malformed_progress_gets_a_clear_error(payload: object, message: str) -> None:
    with pytest.raises(MalformedEvent, match=message):
        parse_event("progress", payload)  # type: ignore[arg-type]


def test_truncated_real_event_is_malformed() -> None:
    text = json.dumps(RECORDED[-1])
    with pytest.raises(MalformedEvent, match="not valid JSON"):
        parse_event("progress", text[: len(text) // 2])


def test_wrong_types_and_nan_lose_the_field_not_the_event() -> None:
    raw = copy.deepcopy(RECORDED[-1])
    raw["numInputRows"] = "many"
    raw["stateOperators"][0]["memoryUsedBytes"] = float("nan")
    raw["stateOperators"][0]["customMetrics"]["rocksdbGetCount"] = {"nested": 1}
    raw["durationMs"] = ["not", "a", "map"]
    raw["stateOperators"].append({"operatorName": "somethingNew", "numRowsTotal": 5, "customMetrics": {"brandNewMetric": 3}})
    p = parse_progress(raw)
    assert p.input_rows is None and p.operators[0].memory_bytes is None
    assert "rocksdbGetCount" not in p.operators[0].custom and p.duration_ms == {}
    assert p.operators[-1].name == "somethingNew" and p.operators[-1].custom == {"brandNewMetric": 3.0}
    assert len(p.problems) == 4


def test_huge_maps_are_truncated_and_reported() -> None:
    raw = copy.deepcopy(RECORDED[-1])
    raw["stateOperators"][0]["customMetrics"] = {f"m{i}": i for i in range(10_000)}
    p = parse_progress(raw)
    assert len(p.operators[0].custom) <= 256 and any("truncated" in x for x in p.problems)


def _mutations() -> st.SearchStrategy:
    junk = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=20),
        st.lists(st.integers(), max_size=3),
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    )
    return st.tuples(st.sampled_from(RECORDED), st.lists(st.tuples(st.integers(0, 10_000), junk), max_size=6), st.integers(0, 4000))


def _mutate(raw: dict, edits: list, cut: int) -> str:
    """Replace random leaves of a real progress with junk, then maybe truncate its text."""
    obj = copy.deepcopy(raw)
    paths: list[tuple[object, object]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for k in node:
                paths.append((node, k))
                walk(node[k])
        elif isinstance(node, list):
            for i in range(len(node)):
                paths.append((node, i))
                walk(node[i])

    walk(obj)
    for index, value in edits:
        parent, key = paths[index % len(paths)]
        try:
            parent[key] = value  # type: ignore[index]
        except (TypeError, IndexError):
            pass
    text = json.dumps(obj, allow_nan=True)
    return text[:cut] if cut < len(text) and cut % 3 == 0 else text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations())
def test_mutated_real_events_never_raise_anything_but_malformed(case: tuple) -> None:
    raw, edits, cut = case
    text = _mutate(raw, edits, cut)
    try:
        p = parse_event("progress", text)
    except MalformedEvent:
        return
    for op in p.operators:
        assert all(math.isfinite(v) for v in op.custom.values())


_OBSERVER = PrometheusObserver(Settings(http_enabled=False), serve=False)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["started", "progress", "idle", "terminated", "bogus"]),
    st.one_of(st.text(max_size=200), st.binary(max_size=200), st.none(), st.integers(), _mutations().map(lambda c: _mutate(*c))),
)
def test_observer_process_never_raises(kind: str, payload: object) -> None:
    before = sum(_OBSERVER.self_metrics.received.values())
    _OBSERVER.process(CapturedEvent(kind, payload, 0.0, 0.0))
    assert sum(_OBSERVER.self_metrics.received.values()) == before + 1
