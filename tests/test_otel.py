"""OpenTelemetry export: real OTLP receivers (HTTP/protobuf and gRPC) on loopback, values checked
against the recorded progress JSON of real Spark runs and against the Prometheus exposition."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from datetime import datetime

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import ROOT, eventlog_dir, fixture_runs, free_port, progress_lines
from observer.capture.queue import CapturedEvent
from observer.embedded.prometheus_observer import PrometheusObserver
from observer.exporters.otel import config as otel_config
from observer.exporters.otel.events import PHASES
from observer.exporters.otel.naming import COUNTER, METRICS, attributes, otel_metric
from observer.exporters.otel.sink import OtelSink
from observer.metrics import catalog
from observer.offline.eventlog import EventLogError, read_records
from observer.settings import Settings, SettingsError
from otlp_receiver import GrpcReceiver, HttpReceiver

RUNS = fixture_runs("rocksdb_restart")  # two runs of one query: a restart and two restores
PROGRESS = [p for run in RUNS for p in progress_lines(run)]
QUERY_ID = PROGRESS[0]["id"]
# a real failure (the restart the checkpoint refused, recorded in schema_failure), moved onto the restart fixture's query
_FAILED = next(
    r.payload
    for r in read_records([eventlog_dir(fixture_runs("schema_failure")[1])])
    if not isinstance(r, EventLogError) and r.kind == "terminated"
)
TERMINATION = {**_FAILED, "id": QUERY_ID, "runId": PROGRESS[-1]["runId"]}
APP = {"spark.app.id": "local-1795303624712", "spark.app.name": "fixture-app", "spark.version": "4.3.0"}
CUMULATIVE = 2  # AggregationTemporality.CUMULATIVE in the OTLP protobuf


def make_observer(endpoint: str, protocol: str = "http/protobuf", **settings: object) -> tuple[PrometheusObserver, OtelSink]:
    values = {
        "http_enabled": False,
        "history_enabled": False,
        "otlp_endpoint": endpoint,
        "otlp_protocol": protocol,
        "otlp_interval_seconds": 3600.0,
        "otlp_timeout_seconds": 2.0,
        "otlp_traces": True,
        **settings,
    }
    obs = PrometheusObserver(Settings(**values), serve=False, live=False)  # type: ignore[arg-type]
    sink = OtelSink(obs.view, obs.settings, lambda: obs.self_metrics.count("export_failures", OtelSink.name), APP)
    obs.add_sink(sink)
    return obs, sink


def feed(obs: PrometheusObserver, progress: list[dict], terminate: bool = True) -> None:
    for p in progress:
        obs.process(CapturedEvent("progress", json.dumps(p), time.time(), 0.0))
    if terminate:
        obs.process(CapturedEvent("terminated", json.dumps(TERMINATION), time.time(), 0.0))


def key(name: str, labels: dict[str, str]) -> tuple[str, tuple]:
    return name, tuple(sorted(attributes(tuple(labels.items())).items()))


def ts_ns(text: str) -> int:
    return int(round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1e9))


@pytest.fixture(params=["http/protobuf", "grpc"])
def receiver(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    server = HttpReceiver() if request.param == "http/protobuf" else GrpcReceiver()
    yield request.param, server
    server.stop()


# --- naming -----------------------------------------------------------------------------------------
def test_names_follow_opentelemetry_conventions_and_come_from_the_registry() -> None:
    spec = next(s for s in catalog.CATALOG if s.prometheus_name == "spark_state_rocksdb_commit_flush_seconds_total")
    m = otel_metric(spec)
    assert (m.name, m.unit, m.instrument) == ("spark.state.rocksdb.commit.flush.duration", "s", COUNTER)
    assert otel_metric(next(s for s in catalog.CATALOG if s.name == "spark_state_memory_used_bytes")).unit == "By"
    assert METRICS["spark_state_rows"].unit == "{row}" and METRICS["spark_state_rows"].instrument == "gauge"
    assert METRICS["spark_streaming_input_rows_per_second"].unit == "{row}/s"
    # the latest batch's duration (gauge) and the time summed over batches (counter) stay apart
    assert METRICS["spark_streaming_batch_seconds_total"].name == "spark.streaming.batch.duration"
    assert METRICS["spark_streaming_batch_duration_seconds"].name == "spark.streaming.batch.duration.last"
    names = [m.name for m in METRICS.values()]
    assert len(names) == len(set(names))
    assert {s.prometheus_name for s in catalog.CATALOG if s.kind != catalog.HISTOGRAM} <= set(METRICS)
    for m in METRICS.values():
        assert m.name == m.name.lower() and "_total" not in m.name and "seconds" not in m.name and "bytes" not in m.name
        assert m.unit in {"s", "By", "{row}", "{record}", "{file}", "1", "{row}/s", "{record}/s", "By/s", "1/s"}


def test_configuration_from_settings_and_otel_variables() -> None:
    off = Settings(history_enabled=False)
    assert not otel_config.otlp_enabled(off, {})
    assert otel_config.otlp_enabled(off, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_METRIC_EXPORT_INTERVAL": "5000"}
    cfg = otel_config.resolve(off, env)
    assert (cfg.protocol, cfg.interval_seconds, cfg.endpoint, cfg.traces) == ("grpc", 5.0, None, False)
    mine = Settings(history_enabled=False, otlp_endpoint="http://127.0.0.1:4318/", otlp_protocol="http/protobuf", otlp_interval_seconds=2)
    cfg = otel_config.resolve(mine, env)
    assert (cfg.protocol, cfg.interval_seconds) == ("http/protobuf", 2)
    assert cfg.signal_endpoint("logs") == "http://127.0.0.1:4318/v1/logs"
    with pytest.raises(SettingsError):
        otel_config.resolve(off, {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    with pytest.raises(SettingsError):
        Settings.from_env({}, otlp_protocol="thrift")


def test_package_works_without_opentelemetry() -> None:
    script = (
        "import sys, json\n"
        "sys.modules['opentelemetry'] = None\n"  # any import of it fails
        "import observer\n"
        "from observer.embedded.attach import _otel_sink\n"
        "from observer.exporters.http import ExporterError\n"
        "from observer.capture.queue import CapturedEvent\n"
        "from observer.embedded.prometheus_observer import PrometheusObserver\n"
        "from observer.settings import Settings\n"
        "obs = PrometheusObserver(Settings(http_enabled=False, history_enabled=False, otlp_endpoint='http://127.0.0.1:1'), serve=False, live=False)\n"
        f"obs.process(CapturedEvent('progress', {json.dumps(PROGRESS[0])!r}, 0.0, 0.0))\n"
        "assert obs.tracker.snapshot()[0].last_progress is not None\n"
        "try:\n    _otel_sink(obs, None)\nexcept ExporterError as e:\n    print('clear error:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'spark-state-observer[otel]'" in out.stdout


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


def test_a_collector_that_never_answers_does_not_slow_processing() -> None:
    with socket.socket() as blackhole:  # accepts connections in the kernel, never reads or answers
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(64)
        obs, sink = make_observer(
            f"http://127.0.0.1:{blackhole.getsockname()[1]}", otlp_timeout_seconds=1.0, otlp_interval_seconds=0.2, otlp_queue_size=8
        )
        started = time.perf_counter()
        for _ in range(5):  # ~50 batches with their spans and signals, while exports hang
            feed(obs, PROGRESS)
        elapsed = time.perf_counter() - started
        assert elapsed < 2.0, f"processing took {elapsed:.2f}s with a hanging collector"
        closing = time.perf_counter()
        sink.close()
        assert time.perf_counter() - closing < 15.0
        assert obs.self_metrics.export_failures["otlp"] >= 1


# --- real Spark -------------------------------------------------------------------------------------------
def check_against_progress(server, progress: list[dict], query_id: str, app: str) -> None:  # type: ignore[no-untyped-def]
    """The latest exported values are the last batch's, the counters sum every batch; every point names the application."""
    got = server.received.latest()
    last = progress[-1]
    q = {"app": app, "query": last["name"], "query_id": query_id}
    assert got[key("spark.streaming.batch.id", q)]["value"] == last["batchId"]
    assert got[key("spark.streaming.batches", q)]["value"] == len(progress)
    # Spark's progress JSON leaves out the top-level numInputRows: it is the sum over the sources
    rows = sum(p.get("numInputRows", sum(src["numInputRows"] for src in p["sources"])) for p in progress)
    assert got[key("spark.streaming.input.rows", q)]["value"] == rows
    for i, op in enumerate(last["stateOperators"]):
        ol = {**q, "operator_index": str(i), "operator": op["operatorName"]}
        assert got[key("spark.state.rows", ol)]["value"] == op["numRowsTotal"]
        updated = sum(p["stateOperators"][i]["numRowsUpdated"] for p in progress if p["stateOperators"])
        assert got.get(key("spark.state.rows.updated", ol), {"value": 0})["value"] == updated
    batches = [s for s in server.received.spans() if not s["parent"] and s["attributes"]["spark.query.id"] == query_id]
    assert sorted(s["attributes"]["spark.batch.id"] for s in batches) == [p["batchId"] for p in progress]


@pytest.mark.slow
def test_end_to_end_with_real_spark(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import observer
    from observer.cli.demo import dedup_window_query

    server = GrpcReceiver()
    try:
        handle = observer.attach(
            spark,
            http_enabled=False,
            history_enabled=False,
            otlp_endpoint=server.endpoint,
            otlp_protocol="grpc",
            otlp_interval_seconds=1.0,
            otlp_traces=True,
        )
        query = dedup_window_query(spark, str(tmp_path / "cp"), rows_per_second=20, name="otel_e2e")
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and sum(1 for p in query.recentProgress if p.stateOperators) < 4:
                time.sleep(1)
        finally:
            query.stop()
        handle.flush()
        time.sleep(1.5)  # at least one periodic export while the observer runs
        assert server.received.latest(), "no periodic export arrived"
        handle.stop()
        progress = [json.loads(p.json) for p in query.recentProgress]
        assert len(progress) >= 4
        check_against_progress(server, progress, str(query.id), spark.sparkContext.appName)
        resource = next(iter(server.received.latest().values()))["resource"]
        assert resource["spark.app.id"] == spark.sparkContext.applicationId
        assert resource["spark.version"] == spark.version
        assert resource["service.name"] == spark.sparkContext.appName
        kinds = {r["event_name"] for r in server.received.log_records()}
        assert {"spark.streaming.query_started", "spark.streaming.query_terminated"} <= kinds
    finally:
        server.stop()


@pytest.mark.slow
def test_attach_under_spark_connect_exports_over_otlp(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from conftest import need

    need("java")
    server = HttpReceiver()
    try:
        out = subprocess.run(
            [sys.executable, "tests/connect_job.py", server.endpoint, str(tmp_path / "cp")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=400,
            env={**os.environ, "PYTHONPATH": ROOT},
        )
        lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
        assert out.returncode == 0 and lines, out.stderr[-3000:]
        result = json.loads(lines[-1][len("RESULT ") :])
        assert result["connect"] is True
        assert result["executor_ids"] is None and result["last_commit"] is None  # no JVM on the client: degraded, not failed
        progress = result["progress"]
        assert len(progress) >= 4 and result["received"]["progress"] >= len(progress)
        check_against_progress(server, progress, progress[-1]["id"], result["app_name"])
        resource = next(iter(server.received.latest().values()))["resource"]
        assert (resource["spark.app.id"], resource["spark.version"]) == (result["app_id"], result["spark_version"])
        assert resource["service.name"] == result["app_name"]
        kinds = {r["event_name"] for r in server.received.log_records()}
        assert {"spark.streaming.query_started", "spark.streaming.query_terminated"} <= kinds
    finally:
        server.stop()
