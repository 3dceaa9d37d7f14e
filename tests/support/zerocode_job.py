"""An ordinary PySpark streaming job, with no line about the observer: zero-code attach's test subject.

Started by tests/e2e/test_zerocode_spark.py through ``spark-submit`` (``spark-state-observer run``, ``PYTHONPATH``
alone, ``opentelemetry-instrument``). It counts a rate stream by ``value % 5`` (so its state holds 5
rows), asks the builder for its session twice (the second answer is the same session), runs until
``--until-file`` appears or ``--batches`` stateful batches are done, then creates and stops a session
``--cycles`` more times. It prints one ``RESULT`` JSON line: what a leak or a double attach would change
(the JVM's listeners on each session, the Python threads after each stop).
Usage: zerocode_job.py CHECKPOINT_DIR [--until-file PATH] [--batches N] [--cycles N] [--connect]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

APP_NAME = "zerocode-job"
QUERY_NAME = "zerocode_counts"


def session(connect: bool) -> SparkSession:
    builder = SparkSession.builder.remote("local[2]") if connect else SparkSession.builder.master("local[2]")
    return (
        builder.appName(APP_NAME)
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )


def jvm_listeners(spark: SparkSession) -> int | None:
    """Listeners on the session's streaming bus in the JVM; a Connect client has no JVM to ask."""
    jsession = getattr(spark, "_jsparkSession", None)
    return None if jsession is None else len(jsession.streams().listListeners())


def python_threads() -> list[str]:
    """Threads started in Python; gRPC's own threads that once called into Python stay listed as dummies for good."""
    return sorted(t.name for t in threading.enumerate() if not isinstance(t, threading._DummyThread))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint")
    parser.add_argument("--until-file", default=None)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=0)
    parser.add_argument("--connect", action="store_true", help="a local Spark Connect session instead of a classic one")
    args = parser.parse_args()

    spark = session(args.connect)
    again = session(args.connect)
    result: dict = {"same_session": again is spark, "listeners": [jvm_listeners(spark)]}
    counts = spark.readStream.format("rate").option("rowsPerSecond", 10).load().groupBy((F.col("value") % 5).alias("key")).count()
    query = (
        counts.writeStream.format("noop")
        .outputMode("update")
        .queryName(QUERY_NAME)
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        stateful = sum(1 for p in query.recentProgress if p["stateOperators"])
        if os.path.exists(args.until_file) if args.until_file else stateful >= args.batches:
            break
        time.sleep(0.5)
    query.stop()
    result["batches"] = sum(1 for p in query.recentProgress if p["stateOperators"])
    result["state_rows"] = query.lastProgress["stateOperators"][0]["numRowsTotal"]
    spark.stop()
    result["threads_after_stop"] = [python_threads()]
    for _ in range(args.cycles):
        cycle = session(args.connect)
        result["listeners"].append(jvm_listeners(cycle))
        cycle.stop()
        result["threads_after_stop"].append(python_threads())
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
