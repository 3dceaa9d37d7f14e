"""Split from tests/unit/test_snapshot_health.py: the tests of it that need real Spark."""

from __future__ import annotations

import pytest

from spark_state_observer.metrics import catalog


@pytest.mark.slow
def test_the_listener_lists_a_live_query_checkpoint(spark, tmp_path) -> None:
    """A real query that never uploads a snapshot, 8 partitions: Spark reports 5 instances, the listener knows all 8."""
    import time

    import spark_state_observer as observer
    from spark_state_observer.cli.demo import dedup_window_query

    confs = {
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1000000",
        "spark.sql.streaming.stateStore.forceSnapshotUploadOnLag": "false",
    }
    before = {k: spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        spark.conf.set(k, v)
    handle = observer.attach(spark, http_enabled=False, history_enabled=False, snapshot_scan_seconds=0)
    try:
        query = dedup_window_query(spark, str(tmp_path / "ck"), name="snapshots_live")
        deadline = time.monotonic() + 180
        while (query.lastProgress is None or query.lastProgress["batchId"] < 1) and time.monotonic() < deadline:
            time.sleep(0.2)
        query.stop()
        handle.flush()
        last = query.lastProgress
        (record,) = [r for r in handle.observer.tracker.snapshot() if r.query_id == str(query.id)]
        got = {
            (s.name, dict(labels)["operator_index"]): v
            for (s, labels), v in record.signal_gauges.items()
            if "operator_index" in dict(labels) and "partition" not in dict(labels)
        }
        reported = [k for k in last["stateOperators"][0]["customMetrics"] if k.startswith("SnapshotLastUploaded.")]
        assert len(reported) == 5  # what Spark tells
        for op in ("0", "1"):
            assert got[(catalog.SNAPSHOT_INSTANCES_NEVER_UPLOADED.name, op)] == 8
            assert got[(catalog.SNAPSHOT_INSTANCES_UNKNOWN.name, op)] == 0
            assert got[(catalog.SNAPSHOT_RESTORE_REPLAY_FILES.name, op)] == 8 * (last["batchId"] + 1)
    finally:
        handle.stop()
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
