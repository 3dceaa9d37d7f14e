"""A job on a local Spark Connect session with the observer attached, exporting over OTLP.

Run by tests/e2e/test_otel_spark.py in its own process: a local Connect server cannot share a process with the
classic session the other tests use. Prints one JSON line with what the test compares against.
Usage: python tests/support/connect_job.py OTLP_ENDPOINT CHECKPOINT_DIR
"""

from __future__ import annotations

import json
import sys
import time

from pyspark.sql import SparkSession

import spark_state_observer as observer
from spark_state_observer.cli.demo import dedup_window_query
from spark_state_observer.embedded.attach import _checkpoint_last_commit, _executor_ids, is_connect


def main(endpoint: str, checkpoint: str) -> None:
    spark = (
        SparkSession.builder.remote("local[2]")
        .appName("spark-state-observer-connect")
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    handle = observer.attach(
        spark, http_enabled=False, history_enabled=False, otlp_endpoint=endpoint, otlp_interval_seconds=1.0, otlp_traces=True
    )
    query = dedup_window_query(spark, checkpoint, rows_per_second=20, name="connect_dedup_window")
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and sum(1 for p in query.recentProgress if p.stateOperators) < 4:
        time.sleep(1)
    query.stop()
    received = handle.observer.self_metrics.received
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and received.get("terminated", 0) < 1:  # events reach the client asynchronously
        time.sleep(0.2)
    handle.flush()
    handle.stop()
    result = {
        "connect": is_connect(spark),
        "app_id": spark.conf.get("spark.app.id"),
        "app_name": spark.conf.get("spark.app.name"),
        "spark_version": spark.version,
        "executor_ids": _executor_ids(spark),
        "last_commit": _checkpoint_last_commit(spark),
        "received": dict(received),
        "signals": [e.kind for e in handle.signals],
        "progress": [json.loads(p.json) for p in query.recentProgress],
    }
    spark.stop()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
