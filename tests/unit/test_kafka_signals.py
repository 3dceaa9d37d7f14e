"""Kafka lag, source health and the catch-up forecast as the product exports them: replay of a real restart.

The recorded ``kafka_restart`` fixture (``scripts/record_kafka.py``: a real KRaft broker, a producer with known
record timestamps, a rate-limited windowed count stopped for ~50 s while the producer went on, then restarted
on its checkpoint until caught up) is replayed from its event logs (offsets as JSON strings) through the
observer, and the exported series and signals are checked against the producer's truth (``truth.json``).
``KAFKA_SCENARIOS`` gives ``tests/unit/test_signal_kinds.py`` one synthetic sequence per Kafka signal kind.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from kafka_broker import record_timestamp, truth_at
from prometheus_client.parser import text_string_to_metric_families

from conftest import FIXTURES, eventlog_dir, progress_lines
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.metrics.tracker import QueryTracker
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.identity import APP_LABEL
from spark_state_observer.model.parse import parse_event, parse_timestamp
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings
from spark_state_observer.signals.engine import SignalEngine
from spark_state_observer.signals.kafka_lag import KafkaLagTracker
from spark_state_observer.signals.kafka_offsets import kafka_sources, parse_offsets, progress_time

SCENARIO = os.path.join(FIXTURES, "kafka_restart")
SOURCE = (("source_index", "0"), ("source", "KafkaV2"))


def _truth() -> dict[str, Any]:
    with open(os.path.join(SCENARIO, "truth.json")) as f:
        return json.load(f)


def _has_latest(progress: dict[str, Any]) -> bool:
    ((_i, source),) = kafka_sources(progress)
    return source.get("latestOffset") is not None


def _progress_by_batch() -> dict[int, dict[str, Any]]:
    """The batches that report a lag (a batch re-run after the restart has no latestOffset)."""
    return {p["batchId"]: p for run in ("run1", "run2") for p in progress_lines(os.path.join(SCENARIO, run)) if _has_latest(p)}


def _gauges(observer: PrometheusObserver) -> tuple[int, dict[tuple[MetricSpec, tuple[tuple[str, str], ...]], float]] | None:
    """The latest batch id and the Kafka gauges of the fixture's one query, as the exporters see them now."""
    records = observer.tracker.snapshot()
    if not records or records[0].last_progress is None:
        return None
    r = records[0]
    assert r.last_progress is not None
    kafka = {(spec, labels): v for (spec, labels), v in r.signal_gauges.items() if spec in catalog.KAFKA_METRICS}
    return r.last_progress.batch_id, kafka


def _replay() -> tuple[dict[int, dict[Any, float]], list[SignalEvent], str]:
    """Per batch id the Kafka gauges after it, every signal, and the final exposition."""
    logs = [eventlog_dir(os.path.join(SCENARIO, run)) for run in ("run1", "run2")]
    after: dict[int, dict[Any, float]] = {}
    signals: list[SignalEvent] = []

    def look(observer: PrometheusObserver, _at: float) -> None:
        seen = _gauges(observer)
        if seen is not None:
            after[seen[0]] = seen[1]

    result = replay(logs, Settings(http_enabled=False, history_enabled=False), before_event=look, on_signal=signals.append)
    look(result.observer, 0.0)
    return after, signals, result.exposition()


@pytest.fixture(scope="module")
def replayed() -> tuple[dict[int, dict[Any, float]], list[SignalEvent], str]:
    return _replay()


def _known_latest(truth: dict[str, Any], progress: dict[str, Any]) -> dict[int, int] | None:
    """The producer's latest offsets while Spark read them, if no burst was in flight then."""
    start, read = parse_timestamp(progress["timestamp"]), progress_time(progress)
    assert start is not None and read is not None
    before, after = truth_at(truth["producer"]["bursts"], start), truth_at(truth["producer"]["bursts"], read)
    return before if before is not None and before == after else None


def test_exported_lag_per_partition_equals_the_producers_truth(replayed: Any) -> None:
    after, _signals, _text = replayed
    truth, topic = _truth(), _truth()["topic"]
    checked = 0
    for batch_id, progress in _progress_by_batch().items():
        latest = _known_latest(truth, progress)
        if latest is None:
            continue
        ((_i, source),) = kafka_sources(progress)
        end = parse_offsets(source["endOffset"])[topic]
        gauges = after[batch_id]
        for p, top in latest.items():
            assert gauges[(catalog.KAFKA_LAG_RECORDS, SOURCE + (("topic", topic), ("partition", str(p))))] == top - end[p], batch_id
        assert gauges[(catalog.KAFKA_TOPIC_LAG_RECORDS, SOURCE + (("topic", topic),))] == sum(top - end[p] for p, top in latest.items())
        assert gauges[(catalog.KAFKA_PARTITIONS, SOURCE + (("topic", topic),))] == len(latest)
        checked += 1
    assert checked >= len(after) // 2, checked
    assert any(v > 0 for g in after.values() for (spec, _l), v in g.items() if spec is catalog.KAFKA_LAG_RECORDS)


def test_exported_lag_seconds_within_one_trigger_of_the_oldest_unread_record(replayed: Any) -> None:
    after, _signals, _text = replayed
    truth, topic = _truth(), _truth()["topic"]
    bursts, trigger = truth["producer"]["bursts"], truth["trigger_seconds"]
    progress, behind = _progress_by_batch(), 0
    for batch_id, gauges in after.items():
        if batch_id not in progress:  # the batch re-run after the restart: no lag of its own
            continue
        t = progress_time(progress[batch_id])
        ((_i, source),) = kafka_sources(progress[batch_id])
        end = parse_offsets(source["endOffset"])[topic]
        worst = 0.0
        for (spec, labels), value in gauges.items():
            if spec is not catalog.KAFKA_LAG_SECONDS:
                continue
            p = int(dict(labels)["partition"])
            records = gauges[(catalog.KAFKA_LAG_RECORDS, labels)]
            if records == 0:
                assert value == 0.0
                continue
            written = record_timestamp(bursts, p, end[p])
            assert written is not None and t is not None
            assert abs(value - (t - written)) <= trigger, (batch_id, p, value, t - written)
            behind += 1
            worst = max(worst, value)
        topic_seconds = gauges.get((catalog.KAFKA_TOPIC_LAG_SECONDS, SOURCE + (("topic", topic),)))
        if batch_id == 0:  # one observation of each partition: a lower bound only, not exported
            assert topic_seconds is None and not [k for k in gauges if k[0] is catalog.KAFKA_LAG_SECONDS]
        else:
            assert topic_seconds == pytest.approx(worst)
    assert behind >= 10, behind


def _lag_total(progress: dict[str, Any], topic: str) -> int:
    ((_i, source),) = kafka_sources(progress)
    end, latest = parse_offsets(source["endOffset"])[topic], parse_offsets(source["latestOffset"])[topic]
    return sum(latest[p] - end[p] for p in latest)


def test_health_signals_fire_where_the_truth_says_and_nowhere_else(replayed: Any) -> None:
    _after, signals, _text = replayed
    truth, topic = _truth(), _truth()["topic"]
    by_batch = sorted(_progress_by_batch().values(), key=lambda p: p["batchId"])
    restart_at = truth["runs"][1]["started"]
    kafka = [s for s in signals if s.kind in kinds.KAFKA_KINDS]
    # a clean topic: no partition stuck, added, rewound or skipped, ever
    assert not [s for s in kafka if s.kind in kinds.KAFKA_DATA_LOSS_KINDS | {kinds.KAFKA_PARTITION_STUCK, kinds.KAFKA_PARTITIONS_ADDED}]
    # lag grows where the query was stopped while the producer went on: the restart finds it grown; and every
    # lag_growing is a true one: the lag (from the offsets) is above its level a window earlier and not falling
    growing = [s for s in kafka if s.kind == kinds.KAFKA_LAG_GROWING]
    assert any(s.timestamp > restart_at for s in growing), growing
    window = Settings().growth_window_seconds
    lags = [(progress_time(p) or 0.0, _lag_total(p, topic)) for p in by_batch]
    for signal in growing:
        assert signal.attributes["topic"] == topic and signal.attributes["source"] == "KafkaV2"
        now = next(lag for t, lag in lags if abs(t - signal.timestamp) < 1e-3)
        earlier = [lag for t, lag in lags if signal.timestamp - window <= t < signal.timestamp]
        assert now == signal.attributes["lag_records"] and now > min(earlier), (signal, earlier)
        recent = [lag for t, lag in lags if signal.timestamp - window / 2 <= t <= signal.timestamp]
        assert now >= max(recent[: len(recent) // 2] or [0]), (signal, recent)


def test_catch_up_forecast_at_the_restart_is_within_2x_of_the_measured_catch_up(replayed: Any) -> None:
    _after, signals, _text = replayed
    truth = _truth()
    restart_at = truth["runs"][1]["started"]
    forecasts = [s for s in signals if s.kind == kinds.KAFKA_CATCH_UP_FORECAST and s.timestamp > restart_at]
    caught_up = [s for s in signals if s.kind == kinds.KAFKA_CAUGHT_UP and s.timestamp > restart_at]
    assert len(forecasts) == 1 and len(caught_up) == 1, (forecasts, caught_up)
    forecast, done = forecasts[0].attributes, caught_up[0].attributes
    # the first batch of run 2 found the ~50 s of records produced while the query was down
    downtime = truth["runs"][1]["started"] - truth["runs"][0]["ended"]
    rate = truth["rate_per_second"]
    assert forecast["backlog_records"] >= 0.8 * rate * downtime
    assert forecast["basis"] == "rate_before_restart" and forecast["read_records_per_second"] > forecast["produce_records_per_second"]
    assert forecast["produce_records_per_second"] == pytest.approx(rate, rel=0.1)
    # the measured time from that batch to the first batch with no lag, against the forecast
    measured = done["seconds"]
    assert done["forecast_seconds"] == forecast["forecast_seconds"]
    assert measured / 2 <= forecast["forecast_seconds"] <= 2 * measured, (forecast, measured)
    # measured from the progress itself, not from the signal: the first batch of run 2 with no lag
    run2 = [p for p in _progress_by_batch().values() if (progress_time(p) or 0) > restart_at]
    first, head = run2[0], next(p for p in sorted(run2, key=lambda p: p["batchId"]) if _lag_total(p, truth["topic"]) == 0)
    assert measured == pytest.approx((progress_time(head) or 0) - (progress_time(first) or 0), abs=0.01)


def test_the_exposition_carries_the_kafka_series_with_their_catalog_labels(replayed: Any) -> None:
    _after, _signals, text = replayed
    for spec in (
        catalog.KAFKA_LAG_RECORDS,
        catalog.KAFKA_LAG_SECONDS,
        catalog.KAFKA_TOPIC_LAG_RECORDS,
        catalog.KAFKA_PARTITIONS,
        catalog.KAFKA_OFFSET_ANOMALIES,
        catalog.KAFKA_PARTITIONS_ADDED,
    ):
        assert f"\n{spec.prometheus_name}{{" in text, spec.prometheus_name
    samples = [s for fam in text_string_to_metric_families(text) if fam.name.startswith("spark_streaming_kafka_") for s in fam.samples]
    for sample in samples:  # the catalog's labels, and the application's identity the replay read from the log
        spec = catalog.lookup(sample.name)
        assert set(sample.labels) == set(spec.label_names) | {APP_LABEL}, sample
    # every anomaly kind has its series from 0, so increase() sees the first
    anomalies = {s.labels["kind"] for s in samples if s.name == catalog.KAFKA_OFFSET_ANOMALIES.prometheus_name}
    assert anomalies == {"rewound", "skipped", "latest_went_back"}, anomalies


def test_top_k_bounds_the_partition_series_and_drops_those_that_leave_it() -> None:
    """With top-K 1, only the most lagging partition has series; one overtaken loses its series."""
    logs = [eventlog_dir(os.path.join(SCENARIO, run)) for run in ("run1", "run2")]
    seen: list[set[str]] = []

    def look(observer: PrometheusObserver, _at: float) -> None:
        state = _gauges(observer)
        if state is not None:
            seen.append({dict(labels)["partition"] for (spec, labels) in state[1] if spec is catalog.KAFKA_LAG_RECORDS})

    replay(logs, Settings(http_enabled=False, history_enabled=False, partition_top_k=1), before_event=look)
    assert seen and all(len(partitions) == 1 for partitions in seen)
    assert len(set().union(*seen)) > 1  # the top partition changed, and the one before was dropped


# --- one synthetic sequence per Kafka signal kind, for tests/unit/test_signal_kinds.py --------------------
RECORDED = progress_lines(os.path.join(SCENARIO, "run1"))


class _Pipeline:
    """The worker's path for Kafka progress (tracker, engine, updates), on copies of recorded batches."""

    def __init__(self) -> None:
        self.tracker = QueryTracker()
        self.engine = SignalEngine(Settings(http_enabled=False), self.tracker.get, live=False)
        self.signals: list[SignalEvent] = []
        self.n = 0
        self.t = 1_800_000_000.0

    def feed(
        self,
        start: dict[str, int] | None,
        end: dict[str, int],
        latest: dict[str, int] | None,
        run: str = "run-a",
        topic: str = "events",
        downtime: float = 0.0,
    ) -> list[str]:
        """One batch 2 s after the previous one (``downtime`` seconds more: a stop before it)."""
        p = copy.deepcopy(RECORDED[-1])
        source = p["sources"][0]
        source["startOffset"] = None if start is None else json.dumps({topic: start})
        source["endOffset"] = json.dumps({topic: end})
        source["latestOffset"] = None if latest is None else json.dumps({topic: latest})
        self.t += downtime
        p.update(runId=run, batchId=self.n, timestamp=_iso(self.t))
        self.n += 1
        self.t += 2.0
        event = parse_event("progress", json.dumps(p))
        record = self.tracker.apply(event)
        facts = self.engine.on_event(event, record)
        self.tracker.apply_updates(facts.updates)
        self.signals += facts.signals
        return [s.kind for s in facts.signals]


def _iso(t: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _steady(p: _Pipeline, batches: int, lag: int = 0, step: int = 10, base: int = 0) -> int:
    """``batches`` batches reading ``step`` records per partition with ``lag`` left behind; returns the last end."""
    end = base
    for _ in range(batches):
        start, end = end, end + step
        p.feed({"0": start, "1": start}, {"0": end, "1": end}, {"0": end + lag, "1": end + lag})
    return end


def lag_growing() -> _Pipeline:
    p = _Pipeline()
    end = _steady(p, 3)
    for i in range(1, 8):
        p.feed({"0": end, "1": end}, {"0": end + 10, "1": end + 10}, {"0": end + 10 + 20 * i, "1": end + 10 + 20 * i})
        end += 10
    assert [s for s in p.signals if s.kind == kinds.KAFKA_LAG_GROWING]
    return p


def partition_stuck() -> _Pipeline:
    p = _Pipeline()
    end = _steady(p, 2)
    for i in range(1, 5):  # partition 1 stays at `end` while its latest moves on
        p.feed({"0": end + 10 * (i - 1), "1": end}, {"0": end + 10 * i, "1": end}, {"0": end + 10 * i, "1": end + 10 * i})
    return p


def partition_recovered() -> _Pipeline:
    p = partition_stuck()  # partition 0 read up to 60, partition 1 stuck at 20
    p.feed({"0": 60, "1": 20}, {"0": 70, "1": 70}, {"0": 70, "1": 70})
    return p


def partitions_added() -> _Pipeline:
    p = _Pipeline()
    end = _steady(p, 2)
    p.feed({"0": end, "1": end}, {"0": end + 10, "1": end + 10, "2": 5}, {"0": end + 10, "1": end + 10, "2": 5})
    return p


def offsets_rewound() -> _Pipeline:
    p = _Pipeline()
    end = _steady(p, 2)
    p.feed({"0": end - 15, "1": end}, {"0": end + 10, "1": end + 10}, {"0": end + 10, "1": end + 10})
    return p


def offsets_skipped() -> _Pipeline:
    p = _Pipeline()
    end = _steady(p, 2)
    p.feed({"0": end + 15, "1": end}, {"0": end + 25, "1": end + 10}, {"0": end + 25, "1": end + 10})
    return p


def latest_went_back() -> _Pipeline:
    p = _Pipeline()
    _steady(p, 2, lag=50)
    p.feed({"0": 20, "1": 20}, {"0": 25, "1": 25}, {"0": 30, "1": 30})
    return p


def catch_up_forecast() -> _Pipeline:
    """Behind and reading it down in run a (the read rate), stopped, restarted behind in run b: a forecast."""
    p = _Pipeline()
    latest, end = 200, 0
    for _ in range(5):
        p.feed({"0": end, "1": end}, {"0": end + 30, "1": end + 30}, {"0": latest, "1": latest})
        end, latest = end + 30, latest + 10
    latest += 90  # 18 s more at 5 records/s per partition: the query was down
    p.feed({"0": end, "1": end}, {"0": end + 30, "1": end + 30}, {"0": latest, "1": latest}, run="run-b", downtime=18.0)
    forecast = [s for s in p.signals if s.kind == kinds.KAFKA_CATCH_UP_FORECAST][-1].attributes
    # read 60 records per 2 s batch, 10 produced per partition and batch: drains (30 - 10) x 2 per 2 s
    assert forecast["basis"] == "rate_before_restart" and forecast["read_records_per_second"] == pytest.approx(30.0)
    assert forecast["produce_records_per_second"] == pytest.approx(10.0)
    return p


def caught_up() -> _Pipeline:
    p = catch_up_forecast()
    p.feed({"0": 180, "1": 180}, {"0": 500, "1": 500}, {"0": 500, "1": 500}, run="run-b")
    done = [s for s in p.signals if s.kind == kinds.KAFKA_CAUGHT_UP][-1].attributes
    assert done["seconds"] == pytest.approx(2.0)
    return p


KAFKA_SCENARIOS: dict[str, Callable[[], Any]] = {
    kinds.KAFKA_LAG_GROWING: lag_growing,
    kinds.KAFKA_PARTITION_STUCK: partition_stuck,
    kinds.KAFKA_PARTITION_RECOVERED: partition_recovered,
    kinds.KAFKA_PARTITIONS_ADDED: partitions_added,
    kinds.KAFKA_OFFSETS_REWOUND: offsets_rewound,
    kinds.KAFKA_OFFSETS_SKIPPED: offsets_skipped,
    kinds.KAFKA_LATEST_WENT_BACK: latest_went_back,
    kinds.KAFKA_CATCH_UP_FORECAST: catch_up_forecast,
    kinds.KAFKA_CAUGHT_UP: caught_up,
}


@pytest.mark.parametrize("kind", kinds.KAFKA_KINDS)
def test_kafka_signal_kind(kind: str) -> None:
    pipeline = KAFKA_SCENARIOS[kind]()
    emitted = [s for s in pipeline.signals if s.kind == kind]
    assert emitted and all(s.attributes["topic"] == "events" and s.attributes["source_index"] == "0" for s in emitted)


def test_a_clean_steady_source_raises_no_kafka_signal() -> None:
    p = _Pipeline()
    _steady(p, 30, lag=5)
    assert not [s for s in p.signals if s.kind in kinds.KAFKA_KINDS]


def test_a_new_observer_forecasts_once_the_restarted_run_has_shown_its_pace() -> None:
    """Run 2 alone, as an observer started with the restarted job sees it: no rate from before the restart."""
    signals: list[SignalEvent] = []
    replay([eventlog_dir(os.path.join(SCENARIO, "run2"))], Settings(http_enabled=False, history_enabled=False), on_signal=signals.append)
    (forecast,) = [s for s in signals if s.kind == kinds.KAFKA_CATCH_UP_FORECAST]
    (done,) = [s for s in signals if s.kind == kinds.KAFKA_CAUGHT_UP]
    attrs = forecast.attributes
    assert attrs["basis"] == "rate_of_this_run" and attrs["restart_backlog_records"] > 0
    assert attrs["forecast_seconds"] is not None and done.attributes["forecast_seconds"] == attrs["forecast_seconds"]
    assert done.attributes["seconds"] / 2 <= attrs["forecast_seconds"] <= 2 * done.attributes["seconds"], (attrs, done.attributes)


def test_the_read_rate_counts_wall_time_once_when_overrun_batches_fire_the_next_one_at_once() -> None:
    """A processing-time trigger of 2 s whose batches overrun: Spark starts the next batch at once and it ends
    before the next multiple of the interval, so batch ends alternate 3.5 s and 0.5 s apart. Each reads its
    ``maxOffsetsPerTrigger`` of 120 records: the pace is 240 records per 4 s, whatever a single batch shows
    (34 or 240 a second; their median was either, and the forecast from it up to 4x off)."""
    tracker = KafkaLagTracker()
    topic, latest, end, t = "events", 100_000, 0, 1_000.0
    rates = []
    for i in range(12):
        t += 3.5 if i % 2 == 0 else 0.5
        source = {
            "description": f"KafkaV2[Subscribe[{topic}]]",
            "startOffset": {topic: {"0": end}},
            "endOffset": {topic: {"0": end + 120}},
            "latestOffset": {topic: {"0": latest}},
        }
        end += 120
        snap = tracker.update(source, t, 0.5)
        assert snap is not None
        rates.append(snap.read_rate.get(topic))
    # the run's first two batches show no pace; after three, the span's rows over its seconds
    assert rates[:4] == [None] * 4
    assert all(r is not None and 48.0 <= r <= 80.0 for r in rates[4:]), rates
    assert rates[-1] == pytest.approx(60.0)  # an even number of batches in the window: exactly the pace


def test_a_rerun_batch_without_latest_offsets_leaves_the_lag_unknown_and_the_forecast_waits() -> None:
    """A restart re-runs the batch the previous run planned but did not commit: Spark reports no latestOffset for it."""
    p = catch_up_forecast()
    before = {k: v for k, v in p.tracker.snapshot()[0].signal_gauges.items() if k[0] is catalog.KAFKA_TOPIC_LAG_RECORDS}
    forecasts = len([s for s in p.signals if s.kind == kinds.KAFKA_CATCH_UP_FORECAST])
    p.feed({"0": 180, "1": 180}, {"0": 210, "1": 210}, None, run="run-c", downtime=10.0)
    after = {k: v for k, v in p.tracker.snapshot()[0].signal_gauges.items() if k[0] is catalog.KAFKA_TOPIC_LAG_RECORDS}
    assert after == before  # not 0: unknown, the last known value stays until a batch tells
    assert len([s for s in p.signals if s.kind == kinds.KAFKA_CATCH_UP_FORECAST]) == forecasts
    p.feed({"0": 210, "1": 210}, {"0": 240, "1": 240}, {"0": 400, "1": 400}, run="run-c")
    (forecast,) = [s for s in p.signals if s.kind == kinds.KAFKA_CATCH_UP_FORECAST][forecasts:]
    assert forecast.attributes["restart_backlog_records"] == 320 and forecast.attributes["basis"] == "rate_before_restart"
