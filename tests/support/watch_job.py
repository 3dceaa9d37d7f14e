"""A real streaming application for the watcher's end-to-end test: it only writes its event log.

Spark 4's default event-log settings (rolling folder, zstd); nothing of the observer is attached. Runs a
stateful aggregation for ``--batches`` micro-batches at a fixed trigger, then stops the query and the session
(so the log ends with the terminated and application-end events and the final ``appstatus`` marker).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--event-log-dir", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--trigger-seconds", type=float, default=2.0)
    args = parser.parse_args()

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("watch-e2e")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", args.event_log_dir)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    counts = spark.readStream.format("rate").option("rowsPerSecond", 20).load().groupBy((F.col("value") % 10).alias("key")).count()
    query = (
        counts.writeStream.format("noop")
        .outputMode("update")
        .queryName("watch_e2e")
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        .start()
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        last = query.lastProgress
        if last is not None and last["batchId"] + 1 >= args.batches:
            break
        time.sleep(0.2)
    query.stop()
    time.sleep(1.0)  # let the asynchronous terminated event reach the event log
    spark.stop()


if __name__ == "__main__":
    main()
