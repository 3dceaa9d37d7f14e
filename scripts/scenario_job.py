"""One run of a real stateful job with the observer attached, recording what it saw.

Used by ``scripts/record_fixtures.py`` (to capture the test fixtures from real runs) and by the
end-to-end tests (a restart is two runs of this script, in two processes, on one checkpoint).

Writes into ``--out``: ``progress.jsonl`` (``query.recentProgress`` as Spark's JSON), ``metrics.prom``
(the observer's endpoint scraped after the last batch), ``signals.jsonl`` (derived events), and the
Spark event log under ``--out/eventlog`` when ``--event-log`` is given, and ``run.json`` (what this run
did, from the job itself: start/end times, batch ids, query and run id, the exception it ended with) so
``scripts/record_incidents.py`` can write ground truth without anyone typing it.

``--query`` picks another pipeline from ``scripts/incident_queries.py`` (joins, failing sinks, UDFs, ...);
``--duration`` runs for a wall-clock time instead of a batch count; ``--expect-failure`` waits for the
query to terminate with an exception and records it.

``--source kafka --bootstrap HOST:PORT --topic T --kafka-jars a.jar,b.jar`` reads a Kafka topic instead of
the rate source (a windowed count per key with a watermark on the records' timestamps); the connector
jars are local files (``scripts/fetch_kafka.sh``) handed to Spark by ``spark.jars``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def record_signals(handle) -> list[dict]:  # type: ignore[no-untyped-def]
    """Collect every signal the observer derives, as JSON-ready dicts, with the thread that delivered it and when."""
    import threading

    signals: list[dict] = []
    handle.on(
        "*",
        lambda e: signals.append(
            {
                "kind": e.kind,
                "query_id": e.query_id,
                "run_id": e.run_id,
                "timestamp": e.timestamp,
                "attributes": e.attributes,
                "thread": threading.current_thread().name,
                "received": time.time(),
            }
        ),
    )
    return signals


def record_restore_listener(handle) -> list[dict]:  # type: ignore[no-untyped-def]
    """The calls of a restore listener object (``handle.add_restore_listener``), with the thread that made each."""
    import threading

    from spark_state_observer.signals.restore_listener import RestoreListener, RestoreUpdate

    calls: list[dict] = []

    class RestoreCalls(RestoreListener):
        def _record(self, method: str, r: RestoreUpdate) -> None:
            calls.append(
                {"method": method, "operator": r.operator, "partitions_done": r.partitions_done, "thread": threading.current_thread().name}
            )

        def on_restore_start(self, restore: RestoreUpdate) -> None:
            self._record("on_restore_start", restore)

        def on_restore_progress(self, restore: RestoreUpdate) -> None:
            self._record("on_restore_progress", restore)

        def on_restore_end(self, restore: RestoreUpdate) -> None:
            self._record("on_restore_end", restore)

    handle.add_restore_listener(RestoreCalls())
    return calls


def wait_rest(spark, timeout: float = 120) -> None:  # type: ignore[no-untyped-def]
    """Wait until the driver's REST API answers: its first request starts Jersey (seconds on a busy machine), and a
    restart's first batch, whose restore the observer polls live, comes right after the query starts."""
    url = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{spark.sparkContext.applicationId}/jobs"
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=timeout).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def wait_batches(query, n: int, timeout: float = 240) -> None:  # type: ignore[no-untyped-def]
    """Wait until the query has completed ``n`` batches after the first one seen."""
    start = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not query.isActive:
            raise SystemExit(f"the query stopped before {n} batches: {query.exception()}")
        last = query.lastProgress
        if last is not None:
            start = last["batchId"] if start is None else start
            if last["batchId"] - start + 1 >= n:
                return
        time.sleep(0.2)
    raise TimeoutError(f"fewer than {n} batches in {timeout}s")


def wait_caught_up(query, extra: int = 2, timeout: float = 300) -> None:  # type: ignore[no-untyped-def]
    """Wait until a batch read up to the latest offsets of every Kafka partition, then ``extra`` batches more."""
    deadline = time.monotonic() + timeout
    caught_up_at = None
    while time.monotonic() < deadline:
        last = query.lastProgress
        if last is not None:
            sources = json.loads(last.json)["sources"] if hasattr(last, "_jdict") else last["sources"]
            if caught_up_at is None and all(s.get("endOffset") == s.get("latestOffset") for s in sources):
                caught_up_at = last["batchId"]
            if caught_up_at is not None and last["batchId"] >= caught_up_at + extra:
                return
        time.sleep(0.2)
    raise TimeoutError(f"not caught up in {timeout}s")


class BatchScraper:
    """Scrapes the observer's endpoint once per batch, after the observer has processed that batch.

    Each line of ``scrapes.jsonl``: the batch id and the exposition text in which ``spark_streaming_batch_id``
    is that batch, so a test can compare every batch's exported series with what the broker held then.
    """

    def __init__(self, query, url: str, path: str) -> None:  # type: ignore[no-untyped-def]
        import threading

        self.query, self.url, self.path = query, url, path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="batch-scraper", daemon=True)

    def start(self) -> BatchScraper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        seen = None
        with open(self.path, "w") as f:
            while not self._stop.wait(0.1):
                last = self.query.lastProgress
                batch = None if last is None else last["batchId"]
                if batch is None or batch == seen:
                    continue
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and not self._stop.is_set():
                    text = urllib.request.urlopen(self.url, timeout=10).read().decode()
                    if any(
                        line.startswith("spark_streaming_batch_id{") and float(line.rsplit(" ", 1)[1]) == batch
                        for line in text.splitlines()
                    ):
                        # the worker applies the signals' values right after the batch itself: scrape once more
                        time.sleep(0.3)
                        text = urllib.request.urlopen(self.url, timeout=10).read().decode()
                        f.write(json.dumps({"batchId": batch, "text": text}) + "\n")
                        f.flush()
                        break
                    time.sleep(0.05)
                seen = batch


def drain(handle, terminations: int, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    """Wait until Spark's (asynchronous) listener bus delivered the terminations, then flush the observer."""
    deadline = time.monotonic() + timeout
    while handle.observer.self_metrics.received["terminated"] < terminations and time.monotonic() < deadline:
        time.sleep(0.1)
    handle.flush()


def write_outputs(out: str, metrics: str, signals: list[dict]) -> None:
    """The observer's final scrape and its signals, as the tests read them."""
    with open(os.path.join(out, "metrics.prom"), "w") as f:
        f.write(metrics)
    write_jsonl(os.path.join(out, "signals.jsonl"), signals)


def write_jsonl(path: str, rows: list) -> None:
    with open(path, "w") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)).replace("\n", " ") + "\n")


def wait_failure(query, timeout: float = 240) -> str:  # type: ignore[no-untyped-def]
    """Wait until the query terminates; return its exception text (raise if it ended cleanly or never did)."""
    deadline = time.monotonic() + timeout
    while query.isActive and time.monotonic() < deadline:
        time.sleep(0.2)
    if query.isActive or query.exception() is None:
        raise SystemExit("the query was expected to fail, and did not")
    return str(query.exception())


def run_for(query, seconds: float) -> None:  # type: ignore[no-untyped-def]
    """Keep the query running for a wall-clock time (raising if it died)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not query.isActive:
            raise SystemExit(f"the query stopped early: {query.exception()}")
        time.sleep(0.5)


def write_run_facts(
    out: str,
    spark_version: str,
    query,
    progress: list[str],
    started: float,  # type: ignore[no-untyped-def]
    ended: float,
    failure: str | None,
    injected_at: float | None,
) -> None:
    """What this run did, measured by the run itself: the ground truth ``record_incidents.py`` builds on.

    ``process_started`` is taken before the Spark session is created; ``process_ended`` when the run's work
    is over (the batches it waited for are done, or the failure was seen), before the query is stopped and
    Spark torn down (a few seconds more of the process's life).
    """
    batches = [json.loads(p) for p in progress]
    facts = {
        "spark_version": spark_version,
        "query_name": query.name,
        "query_id": str(query.id),
        "run_id": str(query.runId),
        "process_started": started,
        "process_ended": ended,
        "first_batch_id": batches[0]["batchId"] if batches else None,
        "last_batch_id": batches[-1]["batchId"] if batches else None,
        "first_batch_timestamp": batches[0]["timestamp"] if batches else None,
        "batches": len(batches),
        "exception": failure,
        "injected_at": injected_at,
    }
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(facts, f, indent=1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--provider", choices=("rocksdb", "hdfs"), default="rocksdb")
    ap.add_argument("--changelog", choices=("on", "off"), default="on")
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--event-log", action="store_true")
    ap.add_argument("--codec", default="zstd", help="zstd, lz4, snappy or none")
    ap.add_argument("--rows-per-second", type=int, default=40)
    ap.add_argument("--name", default="demo_dedup_window")
    ap.add_argument(
        "--incompatible", action="store_true", help="restart with a state schema the checkpoint refuses, and record the failure"
    )
    ap.add_argument("--query", default="dedup_window", help="a pipeline from scripts/incident_queries.py")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--partitions", type=int, default=2, help="spark.sql.shuffle.partitions")
    ap.add_argument("--keys", type=int, default=10)
    ap.add_argument("--duration", type=float, help="run this many seconds instead of --batches")
    ap.add_argument("--batches-timeout", type=float, default=240, help="seconds --batches may take (a busy machine needs more)")
    ap.add_argument("--expect-failure", action="store_true", help="wait for the query to fail and record why")
    ap.add_argument("--until-terminated", action="store_true", help="wait for the query to end by itself (an availableNow run)")
    ap.add_argument("--inject-after", type=int, default=0, help="after this many batches, break the query (see incident_queries.inject)")
    ap.add_argument("--option", action="append", default=[], help="key=value passed to the pipeline")
    ap.add_argument("--conf", action="append", default=[], help="key=value Spark configuration")
    ap.add_argument("--source", choices=("rate", "kafka"), default="rate")
    ap.add_argument("--bootstrap", help="Kafka bootstrap servers (--source kafka)")
    ap.add_argument("--topic", help="Kafka topic (--source kafka)")
    ap.add_argument("--kafka-jars", default="", help="comma-separated local jars of Spark's Kafka connector")
    ap.add_argument("--trigger-seconds", type=float, default=2.0, help="trigger interval (--source kafka)")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=0, help="Kafka rate limit per batch; 0: none")
    ap.add_argument("--until-caught-up", action="store_true", help="run until the Kafka source reached the latest offsets")
    ap.add_argument("--kafka-option", action="append", default=[], help="key=value option of the Kafka source (failOnDataLoss=false)")
    ap.add_argument("--scrape-each-batch", action="store_true", help="write the observer's scrape after every batch to scrapes.jsonl")
    ap.add_argument("--history", default=None, help="the observer's history database (default: setting history_path)")
    ap.add_argument("--ui", action="store_true", help="the driver's UI on, its REST API answering before the query starts")
    args = ap.parse_args()

    import spark_state_observer as observer
    from spark_state_observer.cli.demo import dedup_window_query, spark_session

    os.makedirs(args.out, exist_ok=True)
    extra = {
        "spark.sql.shuffle.partitions": str(args.partitions),
        # a long run keeps every progress, not the last 100
        "spark.sql.streaming.numRecentProgressUpdates": "100000" if args.duration else "100",
        **({"spark.ui.enabled": "true", "spark.ui.port": "0", "spark.ui.showConsoleProgress": "false"} if args.ui else {}),
        **dict(kv.split("=", 1) for kv in args.conf),
    }
    started = time.time()
    spark = spark_session(
        master=args.master,
        provider=args.provider,
        changelog=args.changelog == "on",
        event_log_dir=os.path.join(args.out, "eventlog") if args.event_log else None,
        event_log_codec=None if args.codec == "none" else args.codec,
        extra={**extra, "spark.jars": args.kafka_jars} if args.kafka_jars else extra,
    )
    spark.sparkContext.setLogLevel("ERROR")
    handle = observer.attach(spark, http_port=0, **({"history_path": args.history} if args.history else {}))
    signals = record_signals(handle)
    restore_calls = record_restore_listener(handle)
    if args.ui:
        wait_rest(spark)
    failure = None
    injected_at = None
    if args.query != "dedup_window":
        import incident_queries

        ctx = incident_queries.Context(
            spark, args.checkpoint, args.rows_per_second, args.keys, args.name, args.out, dict(kv.split("=", 1) for kv in args.option)
        )
        query = incident_queries.start(args.query, ctx)
        if args.inject_after:
            wait_batches(query, args.inject_after)
            injected_at = time.time()
            incident_queries.inject(args.query, ctx)
        if args.expect_failure:
            failure = wait_failure(query)
        elif args.until_terminated:
            if not query.awaitTermination(args.batches_timeout) or query.exception() is not None:
                raise SystemExit(f"the query did not end cleanly in {args.batches_timeout}s: {query.exception()}")
        elif args.duration:
            run_for(query, args.duration)
        else:
            wait_batches(query, args.batches, args.batches_timeout)
    elif args.incompatible:
        from pyspark.sql import functions as F

        # the aggregation's key becomes a string: Spark refuses the state it finds in the checkpoint
        counts = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", args.rows_per_second)
            .load()
            .groupBy((F.col("value") % 10).cast("string").alias("key"))
            .count()
        )
        query = (
            counts.writeStream.format("noop")
            .outputMode("update")
            .queryName(args.name)
            .option("checkpointLocation", args.checkpoint)
            .trigger(processingTime="1 second")
            .start()
        )
        failure = wait_failure(query, timeout=120)
    elif args.source == "kafka":
        from spark_state_observer.cli.kafka_demo import kafka_window_query

        options = dict(o.split("=", 1) for o in args.kafka_option)
        query = kafka_window_query(
            spark, args.checkpoint, args.bootstrap, args.topic, args.name, args.trigger_seconds, args.max_offsets_per_trigger, options
        )
        scraper = BatchScraper(query, handle.url, os.path.join(args.out, "scrapes.jsonl")).start() if args.scrape_each_batch else None
        if args.expect_failure:
            failure = wait_failure(query, timeout=args.batches_timeout)
        elif args.until_caught_up:
            wait_caught_up(query)
        elif args.duration:
            run_for(query, args.duration)
        else:
            wait_batches(query, args.batches, args.batches_timeout)
        if scraper is not None:
            scraper.stop()
    else:
        query = dedup_window_query(spark, args.checkpoint, args.rows_per_second, name=args.name, keys=args.keys)
        if args.expect_failure:
            failure = wait_failure(query)
        elif args.duration:
            run_for(query, args.duration)
        else:
            wait_batches(query, args.batches, args.batches_timeout)
    ended = time.time()
    # 4.x: StreamingQueryProgress objects with .json; 3.5: plain dicts
    progress = [p.json if hasattr(p, "_jdict") else json.dumps(p) for p in query.recentProgress]
    spark_version = spark.version
    query.stop()
    # Spark 3.5 lets a batch in flight finish while the query stops (its progress is in the event log); it is part
    # of the run: keep its progress and end the run's work after it (4.3 interrupts it: nothing changes there)
    stopped = [p.json if hasattr(p, "_jdict") else json.dumps(p) for p in query.recentProgress]
    if len(stopped) > len(progress) and stopped[: len(progress)] == progress:
        progress, ended = stopped, time.time()
    drain(handle, 1)
    metrics = urllib.request.urlopen(handle.url, timeout=10).read().decode()
    handle.stop()
    spark.stop()
    write_jsonl(os.path.join(args.out, "progress.jsonl"), progress)
    write_outputs(args.out, metrics, signals)
    write_jsonl(os.path.join(args.out, "restore_listener.jsonl"), restore_calls)
    write_run_facts(args.out, spark_version, query, progress, started, ended, failure, injected_at)
    return 0


if __name__ == "__main__":
    sys.exit(main())
