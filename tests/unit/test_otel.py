"""OpenTelemetry export: real OTLP receivers (HTTP/protobuf and gRPC) on loopback, values checked
against the recorded progress JSON of real Spark runs and against the Prometheus exposition."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT, eventlog_dir, fixture_runs, progress_lines
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.exporters.otel import config as otel_config
from spark_state_observer.exporters.otel.naming import COUNTER, METRICS, attributes, otel_metric
from spark_state_observer.exporters.otel.sink import OtelSink
from spark_state_observer.metrics import catalog
from spark_state_observer.offline.eventlog import EventLogError, read_records
from spark_state_observer.settings import Settings, SettingsError

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
        "import spark_state_observer as observer\n"
        "from spark_state_observer.assembly import assemble\n"
        "from spark_state_observer.exporters.http import ExporterError\n"
        "from spark_state_observer.capture.queue import CapturedEvent\n"
        "from spark_state_observer.embedded.prometheus_observer import PrometheusObserver\n"
        "from spark_state_observer.settings import Settings\n"
        "obs = PrometheusObserver(Settings(http_enabled=False, history_enabled=False, otlp_endpoint='http://127.0.0.1:1'), serve=False, live=False)\n"
        f"obs.process(CapturedEvent('progress', {json.dumps(PROGRESS[0])!r}, 0.0, 0.0))\n"
        "assert obs.tracker.snapshot()[0].last_progress is not None\n"
        "try:\n    assemble(obs.settings, sinks=['otel'])\nexcept ExporterError as e:\n    print('clear error:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'spark-state-observer[otel]'" in out.stdout


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


def test_stop_gives_up_the_last_export_to_a_collector_that_never_answers() -> None:
    """Issue 48: the SDK's shutdown export held ``stop()`` (and so the job's ``spark.stop()``) for the export timeout.
    Now the last export gets ``stop_flush_seconds``: given up then, and counted as one failed export."""
    with socket.socket() as blackhole:  # accepts connections in the kernel, never reads or answers
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(64)
        obs, _ = make_observer(f"http://127.0.0.1:{blackhole.getsockname()[1]}", otlp_timeout_seconds=30.0, stop_flush_seconds=0.5)
        obs.start()
        feed(obs, PROGRESS)
        began = time.monotonic()
        obs.stop()
        took = time.monotonic() - began
        failures = obs.self_metrics.export_failures["otlp"]
    assert failures == 1  # given up and counted: the export itself could not have failed before its 30 s timeout
    assert took < 30.0  # so stop() returned before it
