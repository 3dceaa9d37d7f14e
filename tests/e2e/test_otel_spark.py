"""OTLP export from real Spark: a local session and a Spark Connect server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from test_otel import key

from conftest import ROOT
from otlp_receiver import GrpcReceiver, HttpReceiver


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
    import spark_state_observer as observer
    from spark_state_observer.cli.demo import dedup_window_query

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
            [sys.executable, "tests/support/connect_job.py", server.endpoint, str(tmp_path / "cp")],
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
