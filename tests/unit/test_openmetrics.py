"""OpenMetrics on request: counters carry their creation time (``_created``); the text format 0.0.4 stays as it was."""

from __future__ import annotations

import json
import shutil
import socket
import time
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from conftest import eventlog_dir, fixture_runs, progress_lines
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.settings import Settings

# what Prometheus sends: OpenMetrics first
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
RUN_DIR = next(run for run in fixture_runs() if run.endswith("rocksdb_restart/run1"))
RUN = progress_lines(RUN_DIR)


def _get(url: str, accept: str = PROMETHEUS_ACCEPT) -> tuple[str, bytes]:
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": accept}), timeout=10) as response:
        return response.headers["Content-Type"], response.read()


def _samples(families: object, drop_created: bool = False) -> set[tuple[str, tuple, str]]:
    """The application's samples (the observer's own move between two GETs)."""
    return {
        (s.name, tuple(sorted(s.labels.items())), repr(s.value))
        for f in families  # type: ignore[attr-defined]
        if not f.name.startswith("spark_state_observer_")
        for s in f.samples
        if not (drop_created and s.name.endswith("_created"))
    }


def test_openmetrics_on_request_gives_counters_their_creation_time() -> None:
    began = time.time()
    obs = PrometheusObserver(Settings(http_port=0), live=False).start()
    try:
        for p in RUN[: len(RUN) // 2]:
            obs.submit(CapturedEvent("progress", json.dumps(p), 0.0, 0.0))
        assert obs.flush()
        url = obs.server.url
        # Prometheus's Accept header alone changes nothing: the text format 0.0.4, as before
        kind, text = _get(url)
        assert kind == "text/plain; version=0.0.4; charset=utf-8" and b"_created" not in text
        assert _get(url + "?format=openmetrics", accept="text/plain")[0] == kind  # a client that does not accept it
        kind, om = _get(url + "?format=openmetrics")
        assert kind.startswith("application/openmetrics-text; version=1.0.0;") and om.endswith(b"# EOF\n")
        families = list(openmetrics_families(om.decode()))  # the strict parser: valid OpenMetrics
        assert _samples(families, drop_created=True) == _samples(text_string_to_metric_families(text.decode()))
        created = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in families
            if f.type == "counter"
            for s in f.samples
            if s.name.endswith("_created")
        }
        starts = [at for (name, _), at in created.items() if name == "spark_streaming_query_starts_created"]
        assert starts and all(began <= at <= time.time() for at in created.values()), created
        # later batches move the counters, not their creation times
        for p in RUN[len(RUN) // 2 :]:
            obs.submit(CapturedEvent("progress", json.dumps(p), 0.0, 0.0))
        assert obs.flush()
        later = list(openmetrics_families(_get(url + "?format=openmetrics")[1].decode()))
        again = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in later for s in f.samples if s.name.endswith("_created")}
        assert all(again[key] == at for key, at in created.items())
    finally:
        obs.stop()


def test_the_watcher_serves_openmetrics_with_creation_times(tmp_path) -> None:
    """A watcher catching up a finished log: each query counter gets a creation time, the samples are the text's."""
    logs = tmp_path / "logs"
    shutil.copytree(eventlog_dir(RUN_DIR), logs)
    began = time.time()
    fleet = FleetObserver([str(logs)], Settings(http_port=0), WatchOptions(read_finished_at_start=True))
    fleet.start(follow=False)
    try:
        for _ in range(3):
            fleet.poll_once()
        assert fleet.server is not None
        text = _get(fleet.server.url)[1]
        assert b"spark_streaming_batches_total{" in text and b"_created" not in text
        om = _get(fleet.server.url + "?format=openmetrics")[1]
        families = list(openmetrics_families(om.decode()))
        assert _samples(families, drop_created=True) == _samples(text_string_to_metric_families(text.decode()))
        batches = [s.value for f in families for s in f.samples if s.name == "spark_streaming_batches_created"]
        assert batches and all(began <= at <= time.time() for at in batches)
    finally:
        fleet.stop()


@pytest.mark.parametrize(
    "accept",
    [
        "application/openmetrics-text;version=\x7f\xff",
        "application/openmetrics-text;version=" + "9" * 500,
        "application/openmetrics-text;escaping=\x01",
        "application/openmetrics-text;version=1.0.0;" + ";" * 5000,
    ],
)
def test_hostile_accept_headers_get_an_answer_with_plain_headers(accept: str) -> None:
    obs = PrometheusObserver(Settings(http_port=0), live=False).start()
    try:
        with socket.create_connection(("127.0.0.1", obs.http_port), timeout=10) as s:
            s.sendall(b"GET /metrics?format=openmetrics HTTP/1.0\r\nAccept: " + accept.encode("latin-1") + b"\r\n\r\n")
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        head = answer.partition(b"\r\n\r\n")[0]
        assert head.startswith(b"HTTP/1.0 200 ") and all(32 <= b < 127 for b in head.replace(b"\r\n", b"")), head[:300]
    finally:
        obs.stop()
