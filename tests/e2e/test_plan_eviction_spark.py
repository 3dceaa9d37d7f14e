"""The listener reads which states the watermark evicts from a live run's plan, as ``watch`` and ``replay`` read the log's."""

from __future__ import annotations

import time
from typing import Any

import pytest


def _run(spark: Any, tmp_path: Any, name: str, build: Any) -> Any:
    """Start ``build``'s aggregation (rate source, 10 s watermark, noop sink) and wait for its third batch."""
    df = spark.readStream.format("rate").option("rowsPerSecond", 20).load().withWatermark("timestamp", "10 seconds")
    query = (
        build(df)
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(tmp_path / name))
        .queryName(name)
        .trigger(processingTime="1 second")
        .start()
    )
    deadline = time.monotonic() + 180
    while (query.lastProgress is None or query.lastProgress["batchId"] < 2) and time.monotonic() < deadline:
        time.sleep(0.2)
    return query


@pytest.mark.slow
def test_the_listener_reads_the_watermark_eviction_from_the_live_plan(spark: Any, tmp_path: Any) -> None:
    """A count per key and 30-minute window (its key holds the watermarked window: evicted) and a count per key alone
    (the watermark is not in the key: never evicted), each asked as the growth rule asks, by the progress's ids."""
    from pyspark.sql import functions as F

    import spark_state_observer as observer

    handle = observer.attach(spark, http_enabled=False, history_enabled=False, snapshot_scan_seconds=0)
    try:
        evicts = handle.observer.engine.growth.eviction
        assert evicts is not None
        said = {}
        for name, build in (
            ("windows_30m", lambda df: df.groupBy(F.col("value") % 100, F.window("timestamp", "30 minutes")).count()),
            ("keys_only", lambda df: df.groupBy(F.col("value") % 100).count()),
        ):
            query = _run(spark, tmp_path, name, build)
            try:
                last = query.lastProgress
                assert last is not None and last["batchId"] >= 2
                (op,) = last["stateOperators"]
                said[name] = evicts(str(query.id), str(query.runId), 0, op["operatorName"])
                assert evicts(str(query.id), str(query.runId), 0, "dedupe") is None  # not the operator the plan names
            finally:
                query.stop()
        assert said == {"windows_30m": True, "keys_only": False}
    finally:
        handle.stop()
