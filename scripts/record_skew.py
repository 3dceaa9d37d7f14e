"""Record the state-skew fixtures from real runs: one aggregation, its state even or skewed by key.

    python scripts/record_skew.py [rows] [bytes] [even]     # writes tests/fixtures/skew/<name>/

Each scenario runs in a fresh process on ``local[2]``: a rate source, a key per row, ``groupBy(key).max(value)``
with the RocksDB state store (changelog checkpointing off, so each commit flushes) over ``SHUFFLE_PARTITIONS`` partitions, a 2 s trigger, about a minute. The
key's state partition is ``pmod(hash(key), partitions)`` (Spark's hash partitioning of the aggregation's
shuffle), which lets a scenario aim at one partition, ``HOT_PARTITION``:

- ``rows``: every key of the hot partition, a tenth of the others' keys (about 10x the rows, and the bytes),
  values of about 512 bytes;
- ``bytes``: every key everywhere with a short value, and two keys of the hot partition with values of about
  100 KB (rows even, bytes skewed: two keys hold most of the state);
- ``even``: every key everywhere with a value of about 512 bytes (nothing may fire).

Kept: the event log (task ends carry the per-partition state metrics, among them ``RocksDB: size of all SST
files``) and ``truth.json`` (the scenario, the hot partition, the hot keys).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "skew")
SHUFFLE_PARTITIONS = 8
HOT_PARTITION = 5
KEYS = 2000
ROWS_PER_SECOND = 200
HOT_KEYS = 2  # bytes scenario: keys of the hot partition with a big value
BIG_VALUE_HASHES = 1600  # 64 hex characters each: about 100 KB a value
VALUE_HASHES = 8  # rows and even scenarios: about 512 bytes a value
SCENARIOS = ("rows", "bytes", "even")


def child(name: str, out: str, seconds: float) -> None:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql import functions as F

    logs = os.path.join(out, "eventlog")
    os.makedirs(logs)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(f"skew_{name}")
        .config("spark.ui.enabled", "false")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", logs)
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .config("spark.sql.streaming.stateStore.providerClass", "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
        # without changelog checkpointing every commit flushes the memtable: the tasks report SST sizes each batch
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    part = F.expr(f"pmod(hash(k), {SHUFFLE_PARTITIONS})")
    hot_keys = [
        int(r.k) for r in spark.range(KEYS).withColumnRenamed("id", "k").where(part == HOT_PARTITION).orderBy("k").limit(HOT_KEYS).collect()
    ]
    rows = spark.readStream.format("rate").option("rowsPerSecond", ROWS_PER_SECOND).load().select(F.col("value").alias("id"))
    rows = rows.withColumn("k", F.col("id") % KEYS)

    def hashes(n: int) -> Column:
        return F.expr(f"concat_ws('', transform(sequence(1, {n}), i -> sha2(cast(id * 10000 + i as string), 256)))")

    if name == "rows":
        rows = rows.where((part == HOT_PARTITION) | (F.col("k") % 10 == 0)).withColumn("v", hashes(VALUE_HASHES))
    elif name == "bytes":
        rows = rows.withColumn("v", F.when(F.col("k").isin(hot_keys), hashes(BIG_VALUE_HASHES)).otherwise(F.col("id").cast("string")))
    else:
        rows = rows.withColumn("v", hashes(VALUE_HASHES))
    agg = rows.groupBy("k").agg(F.max("v").alias("v"))
    query = (
        agg.writeStream.outputMode("update")
        .format("noop")
        .queryName(f"skew_{name}")
        .option("checkpointLocation", os.path.join(out, "checkpoint"))
        .trigger(processingTime="2 seconds")
        .start()
    )
    time.sleep(seconds)
    query.stop()
    spark.stop()
    truth = {"scenario": name, "shuffle_partitions": SHUFFLE_PARTITIONS, "hot_partition": None if name == "even" else HOT_PARTITION}
    if name == "bytes":
        truth["hot_keys"] = hot_keys
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)


def record(name: str, seconds: float) -> None:
    target = os.path.join(FIXTURES, name)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, name)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--out", out, "--seconds", str(seconds)]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(target)
        shutil.copy(os.path.join(out, "truth.json"), target)
        shutil.copytree(
            os.path.join(out, "eventlog"), os.path.join(target, "eventlog"), ignore=shutil.ignore_patterns("*.crc", "appstatus*")
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    ap.add_argument("--child")
    ap.add_argument("--out")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long each query runs")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.out, args.seconds)
        return 0
    for name in args.scenarios:
        record(name, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
