"""The exporter with real servers: Prometheus scrapes it, the Pushgateway receives its pushes and goes down."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from test_exporter import PROGRESS

from conftest import Server, free_port, need, prom_query, start_prometheus
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.settings import Settings


@pytest.mark.slow
def test_real_prometheus_scrapes_the_exporter(tmp_path) -> None:
    obs = PrometheusObserver(Settings(http_port=0), live=False)
    obs.start()
    try:
        for p in PROGRESS:
            obs.submit(CapturedEvent("progress", json.dumps(p), time.time(), 0.0))
        assert obs.flush()
        prom = start_prometheus(str(tmp_path), [f"127.0.0.1:{obs.http_port}"])
        try:
            deadline = time.monotonic() + 30
            result: list = []
            while time.monotonic() < deadline and not result:
                result = prom_query(prom, 'spark_state_rows{operator="dedupe"}')
                time.sleep(0.5)
            last = PROGRESS[-1]
            dedupe = next(op for op in last["stateOperators"] if op["operatorName"] == "dedupe")
            assert len(result) == 1
            assert float(result[0]["value"][1]) == dedupe["numRowsTotal"]
            assert result[0]["metric"]["query"] == last["name"] and result[0]["metric"]["query_id"] == last["id"]
            up = prom_query(prom, "up")
            assert up and up[0]["value"][1] == "1"
        finally:
            prom.stop()
    finally:
        obs.stop()


@pytest.mark.slow
def test_pushgateway_mode_pushes_and_survives_the_gateway_being_down(tmp_path) -> None:
    binary = need("prometheus-pushgateway")
    port = free_port()
    gateway_url = f"http://127.0.0.1:{port}"
    # first: the gateway is down; pushing fails, is counted, and nothing raises
    obs = PrometheusObserver(
        Settings(http_enabled=False, pushgateway_url=gateway_url, push_interval_seconds=0.5, push_timeout_seconds=1), live=False
    )
    obs.start()
    for p in PROGRESS:
        obs.submit(CapturedEvent("progress", json.dumps(p), time.time(), 0.0))
    obs.flush()
    time.sleep(1.5)
    assert obs.self_metrics.export_failures["pushgateway"] >= 1
    # then the gateway comes up: the next pushes get through without intervention
    gateway = Server([binary, f"--web.listen-address=127.0.0.1:{port}", f"--persistence.file={tmp_path / 'pg'}"], gateway_url + "/-/ready")
    try:
        deadline = time.monotonic() + 15
        body = ""
        while time.monotonic() < deadline and "spark_state_rows" not in body:
            time.sleep(0.5)
            body = urllib.request.urlopen(gateway_url + "/metrics", timeout=5).read().decode()
        assert 'job="spark_state_observer"' in body and "spark_state_rows{" in body
        obs.stop()
    finally:
        gateway.stop()
