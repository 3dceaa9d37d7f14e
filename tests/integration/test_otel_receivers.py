"""OTLP export to real receivers (gRPC and HTTP servers in the test process): values arrive as Spark reported them,
traces are off by default, a collector down then up is counted then delivered."""

from __future__ import annotations

from datetime import datetime

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from test_otel import _FAILED, APP, PROGRESS, QUERY_ID, feed, key, make_observer

from conftest import free_port
from otlp_receiver import GrpcReceiver, HttpReceiver
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.exporters.otel.events import PHASES
from spark_state_observer.exporters.otel.naming import COUNTER, METRICS

CUMULATIVE = 2  # AggregationTemporality.CUMULATIVE in the OTLP protobuf


def ts_ns(text: str) -> int:
    return int(round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1e9))


@pytest.fixture(params=["http/protobuf", "grpc"])
def receiver(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    server = HttpReceiver() if request.param == "http/protobuf" else GrpcReceiver()
    yield request.param, server
    server.stop()


# --- metrics, logs and spans through real receivers -------------------------------------------------------
def test_metrics_logs_and_spans_arrive_with_the_values_spark_reported(receiver) -> None:  # type: ignore[no-untyped-def]
    protocol, server = receiver
    obs, sink = make_observer(server.endpoint, protocol)
    feed(obs, PROGRESS)
    sink.force_flush()
    sink.close()  # exports once more, cumulatively: assert on the latest values, not on request counts
    got = server.received.latest()
    assert got, "no metrics arrived"

    # the same series and values as the Prometheus exposition of the same observer
    prom = text_string_to_metric_families(generate_latest(obs.prometheus.registry).decode())
    compared = 0
    for family in prom:
        if family.type == "histogram":
            continue
        for sample in family.samples:
            m = METRICS[sample.name]
            point = got[key(m.name, sample.labels)]
            assert point["value"] == pytest.approx(sample.value), sample
            assert point["unit"] == m.unit
            if m.instrument == COUNTER:
                assert (point["type"], point["monotonic"], point["temporality"]) == ("sum", True, CUMULATIVE)
            else:
                assert point["type"] == "gauge"
            compared += 1
    assert compared > 100

    # and the values Spark reported in the progress JSON
    last = PROGRESS[-1]
    q = {"query": last["name"], "query_id": QUERY_ID}
    assert got[key("spark.streaming.batches", q)]["value"] == len(PROGRESS)
    assert got[key("spark.streaming.batch.id", q)]["value"] == last["batchId"]
    assert got[key("spark.streaming.query.restarts", q)]["value"] == 1
    for i, op in enumerate(last["stateOperators"]):
        ol = {**q, "operator_index": str(i), "operator": op["operatorName"]}
        assert got[key("spark.state.rows", ol)]["value"] == op["numRowsTotal"]
        assert got[key("spark.state.memory.used", ol)]["value"] == op["memoryUsedBytes"]
        updated = sum(p["stateOperators"][i]["numRowsUpdated"] for p in PROGRESS)
        assert got[key("spark.state.rows.updated", ol)]["value"] == updated
        flush = sum(p["stateOperators"][i]["customMetrics"]["rocksdbCommitFlushLatency"] for p in PROGRESS) / 1000.0
        assert got[key("spark.state.rocksdb.commit.flush.duration", ol)]["value"] == pytest.approx(flush)
    resource = next(iter(got.values()))["resource"]
    assert resource["service.name"] == "fixture-app"
    assert {k: resource[k] for k in APP} == APP

    # signals as log records
    logs = server.received.log_records()
    for signal in obs.signals.recent:
        match = [r for r in logs if r["event_name"] == f"spark.streaming.{signal.kind}" and r["time"] == int(round(signal.timestamp * 1e9))]
        assert match, signal.describe()
        assert match[0]["attributes"]["spark.query.id"] == QUERY_ID
    restores = [r for r in logs if r["event_name"] == "spark.streaming.restore"]
    assert {r["attributes"]["spark.operator.name"] for r in restores} == {op["operatorName"] for op in last["stateOperators"]}
    (terminated,) = [r for r in logs if r["event_name"] == "spark.streaming.query_terminated"]
    assert terminated["severity"] == "ERROR"
    assert terminated["attributes"]["spark.exception_class"] == "state_schema"
    assert terminated["attributes"]["spark.error_class"] == _FAILED["errorClassOnException"]
    assert terminated["attributes"]["exception.message"] == _FAILED["exception"].splitlines()[0][:300]
    assert next(r for r in logs if r["event_name"] == "spark.streaming.query_restarted")["severity"] == "WARN"

    # each micro-batch a span, its phases children laid out one after the other
    spans = server.received.spans()
    batches = [s for s in spans if not s["parent"]]
    assert len(batches) == len(PROGRESS)
    for p in PROGRESS:
        (span,) = [
            s for s in batches if s["attributes"]["spark.batch.id"] == p["batchId"] and s["attributes"]["spark.query.run_id"] == p["runId"]
        ]
        assert span["start"] == ts_ns(p["timestamp"])
        assert abs(span["end"] - span["start"] - p["batchDuration"] * 1_000_000) <= 1
        for i, op in enumerate(p["stateOperators"]):
            assert span["attributes"][f"spark.state.operator.{i}.name"] == op["operatorName"]
            assert span["attributes"][f"spark.state.operator.{i}.rows"] == op["numRowsTotal"]
            assert span["attributes"][f"spark.state.operator.{i}.rocksdb.commit.flush.duration"] == pytest.approx(
                op["customMetrics"]["rocksdbCommitFlushLatency"] / 1000.0
            )
        children = sorted((s for s in spans if s["parent"] == span["span_id"]), key=lambda s: s["start"])
        assert [c["name"] for c in children] == [ph for ph in PHASES if ph in p["durationMs"]]
        assert all(c["trace_id"] == span["trace_id"] for c in children)
        assert children[0]["start"] == span["start"]
        for c, nxt in zip(children, children[1:]):
            assert c["end"] == nxt["start"]
        for c in children:
            assert abs(c["end"] - c["start"] - p["durationMs"][c["name"]] * 1_000_000) <= 1


def test_traces_are_off_by_default() -> None:
    server = HttpReceiver()
    try:
        obs, sink = make_observer(server.endpoint, otlp_traces=False)
        feed(obs, PROGRESS[:3], terminate=False)
        sink.close()
        assert server.received.latest() and server.received.spans() == []
    finally:
        server.stop()


# --- failure isolation ----------------------------------------------------------------------------------------
def prom_value(obs: PrometheusObserver, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(generate_latest(obs.prometheus.registry).decode()):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return 0.0


def test_collector_down_then_up_counts_failures_then_delivers() -> None:
    port = free_port()
    obs, sink = make_observer(f"http://127.0.0.1:{port}", otlp_timeout_seconds=1.0)
    feed(obs, PROGRESS[:-1], terminate=False)
    sink.force_flush()  # nothing listens: metrics, logs and spans fail
    failures = obs.self_metrics.export_failures["otlp"]
    assert failures >= 3
    assert prom_value(obs, "spark_state_observer_export_failures_total", exporter="otlp") == failures
    server = HttpReceiver(port)
    try:
        feed(obs, PROGRESS[-1:])  # the last batch and the termination arrive after the collector is back
        sink.force_flush()
        got = server.received.latest()
        q = {"query": PROGRESS[-1]["name"], "query_id": QUERY_ID}
        assert got[key("spark.streaming.batches", q)]["value"] == len(PROGRESS)  # cumulative: nothing lost
        assert got[key("spark.state.observer.export.failures", {"exporter": "otlp"})]["value"] == failures
        assert [r for r in server.received.log_records() if r["event_name"] == "spark.streaming.query_terminated"]
        assert [s for s in server.received.spans() if s["attributes"].get("spark.batch.id") == PROGRESS[-1]["batchId"]]
        assert obs.self_metrics.export_failures["otlp"] == failures
        sink.close()
    finally:
        server.stop()
