"""A streaming job with its own ``observer.py`` and ``streamlit_app.py`` beside it, which it imports.

Started by tests/e2e/test_zerocode_spark.py as ``spark-state-observer run -- python job.py`` from this folder
(copied to a temporary one). Its stateful query groups a rate stream by a Python UDF that calls the job's
own ``observer.bucket``, so Spark's Python workers import that module by name too. It runs until
``--until-file`` appears, then prints one ``RESULT`` JSON line: which file each name came from in the
driver and in the workers (and whether a worker attached anything), and the query's state rows.
Usage: job.py CHECKPOINT_DIR UNTIL_FILE
"""

from __future__ import annotations

import json
import os
import sys
import time

import observer
import streamlit_app
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

APP_NAME, QUERY_NAME = "shadow-job", "shadow_counts"


def where_worker_finds(value: int) -> str:
    """In a Python worker: the job's key, and the files its two modules came from there."""
    import observer as worker_observer
    import streamlit_app as worker_app

    attached = "spark_state_observer.zerocode.sessions" in sys.modules  # only a driver's session imports it
    return json.dumps([os.getpid(), worker_observer.bucket(value), worker_observer.__file__, worker_app.__file__, attached])


def main() -> None:
    checkpoint, until_file = sys.argv[1], sys.argv[2]
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(APP_NAME)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    key = F.udf(observer.bucket)
    counts = spark.readStream.format("rate").option("rowsPerSecond", 10).load().groupBy(key("value").alias("key")).count()
    query = (
        counts.writeStream.format("noop")
        .outputMode("update")
        .queryName(QUERY_NAME)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )
    deadline = time.monotonic() + 240
    while not os.path.exists(until_file) and time.monotonic() < deadline:
        time.sleep(0.5)
    query.stop()
    worker = json.loads(spark.range(3).select(F.udf(where_worker_finds)("id")).first()[0])
    result = {
        "driver": [observer.__file__, observer.OWNER, streamlit_app.__file__, streamlit_app.TITLE],
        "worker": worker,
        "driver_pid": os.getpid(),
        "state_rows": query.lastProgress["stateOperators"][0]["numRowsTotal"],
    }
    spark.stop()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
