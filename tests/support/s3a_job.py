"""A real stateful application that keeps its event log and its checkpoint in S3, written through s3a.

For the object-store end-to-end test (tests/e2e/test_s3a_spark.py): hadoop-aws and the AWS SDK bundle from
scripts/fetch_hadoop_aws.sh on ``spark.jars``, the S3-compatible server and its credentials from the AWS
environment variables (as a user's job gets them), RocksDB state with changelog checkpointing, Spark 4's
event-log defaults (rolling, zstd) with the smallest part size Spark allows (10 MiB). Its own progress (every
``recentProgress``) is written to ``--progress-out`` at the end, for the test to compare with the watcher.

A part of a rolling log becomes an object only when Spark closes it, at 10 MiB of (uncompressed) events: a
small test query takes many minutes to write that much, so every job carries a padding local property (in
the job-start and stage-submitted events), and a part rolls every few batches.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--event-log-dir", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--jars", required=True, help="class path (':'-separated): hadoop-aws, the AWS SDK bundle, ...")
    parser.add_argument("--progress-out", required=True)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--padding-bytes", type=int, default=2_000_000)
    args = parser.parse_args()

    from spark_state_observer.cli.demo import dedup_window_query, spark_session

    endpoint = os.environ["AWS_ENDPOINT_URL"]
    s3a = {
        "spark.driver.extraClassPath": args.jars,  # local mode: the driver runs the tasks; nothing copied (the bundle is 690 MB)
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https")).lower(),
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": args.event_log_dir,
        "spark.eventLog.compress": "true",
        "spark.eventLog.compression.codec": "zstd",
        "spark.eventLog.rolling.enabled": "true",
        "spark.eventLog.rolling.maxFileSize": "10m",
    }
    spark = spark_session(extra=s3a)
    spark.sparkContext.setLogLevel("ERROR")
    spark.sparkContext.setLocalProperty("sso.test.padding", "p" * args.padding_bytes)  # inherited by the query's thread
    query = dedup_window_query(spark, args.checkpoint, name="s3a_e2e")
    progress: list[dict] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(progress) < args.batches:
        if query.exception() is not None:
            raise SystemExit(f"the query failed: {query.exception()}")
        progress = _progress(query)
        time.sleep(0.2)
    # a snapshot is uploaded by the maintenance thread some time after minDeltasForSnapshot versions: the test
    # inspects one, so the query runs on until the checkpoint holds a snapshot (bounded by the same deadline)
    while time.monotonic() < deadline and not _snapshot_uploaded(spark, args.checkpoint):
        time.sleep(0.5)
    query.stop()
    progress = _progress(query)
    with open(args.progress_out, "w", encoding="utf-8") as f:
        json.dump(progress, f)
    time.sleep(1.0)  # let the asynchronous terminated event reach the event log
    spark.stop()


def _snapshot_uploaded(spark: object, checkpoint: str) -> bool:
    """Whether a RocksDB snapshot zip is in the checkpoint, listed through s3a as Spark sees it."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    pattern = jvm.org.apache.hadoop.fs.Path(checkpoint.rstrip("/") + "/state/*/*/*.zip")
    found = pattern.getFileSystem(spark._jsc.hadoopConfiguration()).globStatus(pattern)  # type: ignore[attr-defined]
    return found is not None and len(found) > 0


def _progress(query: object) -> list[dict]:
    return [json.loads(p.json) if hasattr(p, "_jdict") else p for p in query.recentProgress]  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
