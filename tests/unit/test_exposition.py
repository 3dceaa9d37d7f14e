"""The endpoint's cached text exposition: the same samples as generate_latest, kept current, bounded."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import fixture_runs, progress_lines
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.updates import Update
from spark_state_observer.settings import Settings

RUNS = {run.split("/fixtures/")[1]: progress_lines(run) for run in fixture_runs() if progress_lines(run)}  # runs with batches
RESTART_RUN2 = "rocksdb_restart/run2"


def parsed(text: bytes) -> list[tuple[str, str, str, list[tuple[str, tuple, str]]]]:
    """Families in order with their type, help and samples (values as repr, so NaN compares equal)."""
    return [
        (f.name, f.type, f.documentation, [(s.name, tuple(sorted(s.labels.items())), repr(s.value)) for s in f.samples])
        for f in text_string_to_metric_families(text.decode())
    ]


def assert_same_as_generate_latest(obs: PrometheusObserver) -> bytes:
    text = obs.prometheus.collector.exposition()
    assert parsed(text) == parsed(generate_latest(obs.prometheus.registry))
    return text


def feed(obs: PrometheusObserver, kind: str, payload: dict) -> None:
    obs.process(CapturedEvent(kind, json.dumps(payload), 0.0, 0.0))


def lifecycle(progress: dict, **fields: object) -> dict:
    """A started or terminated event of the query and run of ``progress``."""
    return {"id": progress["id"], "runId": progress["runId"], "name": progress["name"], "timestamp": progress["timestamp"], **fields}


def test_fast_text_matches_generate_latest_on_recorded_runs_and_after_changes() -> None:
    obs = PrometheusObserver(Settings(http_enabled=False), serve=False, live=False)
    for run, progress in RUNS.items():
        if run != RESTART_RUN2:
            feed(obs, "started", lifecycle(progress[0]))
            for p in progress:
                feed(obs, "progress", p)
    first = assert_same_as_generate_latest(obs)
    assert b"spark_state_rows{" in first and b"spark_streaming_query_starts_total{" in first

    # one query fails and restarts (run2): its cached lines must not be served any more
    restarted = RUNS[RESTART_RUN2]
    feed(obs, "terminated", lifecycle(RUNS["rocksdb_restart/run1"][-1], exception="boom"))
    assert_same_as_generate_latest(obs)
    feed(obs, "started", lifecycle(restarted[0], name="renamed"))
    for p in restarted:
        feed(obs, "progress", {**p, "name": "renamed"})
    after = assert_same_as_generate_latest(obs)
    assert b'query="renamed"' in after and after != first

    # what the signals change without an event: a gauge alone (as the live tick does), and a counter
    query_id = restarted[0]["id"]
    obs.tracker.apply_updates([Update(catalog.QUERY_SECONDS_SINCE_PROGRESS, (), 42.5, query_id)])
    assert b"spark_streaming_query_seconds_since_progress{" in assert_same_as_generate_latest(obs)
    obs.tracker.apply_updates(
        [
            Update(catalog.QUERY_SECONDS_SINCE_PROGRESS, (), None, query_id),
            Update(catalog.STATE_STORE_RELOADS, (("operator_index", "0"), ("operator", "dedupe")), 1.0, query_id),
        ]
    )
    text = assert_same_as_generate_latest(obs)
    assert b"spark_streaming_query_seconds_since_progress{" not in text
    assert b"spark_state_store_reloads_total{" in text


def test_forgotten_queries_leave_the_text_and_the_cache() -> None:
    obs = PrometheusObserver(Settings(http_enabled=False, max_queries=2), serve=False, live=False)
    base = RUNS["rocksdb_restart/run1"][-1]
    ids = [f"00000000-0000-0000-0000-00000000000{i}" for i in range(3)]
    for i, query_id in enumerate(ids[:2]):
        feed(obs, "progress", {**base, "id": query_id, "name": f"q{i}"})
    assert b'query="q0"' in assert_same_as_generate_latest(obs)
    feed(obs, "progress", {**base, "id": ids[2], "name": "q2"})  # evicts q0, the least recently touched
    text = assert_same_as_generate_latest(obs)
    assert b'query="q0"' not in text and b'query="q1"' in text and b'query="q2"' in text
    assert set(obs.prometheus.collector._lines._entries) == set(ids[1:])


def test_endpoint_serves_the_fast_text_behind_basic_auth_with_gzip() -> None:
    obs = PrometheusObserver(Settings(http_port=0, basic_auth_user="scraper", basic_auth_password="s3cret"), live=False).start()
    try:
        for p in RUNS["rocksdb_restart/run1"]:
            obs.submit(CapturedEvent("progress", json.dumps(p), 0.0, 0.0))
        assert obs.flush()
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(obs.server.url, timeout=5)
        assert err.value.code == 401
        auth = {"Authorization": "Basic c2NyYXBlcjpzM2NyZXQ="}
        response = urllib.request.urlopen(urllib.request.Request(obs.server.url, headers={**auth, "Accept-Encoding": "gzip"}), timeout=5)
        assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert response.headers["Content-Encoding"] == "gzip"
        body = gzip.decompress(response.read())
        assert b"spark_state_rows{" in body
        served = [f for f in parsed(body) if not f[0].startswith("spark_state_observer_")]  # the worker still counts
        assert served == [f for f in parsed(generate_latest(obs.prometheus.registry)) if not f[0].startswith("spark_state_observer_")]
        plain = urllib.request.urlopen(urllib.request.Request(obs.server.url, headers=auth), timeout=5)
        assert plain.headers.get("Content-Encoding") is None and b"spark_state_rows{" in plain.read()
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(urllib.request.Request(obs.server.url, data=b"", headers=auth), timeout=5)
        assert err.value.code == 405
    finally:
        obs.stop()
