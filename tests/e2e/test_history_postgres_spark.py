"""A real Spark job writes its history to a real PostgreSQL."""

from __future__ import annotations

import json
import uuid

import pytest
from pg_server import PASSWORD_USER
from test_history_postgres import _wait

from spark_state_observer.history.loaders import load_batches, load_runs


@pytest.mark.slow
def test_a_spark_job_writes_its_history_to_postgresql(spark, postgres, tmp_path) -> None:
    """The listener on a real query, with the history on the server: every batch, stamped with the
    application's name and id, and nothing dropped."""
    import spark_state_observer as observer
    from spark_state_observer.cli.demo import HDFS, dedup_window_query

    url = postgres.create_database(f"t_{uuid.uuid4().hex[:16]}", owner=PASSWORD_USER)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", HDFS)
    handle = observer.attach(spark, http_enabled=False, history_path=url)
    try:
        query = dedup_window_query(spark, str(tmp_path / "ck"), name="pg_history")
        assert _wait(lambda: len(query.recentProgress) >= 3 or (not query.isActive), 180)
        query.stop()
        assert _wait(lambda: handle.observer.self_metrics.received["terminated"] >= 1, 60)
    finally:
        handle.stop()  # the background writer empties its buffer
    progress = [json.loads(p.json) if hasattr(p, "json") and isinstance(p.json, str) else p for p in query.recentProgress]
    assert handle.observer.self_metrics.dropped.get("history", 0) == 0
    batches = load_batches(url, progress[-1]["id"], run_id=progress[-1]["runId"], with_progress=True)
    assert batches.batch_id.tolist() == [p["batchId"] for p in progress]
    assert set(batches.app) == {spark.sparkContext.appName} and set(batches.app_id) == {spark.sparkContext.applicationId}
    runs = load_runs(url, progress[-1]["id"])
    assert runs.outcome.tolist() == ["clean"]
