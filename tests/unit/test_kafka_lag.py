"""Kafka lag in records and seconds, and source health, on the progress of a real Kafka restart.

The fixture (``scripts/record_kafka.py``): a real KRaft broker, a producer writing a 3-partition topic in
flushed bursts with known record timestamps, and a rate-limited windowed count that runs, stops while the
producer goes on, and restarts on the same checkpoint until it caught up. ``truth.json`` holds what the
producer wrote and when; the assertions compare the computation with it.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_broker import record_timestamp, truth_at

from conftest import FIXTURES, eventlog_dir, progress_lines
from spark_state_observer.metrics.catalog import COUNTER, KAFKA_METRICS, MetricSpec
from spark_state_observer.model.parse import parse_timestamp
from spark_state_observer.offline.eventlog import Record, read_records
from spark_state_observer.signals.kafka_lag import (
    CAUGHT_UP,
    EXTRAPOLATED,
    INTERPOLATED,
    LOWER_BOUND,
    KafkaLagTracker,
    KafkaSnapshot,
    OffsetHistory,
    metric_samples,
)
from spark_state_observer.signals.kafka_offsets import kafka_sources, lag_records, parse_offsets, progress_time, topic_totals

SCENARIO = os.path.join(FIXTURES, "kafka_restart")


def _truth() -> dict[str, Any]:
    with open(os.path.join(SCENARIO, "truth.json")) as f:
        return json.load(f)


def _has_latest(progress: dict) -> bool:
    ((_i, source),) = kafka_sources(progress)
    return source.get("latestOffset") is not None


def _runs() -> list[list[dict]]:
    return [progress_lines(os.path.join(SCENARIO, run)) for run in ("run1", "run2")]


def test_a_rerun_batch_has_no_lag() -> None:
    """Run 1 stopped after planning a batch it did not commit: run 2 re-runs it first, without latestOffset."""
    run1 = progress_lines(os.path.join(SCENARIO, "run1"))
    first2 = progress_lines(os.path.join(SCENARIO, "run2"))[0]
    if _has_latest(first2):
        pytest.skip("this recording stopped run 1 between batches: no batch was re-run")
    assert first2["batchId"] == run1[-1]["batchId"] + 1
    tracker = KafkaLagTracker()
    for progress in run1:
        ((_i, source),) = kafka_sources(progress)
        assert tracker.update(source, progress_time(progress) or 0.0) is not None
    ((_i, rerun),) = kafka_sources(first2)
    assert tracker.update(rerun, progress_time(first2) or 0.0) is None  # unknown, not 0
    ((_i, after),) = kafka_sources(progress_lines(os.path.join(SCENARIO, "run2"))[1])
    snap = tracker.update(after, progress_time(progress_lines(os.path.join(SCENARIO, "run2"))[1]) or 0.0)
    assert snap is not None and not [f for f in snap.findings if f.kind.startswith("offsets_")]  # continues the re-run's end


def _batches() -> list[dict]:
    return [p for run in _runs() for p in run]


def _track(batches: list[dict], **kw: Any) -> list[tuple[dict, Mapping[str, Any], KafkaSnapshot]]:
    """Feed the batches to one tracker, as the observer does for one query's source: a new run id is a new run
    (``new_run``, as the Kafka rule calls it at a run's first batch).

    A batch re-run after the restart has no latestOffset and no snapshot (see test_a_rerun_batch_has_no_lag):
    it is fed (its end offsets count for the next batch) but not returned.
    """
    tracker = KafkaLagTracker(**kw)
    out = []
    run_id = None
    for progress in batches:
        if run_id is not None and progress["runId"] != run_id:
            tracker.new_run()
        run_id = progress["runId"]
        ((_i, source),) = kafka_sources(progress)
        t = progress_time(progress)
        assert t is not None
        snap = tracker.update(source, t)
        assert (snap is None) == (not _has_latest(progress)), progress["batchId"]
        if snap is not None:
            out.append((progress, source, snap))
    return out


def _known_latest(truth: dict, progress: dict) -> dict[int, int] | None:
    """The producer's latest offsets while Spark read them (the latestOffset phase), if no burst was in flight then."""
    start, read = parse_timestamp(progress["timestamp"]), progress_time(progress)
    assert start is not None and read is not None
    before, after = truth_at(truth["producer"]["bursts"], start), truth_at(truth["producer"]["bursts"], read)
    return before if before is not None and before == after else None


def test_fixture_has_a_stop_and_a_restart_with_lag() -> None:
    run1, run2 = _runs()
    truth = _truth()
    assert len(run1) >= 15 and run2, "re-record with scripts/record_kafka.py"
    assert {p["runId"] for p in run1}.isdisjoint({p["runId"] for p in run2})
    assert truth["runs"][1]["started"] - truth["runs"][0]["ended"] >= 15


def test_lag_in_records_equals_the_producers_truth() -> None:
    truth = _truth()
    checked = 0
    for progress, source, snap in _track(_batches()):
        latest = _known_latest(truth, progress)
        if latest is None:
            continue
        checked += 1
        end = parse_offsets(source["endOffset"])[truth["topic"]]
        for row in snap.partitions:
            assert row.latest == latest[row.partition]
            assert row.records == latest[row.partition] - end[row.partition]
        assert snap.topic_records[truth["topic"]] == sum(latest[p] - end[p] for p in latest)
    assert checked >= len(_batches()) // 2


def test_lag_in_records_agrees_with_sparks_offsets_behind_latest() -> None:
    for _progress, source, snap in _track(_batches()):
        records = [row.records for row in snap.partitions]
        assert float(source["metrics"]["maxOffsetsBehindLatest"]) == max(records)
        assert float(source["metrics"]["minOffsetsBehindLatest"]) == min(records)


def test_rows_read_are_the_offsets_consumed() -> None:
    previous_end: dict[int, int] = {}
    for progress in _batches():
        ((_i, source),) = kafka_sources(progress)
        start = (
            parse_offsets(source["startOffset"]).get("events", {})
            or previous_end
            or dict.fromkeys(parse_offsets(source["endOffset"])["events"], 0)
        )
        end = parse_offsets(source["endOffset"])["events"]
        assert sum(end[p] - start.get(p, 0) for p in end) == source["numInputRows"]
        previous_end = end


def test_lag_seconds_within_one_trigger_of_the_record_age() -> None:
    truth = _truth()
    bursts, trigger = truth["producer"]["bursts"], truth["trigger_seconds"]
    kinds = []
    for progress, _source, snap in _track(_batches()):
        t = progress_time(progress)
        for row in snap.partitions:
            kinds.append(row.seconds_kind)
            if row.records == 0:
                assert row.seconds == 0.0 and row.seconds_kind == CAUGHT_UP
                continue
            written = record_timestamp(bursts, row.partition, row.end)
            assert written is not None and t is not None and row.seconds is not None
            if row.seconds_kind == LOWER_BOUND:  # the very first batch: one observation only
                assert row.seconds <= t - written
            else:
                assert row.seconds_kind in (INTERPOLATED, EXTRAPOLATED)
                assert abs(row.seconds - (t - written)) <= trigger, (progress["batchId"], row)
    # the fixture covers every case: start-up, extrapolated back, interpolated (also across the restart), caught up
    assert {LOWER_BOUND, EXTRAPOLATED, INTERPOLATED, CAUGHT_UP} <= set(kinds)
    assert kinds.count(INTERPOLATED) >= 10


def test_lag_grows_while_the_query_is_stopped() -> None:
    run1, run2 = _runs()
    tracked = _track(run1 + run2)
    last1, first2 = tracked[len(run1) - 1][2], tracked[len(run1)][2]
    topic = _truth()["topic"]
    assert first2.topic_records[topic] > last1.topic_records[topic]
    truth = _truth()
    stopped, t2 = truth["runs"][0]["ended"], progress_time(tracked[len(run1)][0])
    assert t2 is not None
    # what the producer wrote while the query was down is unread, less what the restarted run's first batch read
    written = sum(
        b["offsets"][p][1] - b["offsets"][p][0]
        for b in truth["producer"]["bursts"]
        if stopped < b["start"] and b["end"] < t2
        for p in b["offsets"]
    )
    assert first2.topic_records[topic] >= written - truth["max_offsets_per_trigger"]
    seconds = first2.topic_seconds[topic]
    assert last1.topic_seconds[topic] == 0.0
    assert seconds is not None
    assert seconds >= (t2 - stopped) - truth["max_offsets_per_trigger"] / truth["rate_per_second"] - truth["trigger_seconds"]
    assert any(f.kind == "lag_growing" for _p, _s, snap in tracked[len(run1) : len(run1) + 3] for f in snap.findings)
    # and the restarted run catches up: lag back to 0
    assert tracked[-1][2].topic_records[topic] == 0


def test_a_new_process_starts_with_a_lower_bound() -> None:
    """A fresh observer on the restarted run has no history: the first lag in seconds is a lower bound."""
    truth = _truth()
    _run1, run2 = _runs()
    progress, _source, snap = _track(run2)[0]
    t = progress_time(progress)
    assert t is not None
    lagging = [row for row in snap.partitions if row.records > 0]
    assert lagging
    for row in lagging:
        written = record_timestamp(truth["producer"]["bursts"], row.partition, row.end)
        assert written is not None
        assert row.seconds_kind == LOWER_BOUND and row.seconds is not None and row.seconds <= t - written


def test_event_logs_carry_the_same_offsets() -> None:
    """Replay sees what the live listener saw: the event logs hold the same source offsets as the progress lines."""
    for run in ("run1", "run2"):
        logged = []
        for item in read_records([eventlog_dir(os.path.join(SCENARIO, run))]):
            assert isinstance(item, Record)
            if item.kind == "progress":
                logged.append(item.payload if isinstance(item.payload, dict) else json.loads(item.payload))
        lines = progress_lines(os.path.join(SCENARIO, run))
        by_batch = {p["batchId"]: p for p in logged}
        for progress in lines:
            ((_i, live),) = kafka_sources(progress)
            ((_j, replayed),) = kafka_sources(by_batch[progress["batchId"]])
            for key in ("startOffset", "endOffset", "latestOffset"):
                assert parse_offsets(replayed.get(key)) == parse_offsets(live.get(key))


def test_no_health_findings_on_a_healthy_run() -> None:
    kinds = {f.kind for _p, _s, snap in _track(_batches()) for f in snap.findings}
    assert not kinds & {"partition_stuck", "partitions_added", "offsets_rewound", "offsets_skipped", "latest_went_back"}


# --- detectors, on the real progress with one thing changed --------------------------------------


def _mutated(change) -> list[dict]:  # type: ignore[no-untyped-def]
    batches = copy.deepcopy(_batches())
    for n, progress in enumerate(batches):
        ((_i, source),) = kafka_sources(progress)
        change(n, source)
    return batches


def _findings(batches: list[dict], kind: str) -> list[tuple[int, tuple[int, ...]]]:
    return [(n, f.partitions) for n, (_p, _s, snap) in enumerate(_track(batches)) for f in snap.findings if f.kind == kind]


def test_stuck_partition() -> None:
    run1, _run2 = _runs()
    first = len(run1)  # partition 0 stops moving during the catch-up after the restart

    def freeze(n: int, source: dict) -> None:
        if n > first:
            for key in ("startOffset", "endOffset"):
                source[key]["events"]["0"] = _batches()[first]["sources"][0]["endOffset"]["events"]["0"]

    found = _findings(_mutated(freeze), "partition_stuck")
    assert found and found[0][1] == (0,)
    assert _findings(_mutated(freeze), "partition_recovered") == []


def test_partitions_added() -> None:
    def late_partition(n: int, source: dict) -> None:
        if n < 5:
            for key in ("startOffset", "endOffset", "latestOffset"):
                if source.get(key):
                    source[key]["events"].pop("2")

    assert _findings(_mutated(late_partition), "partitions_added") == [(5, (2,))]


@pytest.mark.parametrize("delta,kind", [(-7, "offsets_rewound"), (9, "offsets_skipped")])
def test_offsets_backwards_or_skipping(delta: int, kind: str) -> None:
    def shift(n: int, source: dict) -> None:
        if n == 8:
            source["startOffset"]["events"]["1"] += delta

    tracker_runs = _track(_mutated(shift))
    found = [(n, f) for n, (_p, _s, snap) in enumerate(tracker_runs) for f in snap.findings if f.kind == kind]
    assert [(n, f.partitions, f.detail["records"]) for n, f in found] == [(8, (1,), abs(delta))]


def test_latest_going_back_resets_the_history() -> None:
    def truncate(n: int, source: dict) -> None:
        if n == 10:
            source["latestOffset"]["events"]["2"] = 1

    assert _findings(_mutated(truncate), "latest_went_back") == [(10, (2,))]


# --- metrics, bounds ------------------------------------------------------------------------------


def test_metric_specs_follow_prometheus_naming() -> None:
    names = [s.name for s in KAFKA_METRICS]
    assert len(names) == len(set(names))
    for spec in KAFKA_METRICS:
        assert isinstance(spec, MetricSpec) and spec.name.startswith("spark_streaming_kafka_")
        assert not spec.name.endswith("_total") and (spec.kind != COUNTER or spec.prometheus_name.endswith("_total"))
        assert spec.unit != "seconds" or spec.name.endswith("_seconds")


def test_samples_are_bounded_to_top_k() -> None:
    run1, run2 = _runs()
    tracker = KafkaLagTracker(top_k=2)
    snap = None
    for progress in run1 + [p for p in run2 if _has_latest(p)][:1]:
        ((_i, source),) = kafka_sources(progress)
        snap = tracker.update(source, progress_time(progress))  # type: ignore[arg-type]
    assert snap is not None
    samples = metric_samples(snap, tracker)
    specs = {id(s) for s in KAFKA_METRICS}
    assert all(id(spec) in specs for spec, _labels, _v in samples)
    per_partition = [labels for spec, labels, _v in samples if spec.name == "spark_streaming_kafka_lag_records"]
    assert len(per_partition) == 2
    worst = max(snap.partitions, key=lambda r: r.records)
    assert max(v for spec, _l, v in samples if spec.name == "spark_streaming_kafka_lag_records") == worst.records


def test_history_stays_bounded_and_covers_old_offsets() -> None:
    history = OffsetHistory(max_points=8)
    for n in range(1000):
        history.observe(10 * n, 1000.0 + n)
    assert len(history.points) == 8
    t, kind = history.time_passed(10)
    assert kind == INTERPOLATED and t is not None and 1000.0 <= t <= 1000.0 + 999


def test_idle_partition_is_not_stretched() -> None:
    """Records written after a long idle time are dated after it, not spread over it."""
    history = OffsetHistory()
    for second in range(100):
        history.observe(50, 1000.0 + second)  # idle at 50 from t=1000 to 1099
    history.observe(60, 1101.0)
    t, kind = history.time_passed(50)
    assert kind == INTERPOLATED and t is not None and t > 1099.0


# --- hostile input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "{",
        "[]",
        "null",
        42,
        3.5,
        [],
        {"t": [1, 2]},
        {"t": {"0": -1, "1": -2}},
        {"t": {"x": 5}},
        {"t": {"0": 2**70}},
        {"t": {"0": float("nan")}},
        {"t": {"0": True}},
        {"": {"0": 1}},
        {"t" * 300: {"0": 1}},
        "[" * 100000,
        b"\xff\xfe",
        {"t": {str(2**40): 1}},
        {1: {"0": 1}},
        "x" * 9_000_000,
    ],
)
def test_garbage_offsets_yield_nothing(value: object) -> None:
    assert parse_offsets(value) == {}


def test_tolerated_shapes() -> None:
    assert parse_offsets('{"t": {"0": 5, "1": "7", "2": 3.0, "3": "x"}}') == {"t": {0: 5, 1: 7, 2: 3}}
    assert parse_offsets({"t": {"0": 1, "1": 2}}, max_partitions=1) == {"t": {0: 1}}


def test_lag_arithmetic() -> None:
    lags = lag_records({"t": {0: 5, 1: 9}}, {"t": {0: 8, 1: 7, 2: 4}, "u": {0: 1}})
    assert lags == {("t", 0): 3, ("t", 1): 0, ("t", 2): 4, ("u", 0): 1}
    assert topic_totals(lags) == {"t": 7, "u": 1}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3) | st.integers().map(str), inner, max_size=3),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["startOffset", "endOffset", "latestOffset", "description"]),
            json_values | json_values.map(json.dumps),
            max_size=4,
        ),
        max_size=6,
    ),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=6, max_size=6),
)
def test_tracker_never_raises(sources: list[dict], times: list[float]) -> None:
    tracker = KafkaLagTracker(top_k=3, max_points=4, max_partitions=5)
    for source, t in zip(sources, times):
        snap = tracker.update(source, t)
        if snap is not None:
            assert len(snap.top) <= 3 and len(tracker.histories) <= 5
            assert all(r.seconds is None or (math.isfinite(r.seconds) and r.seconds >= 0) for r in snap.partitions)
