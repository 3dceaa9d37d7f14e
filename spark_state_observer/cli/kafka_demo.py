"""``spark-state-observer demo --source kafka``: a local broker, a producer and a stateful query reading it.

Starts a single-node KRaft broker on loopback (``spark_state_observer.offline.kafka_local``), a 3-partition topic, a producer
writing ``rows_per_second`` records in bursts, and a windowed count per key on the topic (RocksDB, a 10 s
watermark on the record timestamps, ``maxOffsetsPerTrigger`` so that a backlog is read over several batches,
which is what makes Kafka lag visible) with the observer attached: the Kafka lag per partition, in seconds,
the source health signals and the catch-up forecast all show on its endpoint. Without the broker or connector
jars it says how to get them (``bash scripts/fetch_kafka.sh``) instead of starting anything.

``kafka_window_query`` is also what ``scripts/scenario_job.py --source kafka`` runs (the fixtures and the
end-to-end tests), so the demo shows what the tests check.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

TOPIC = "events"
PARTITIONS = 3


def kafka_window_query(
    spark: Any,
    checkpoint: str,
    bootstrap: str,
    topic: str,
    name: str = "kafka_window_count",
    trigger_seconds: float = 2.0,
    max_offsets_per_trigger: int | None = None,
    options: dict[str, str] | None = None,
) -> Any:
    """Start a stateful query on a Kafka topic: count per key and 10 s window of record time, watermark 10 s.

    ``options`` are more of the Kafka source's options (``failOnDataLoss``, say: the recorded incidents run
    with it both ways)."""
    from pyspark.sql import functions as F

    from spark_state_observer.cli.demo import start_noop

    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets_per_trigger)
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    counts = (
        reader.load()
        .select(F.col("key").cast("string").alias("key"), "timestamp")
        .withWatermark("timestamp", "10 seconds")
        .groupBy(F.window("timestamp", "10 seconds"), "key")
        .count()
    )
    return start_noop(counts, name, checkpoint, trigger_seconds)


def missing_parts() -> str | None:
    """Why the Kafka demo cannot run here (jars or client missing, with the fix), or None when it can."""
    from spark_state_observer.offline.kafka_local import MissingKafka, broker_dir, connector_jars

    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "the Python Kafka client is missing: pip install 'spark-state-observer[kafka]'"
    try:
        broker_dir()
        connector_jars()
    except MissingKafka as exc:
        return f"{exc} (the script downloads the Kafka broker and Spark's Kafka connector from Maven Central)"
    return None


def run_kafka_demo(rows_per_second: int = 50, duration: float | None = None, checkpoint: str | None = None, **settings: Any) -> None:
    """Run the Kafka demo until Ctrl-C or ``duration`` seconds; the broker is stopped by its pid at the end."""
    import spark_state_observer as observer
    from spark_state_observer.cli.demo import spark_session
    from spark_state_observer.offline.kafka_local import BurstProducer, KafkaBroker, connector_jars

    with KafkaBroker() as broker:
        broker.create_topic(TOPIC, PARTITIONS)
        producer = BurstProducer(broker.bootstrap, TOPIC, PARTITIONS, rows_per_second).start()
        spark = spark_session(extra={"spark.jars": ",".join(connector_jars())})
        spark.sparkContext.setLogLevel("ERROR")
        handle = observer.attach(spark, **settings)
        handle.on("*", lambda e: print(f"[signal] {e.describe()}", flush=True))
        checkpoint = checkpoint or tempfile.mkdtemp(prefix="spark-state-observer-kafka-demo-")
        # a batch may read at most 2 s of input x 2: a stop or a slow batch leaves a backlog read over several batches
        query = kafka_window_query(spark, checkpoint, broker.bootstrap, TOPIC, max_offsets_per_trigger=max(10, 4 * rows_per_second))
        print(
            f"spark-state-observer demo: Kafka broker {broker.bootstrap}, topic {TOPIC} ({PARTITIONS} partitions, "
            f"{rows_per_second} records/s); query {query.name}, checkpoint {checkpoint}",
            flush=True,
        )
        if handle.url:
            print(f"metrics: {handle.url}   (Ctrl-C to stop)", flush=True)
        print(
            f"inspect the checkpoint's Kafka backlog: spark-state-observer inspect {checkpoint} --kafka-bootstrap {broker.bootstrap}",
            flush=True,
        )
        if handle.observer.settings.history_enabled:
            print(f"history: {os.path.abspath(handle.observer.settings.history_path)}", flush=True)
        try:
            deadline = None if duration is None else time.monotonic() + duration
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.5)
                if not query.isActive:
                    break
        except KeyboardInterrupt:
            pass
        finally:
            query.stop()
            handle.stop()
            spark.stop()
            producer.stop()
