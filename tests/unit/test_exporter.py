"""The Prometheus exporter: bounded series, the HTTP endpoint's options, and real Prometheus servers."""

from __future__ import annotations

import copy
import json
import socket
import ssl
import urllib.error
import urllib.request

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import fixture_runs, progress_lines
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.exporters.http import ExporterError
from spark_state_observer.settings import Settings

RUN = fixture_runs("rocksdb_restart")[0]
PROGRESS = progress_lines(RUN)


def observer_with(progress: list[dict], **settings: object) -> PrometheusObserver:
    obs = PrometheusObserver(Settings(**{"http_enabled": False, **settings}), serve=False, live=False)  # type: ignore[arg-type]
    for p in progress:
        obs.process(CapturedEvent("progress", json.dumps(p), 0.0, 0.0))
    return obs


def series(obs: PrometheusObserver, name: str) -> list:
    return [
        s for f in text_string_to_metric_families(generate_latest(obs.prometheus.registry).decode()) for s in f.samples if s.name == name
    ]


def with_partitions(n: int) -> dict:
    """The last recorded progress, as if its operator had reported n store instances."""
    p = copy.deepcopy(PROGRESS[-1])
    p["batchId"] = 2000
    custom = p["stateOperators"][0]["customMetrics"]
    for key in [k for k in custom if k.startswith("SnapshotLastUploaded.")]:
        del custom[key]
    for i in range(n):
        custom[f"SnapshotLastUploaded.partition_{i}_default"] = 1000 - (i % 50)
    return p


def test_per_partition_series_are_bounded_to_top_k() -> None:
    obs = observer_with([with_partitions(2000)], partition_top_k=7)
    lag = series(obs, "spark_state_snapshot_lag_batches")
    op0 = [s for s in lag if s.labels["operator_index"] == "0"]
    assert len(op0) == 7
    assert all(s.value == 2001 - 951 for s in op0)  # the most lagging: batchId+1 - smallest version


def test_per_partition_series_can_be_turned_off() -> None:
    obs = observer_with([with_partitions(100)], partition_top_k=0)
    assert series(obs, "spark_state_snapshot_lag_batches") == []
    assert series(obs, "spark_state_rows")


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        obs = PrometheusObserver(Settings(http_port=port))
        with pytest.raises(ExporterError, match=f"127.0.0.1:{port}"):
            obs.start()


def test_endpoint_binds_loopback_and_requires_basic_auth_when_set() -> None:
    obs = PrometheusObserver(Settings(http_port=0, basic_auth_user="scraper", basic_auth_password="s3cret")).start()
    try:
        assert obs.server.host == "127.0.0.1"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(obs.server.url, timeout=5)
        assert err.value.code == 401
        request = urllib.request.Request(obs.server.url, headers={"Authorization": "Basic c2NyYXBlcjpzM2NyZXQ="})
        body = urllib.request.urlopen(request, timeout=5).read().decode()
        assert "spark_state_observer_events_received_total" in body
    finally:
        obs.stop()


def test_endpoint_serves_tls(tls_files) -> None:
    cert, key = tls_files
    obs = PrometheusObserver(Settings(http_port=0, tls_certfile=str(cert), tls_keyfile=str(key))).start()
    try:
        context = ssl.create_default_context(cafile=str(cert))
        body = urllib.request.urlopen(obs.server.url, context=context, timeout=5).read().decode()
        assert obs.server.url.startswith("https://") and "spark_state_observer_queries" in body
    finally:
        obs.stop()


def test_missing_tls_files_are_a_clear_error(tmp_path) -> None:
    with pytest.raises(ExporterError, match="TLS"):
        PrometheusObserver(Settings(http_port=0, tls_certfile=str(tmp_path / "no.pem"), tls_keyfile=str(tmp_path / "no.key"))).start()
