"""One run of a stateful query in Spark's real-time mode (4.3) on Kafka, with the observer attached.

Used by ``scripts/record_realtime.py``: a restart is two runs of this script, in two processes, on one
checkpoint. ``--query dedup`` is ``dropDuplicates`` on the record's value, ``--query aggregation`` a count
per key, ``--query slow_dedup`` the dedup behind an expression summing ``--slow-elements`` numbers per record; both write to a Kafka topic (real-time mode's sinks are Kafka and foreach) in update mode, under
``trigger(realTime=...)``: every "batch" lasts the trigger interval, which is a checkpoint interval.

Writes into ``--out`` what ``scripts/scenario_job.py`` writes (``progress.jsonl``, ``signals.jsonl``,
``metrics.prom``, ``run.json``, the event log under ``eventlog/``), plus the trigger interval in
``run.json`` (``real_time_seconds``) so the recording's truth comes from the run itself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from scenario_job import drain, record_signals, wait_batches, write_jsonl, write_outputs, write_run_facts  # noqa: E402


def start_query(spark, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The stateful query under a real-time trigger, reading ``--topic`` and writing ``--sink-topic``."""
    from pyspark.sql import functions as F

    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .load()
        .select(F.col("key").cast("string").alias("k"), F.col("value").cast("string").alias("v"))
    )
    if args.query == "dedup":
        rows = records.dropDuplicates(["v"]).select(F.col("k").alias("key"), F.col("v").alias("value"))
    elif args.query == "slow_dedup":
        # every record costs summing a --slow-elements long sequence (JVM only: a Python UDF under real-time mode
        # hung after its first batch here), slower than the producer, so the query falls behind; the length
        # depends on the row so that the optimizer cannot fold it into a constant
        cost = F.expr(f"aggregate(sequence(1L, {args.slow_elements}L + length(v) * 0L), 0L, (a, x) -> a + x)")
        rows = (
            records.select("k", F.concat("v", F.lit("#"), (cost * 0).cast("string")).alias("v"))
            .dropDuplicates(["v"])
            .select(F.col("k").alias("key"), F.col("v").alias("value"))
        )
    else:
        rows = records.groupBy("k").agg(F.count("*").alias("n")).select(F.col("k").alias("key"), F.col("n").cast("string").alias("value"))
    return (
        rows.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.sink_topic)
        .option("checkpointLocation", args.checkpoint)
        .outputMode("update")
        .queryName(args.name)
        .trigger(realTime=f"{args.real_time_seconds} seconds")
        .start()
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--sink-topic", required=True)
    ap.add_argument("--kafka-jars", required=True, help="comma-separated local jars of Spark's Kafka connector")
    ap.add_argument("--query", choices=("dedup", "aggregation", "slow_dedup"), default="dedup")
    ap.add_argument("--slow-elements", type=int, default=5_000_000, help="elements summed per record (--query slow_dedup)")
    ap.add_argument("--name", default="realtime_dedup")
    ap.add_argument("--real-time-seconds", type=float, default=5.0, help="the real-time trigger's interval (a checkpoint interval)")
    ap.add_argument("--batches", type=int, default=6)
    # real-time mode runs every stage of a batch at once: source partitions + shuffle partitions task slots
    ap.add_argument("--master", default="local[6]")
    ap.add_argument("--partitions", type=int, default=2, help="spark.sql.shuffle.partitions")
    args = ap.parse_args()

    import spark_state_observer as observer
    from spark_state_observer.cli.demo import spark_session

    os.makedirs(args.out, exist_ok=True)
    started = time.time()
    spark = spark_session(
        master=args.master,
        event_log_dir=os.path.join(args.out, "eventlog"),
        extra={
            "spark.sql.shuffle.partitions": str(args.partitions),
            "spark.jars": args.kafka_jars,
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    handle = observer.attach(spark, http_port=0)
    signals = record_signals(handle)
    query = start_query(spark, args)
    wait_batches(query, args.batches, timeout=args.batches * args.real_time_seconds * 6 + 120)
    ended = time.time()
    progress = [p.json for p in query.recentProgress]
    spark_version = spark.version
    query.stop()
    drain(handle, 1)
    metrics = urllib.request.urlopen(handle.url, timeout=10).read().decode()
    handle.stop()
    spark.stop()
    write_jsonl(os.path.join(args.out, "progress.jsonl"), progress)
    write_outputs(args.out, metrics, signals)
    write_run_facts(args.out, spark_version, query, progress, started, ended, None, None)
    with open(os.path.join(args.out, "run.json")) as f:
        facts = json.load(f)
    facts.update(real_time_seconds=args.real_time_seconds, query=args.query, shuffle_partitions=args.partitions)
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump(facts, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
