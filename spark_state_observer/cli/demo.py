"""``spark-state-observer demo``: a local Spark running a stateful pipeline with the observer attached.

Pipeline (one query, two state operators): a rate source, streaming deduplication with a watermark,
then a tumbling-window count per key. RocksDB with changelog checkpointing by default, or the
HDFS-backed provider. It is also what the tests and the fixture recorder run, so what a user sees in
the demo is what the tests check.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

from spark_state_observer.model import kinds

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def add_parser(sub: Any) -> None:
    demo = sub.add_parser("demo", help="run a local stateful pipeline with the observer attached")
    demo.add_argument("--provider", choices=("rocksdb", "hdfs"), default="rocksdb")
    demo.add_argument(
        "--source",
        choices=("rate", "kafka"),
        default="rate",
        help="rate: Spark's rate source; kafka: a local Kafka broker and producer (needs `bash scripts/fetch_kafka.sh`)",
    )
    demo.add_argument("--rows-per-second", type=int, default=50)
    demo.add_argument("--duration", type=float, default=None, help="seconds to run (default: until Ctrl-C)")
    demo.add_argument("--port", type=int, default=None, help="metrics port (default: setting http_port, 9108)")
    demo.add_argument("--host", default=None, help="metrics bind address (default: 127.0.0.1)")
    demo.add_argument("--checkpoint", default=None, help="checkpoint folder (default: a new temporary one)")
    demo.add_argument(
        "--ui",
        nargs="?",
        type=int,
        const=8501,
        default=None,
        metavar="PORT",
        help="also serve the state browser over the demo's history (default port 8501)",
    )
    demo.add_argument("--otlp-endpoint", default=None, help="also export over OTLP to this collector, e.g. http://127.0.0.1:4318")
    demo.add_argument("--otlp-protocol", choices=("http/protobuf", "grpc"), default=None, help="OTLP protocol (default: http/protobuf)")
    demo.add_argument(
        "--watch", action="store_true", help="run two small applications writing event logs and the event-log watcher following both"
    )
    demo.set_defaults(run=run, serving=True)


def run(args: argparse.Namespace) -> int:
    """``demo --watch`` is the watcher's demo (``spark_state_observer.cli.demo_watch``); without it, the embedded one."""
    if args.watch:
        from spark_state_observer.cli import demo_watch

        return demo_watch.run(args)
    return _embedded(args)


def _embedded(args: argparse.Namespace) -> int:
    """The demo with the observer attached in the driver (a rate source, or a local Kafka broker)."""
    from spark_state_observer.exporters.http import ExporterError

    options = (
        ("http_port", args.port),
        ("http_host", args.host),
        ("otlp_endpoint", args.otlp_endpoint),
        ("otlp_protocol", args.otlp_protocol),
    )
    overrides = {k: v for k, v in options if v is not None}
    try:
        if args.source == "kafka":
            from spark_state_observer.cli.kafka_demo import missing_parts, run_kafka_demo

            missing = missing_parts()
            if missing is not None:
                print(f"spark-state-observer: the Kafka demo needs a local broker and Spark's Kafka connector: {missing}", file=sys.stderr)
                return 2
            run_kafka_demo(args.rows_per_second, args.duration, args.checkpoint, **overrides)
        else:
            run_demo(args.provider, args.rows_per_second, args.duration, args.checkpoint, ui_port=args.ui, **overrides)
    except ExporterError as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    return 0


def spark_session(
    master: str = "local[2]",
    provider: str = "rocksdb",
    changelog: bool = True,
    event_log_dir: str | None = None,
    event_log_codec: str | None = "zstd",
    extra: dict[str, str] | None = None,
) -> Any:
    """A small local session tuned for stateful streaming on few cores (2 shuffle partitions, no UI)."""
    from pyspark.sql import SparkSession

    from spark_state_observer.zerocode.hook import quiet_pandas_notice

    quiet_pandas_notice()  # PySpark's pandas-3 notice at every start: why in ``quiet_pandas_notice``
    builder = (
        SparkSession.builder.master(master)
        .appName("spark-state-observer-demo")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB if provider == "rocksdb" else HDFS)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", str(changelog).lower())
        .config("spark.sql.streaming.stateStore.minDeltasForSnapshot", "5")
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "5s")
    )
    if event_log_dir:
        os.makedirs(event_log_dir, exist_ok=True)
        builder = builder.config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", event_log_dir)
        if event_log_codec:
            builder = builder.config("spark.eventLog.compress", "true").config("spark.eventLog.compression.codec", event_log_codec)
        else:
            builder = builder.config("spark.eventLog.compress", "false")
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def start_noop(counts: Any, name: str, checkpoint: str, trigger_seconds: float) -> Any:
    """Start a demo's aggregation into the noop sink (update mode): the demos exist for their state, not their output."""
    return (
        counts.writeStream.format("noop")
        .outputMode("update")
        .queryName(name)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .start()
    )


def dedup_window_query(
    spark: Any, checkpoint: str, rows_per_second: int = 50, name: str = "demo_dedup_window", trigger_seconds: float = 1.0, keys: int = 10
) -> Any:
    """Start the demo query: rate → dropDuplicates(watermark) → window count per key → noop sink."""
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rows_per_second)
        .load()
        .withColumn("key", F.col("value") % keys)
        .withWatermark("timestamp", "5 seconds")
    )
    deduped = events.dropDuplicates(["value", "timestamp"])
    counts = deduped.groupBy(F.window("timestamp", "5 seconds"), "key").count()
    return start_noop(counts, name, checkpoint, trigger_seconds)


def unbounded_query(spark: Any, checkpoint: str, rows_per_second: int = 50, name: str = "demo_unbounded") -> Any:
    """A groupBy without watermark: its state only grows (the unbounded-state detector's bad case)."""
    from pyspark.sql import functions as F

    counts = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rows_per_second)
        .load()
        .groupBy((F.col("value") % 100000).alias("key"))
        .count()
    )
    return start_noop(counts, name, checkpoint, 1.0)


def run_demo(
    provider: str = "rocksdb",
    rows_per_second: int = 50,
    duration: float | None = None,
    checkpoint: str | None = None,
    ui_port: int | None = None,
    **settings: Any,
) -> None:
    """Run the demo until Ctrl-C, SIGTERM or ``duration`` seconds, printing where the metrics are.

    With ``ui_port`` the state browser runs beside it over the demo's history. Stopping is graceful:
    Ctrl-C only sets a flag (an interrupt in the middle of a py4j call would break the JVM's connection),
    and the query is stopped between two batches, so Spark has no batch write to abort and log.
    """
    import signal
    import subprocess
    import sys
    import threading
    import time

    import spark_state_observer as observer

    stop = threading.Event()
    spark = spark_session(provider=provider)
    # after the session: PySpark's own SIGINT handler cancels every running job (each logs an aborted write)
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    spark.sparkContext.setLogLevel("ERROR")
    handle = observer.attach(spark, **settings)
    handle.on("*", lambda e: print(f"[signal] {e.describe()}", flush=True))
    checkpoint = checkpoint or tempfile.mkdtemp(prefix="spark-state-observer-demo-")
    query = dedup_window_query(spark, checkpoint, rows_per_second)
    browser: subprocess.Popen[bytes] | None = None
    print(f"spark-state-observer demo: query {query.name} ({provider}), checkpoint {checkpoint}", flush=True)
    if handle.url:
        print(f"metrics: {handle.url}   (Ctrl-C to stop)", flush=True)
    if handle.observer.settings.history_enabled:
        history = os.path.abspath(handle.observer.settings.history_path)
        ui_command = ["spark-state-observer", "ui", "--history", history, "--checkpoint-root", checkpoint]
        if ui_port is not None:
            browser = subprocess.Popen(
                [sys.executable, "-m", "spark_state_observer.cli", *ui_command[1:], "--port", str(ui_port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            print(f"state browser: http://127.0.0.1:{ui_port}/", flush=True)
        else:
            print(f"history: {history}   (browse: {' '.join(ui_command)}, or run the demo with --ui)", flush=True)
        print(f"assistant (MCP): spark-state-observer mcp --history {history} --checkpoint-root {checkpoint}", flush=True)
    print("Grafana 13 (v2 dashboards): spark-state-observer mixin export --out DIR --dashboard-schema v2", flush=True)
    otlp = handle.observer.settings.otlp_endpoint or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if otlp:
        print(f"OTLP export to {otlp} (every OTEL_METRIC_EXPORT_INTERVAL ms, 60 s by default, and on stop)", flush=True)
    try:
        deadline = None if duration is None else time.monotonic() + duration
        while not stop.wait(0.5) and (deadline is None or time.monotonic() < deadline):
            if not query.isActive:
                break
        _stop_between_batches(spark, query)
        _wait_terminated(handle, str(query.id))
    finally:
        handle.stop()
        spark.stop()
        if browser is not None and browser.poll() is None:
            browser.terminate()
            browser.wait(10)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        print("spark-state-observer demo: stopped", flush=True)


def _stop_between_batches(spark: Any, query: Any, wait_seconds: float = 15.0) -> None:
    """Stop ``query`` when no trigger is running, so Spark has no batch write to abort.

    On a busy machine batches can follow each other without a pause; after ``wait_seconds`` the running
    batch is interrupted all the same (harmless: the checkpoint resumes from the last committed batch),
    with Spark's logging off, since the "aborting" lines it writes then are no error of the demo's.
    """
    import time

    deadline = time.monotonic() + wait_seconds
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.05)
    spark.sparkContext.setLogLevel("OFF")
    query.stop()


def _wait_terminated(handle: Any, query_id: str, timeout: float = 10.0) -> None:
    """Spark posts the query's terminated event on its asynchronous listener bus: give it time to arrive
    before the observer stops, so the demo's last signal (and history row) is the termination."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = handle.observer.tracker.get(query_id)
        if record is None or record.status not in (kinds.ACTIVE, kinds.IDLE):
            break
        time.sleep(0.1)
    handle.flush()
