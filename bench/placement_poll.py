"""Driver time of the live placement poll, per batch, at many state partitions.

    python bench/placement_poll.py [--partitions 200] [--batches 6]

A real stateful query (rate -> groupBy count, RocksDB, ``--partitions`` shuffle partitions, local[2], UI on)
runs with attach()'s placement polling (``spark_state_observer.placement.task_poll.PollingSource``), so every progress event makes the
observer's worker read that batch's stateful tasks from the driver's REST API. Reported, per batch:

  live   - wall time of each poll on the worker thread while the query runs (the driver is busy)
  quiet  - the same polls repeated by a fresh poller once the query has stopped (no contention)
  cpu    - Python CPU time of one quiet poll (its JSON decoding)
  jvm    - the driver JVM's CPU time per quiet poll (serving the REST answers), mean from /proc over all of them
  floor  - one GET of the smallest endpoint (/applications/<id>) on the same kept-alive connection

with medians and min-max, the requests per poll, and the ratio of a quiet poll to the floor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def jvm_seconds(pid: int) -> float | None:
    """CPU time (user + system) of a process so far, from /proc (Linux); None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def stats(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"median {statistics.median(ms):7.2f} ms  (min {min(ms):.2f}, max {max(ms):.2f}, n={len(ms)})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=5, help="quiet re-polls per batch")
    args = ap.parse_args()

    from pyspark.sql import functions as F

    import spark_state_observer as observer
    from spark_state_observer.cli.demo import spark_session
    from spark_state_observer.placement.task_poll import RestSource, TaskPoller

    spark = spark_session(
        extra={
            "spark.ui.enabled": "true",
            "spark.ui.port": "0",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": str(args.partitions),
        }
    )
    spark.sparkContext.setLogLevel("ERROR")
    handle = observer.attach(spark, http_port=0, history_enabled=False)
    sink = handle.observer.placement  # attach() polls the status store when the UI is on (placement=auto)
    assert sink is not None, "the UI is off"
    counts = spark.readStream.format("rate").option("rowsPerSecond", 50).load().groupBy((F.col("value") % 1000).alias("k")).count()
    query = (
        counts.writeStream.format("noop")
        .outputMode("update")
        .queryName("bench_placement")
        .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-placement-"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        deadline = time.monotonic() + 900
        while (query.lastProgress is None or query.lastProgress["batchId"] < args.batches) and time.monotonic() < deadline:
            time.sleep(0.5)
        batches = sorted({b.batch_id for b in sink.batches})
        query.stop()
        handle.flush()
        live = list(sink.source.poller.seconds)
        tasks_per_batch = statistics.median(len(b.placement) for b in sink.batches) if sink.batches else 0
        quiet: list[float] = []
        cpu: list[float] = []
        requests: list[int] = []
        floor: list[float] = []
        jvm_pid = spark.sparkContext._gateway.proc.pid  # the driver JVM PySpark launched
        source = RestSource(spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId)
        source.get("")  # open the connection
        starts = {}
        for batch in batches:
            finder = TaskPoller(source)  # a fresh poller lists the executions once to find its start: not timed
            finder.poll(str(query.id), batch)
            # steady state: the previous poll stopped right after the previous batch's execution, so this one
            # reads the batch's root execution and its own (two ids back from where the finder stopped)
            starts[batch] = max(0, (finder.next_execution or 2) - 2)
        # the driver's background CPU (heartbeats, UI, GC) over an idle second, to take off the polls' share
        idle_start, t = jvm_seconds(jvm_pid), time.perf_counter()
        time.sleep(2.0)
        idle_cpu = (jvm_seconds(jvm_pid) or 0.0) - (idle_start or 0.0)
        idle_rate = idle_cpu / (time.perf_counter() - t)
        jvm_start, wall_start = jvm_seconds(jvm_pid), time.perf_counter()
        rounds: list[float] = []  # driver JVM CPU per poll, one figure per round over all batches (the JIT warms up)
        for _ in range(args.repeat):
            round_cpu, round_wall = jvm_seconds(jvm_pid), time.perf_counter()
            for batch in batches:
                poller = TaskPoller(source, start_execution=starts[batch])
                before_req = source.requests
                c, t = time.thread_time(), time.perf_counter()
                got = poller.poll(str(query.id), batch)
                quiet.append(time.perf_counter() - t)
                cpu.append(time.thread_time() - c)
                requests.append(source.requests - before_req)
                assert got and got[0].runs, f"batch {batch}: nothing polled"
            if round_cpu is not None:
                spent = (jvm_seconds(jvm_pid) or 0.0) - round_cpu - idle_rate * (time.perf_counter() - round_wall)
                rounds.append(spent / len(batches))
        jvm_end, wall = jvm_seconds(jvm_pid), time.perf_counter() - wall_start
        for _ in range(len(quiet)):
            t = time.perf_counter()
            source.get("")
            floor.append(time.perf_counter() - t)
    finally:
        handle.stop()
        spark.stop()
    print(
        f"placement poll, {args.partitions} shuffle partitions (median {tasks_per_batch:.0f} stateful tasks per batch), batches {batches}"
    )
    print(f"  live  (worker thread, query running): {stats(live)}")
    print(f"  quiet (query stopped):                {stats(quiet)}   requests per poll: median {statistics.median(requests):.0f}")
    print(f"  cpu   (Python side of a quiet poll):  {stats(cpu)}")
    if jvm_start is not None and jvm_end is not None:
        # /proc counts in clock ticks (10 ms): only a mean over all timed polls is meaningful
        per_poll = (jvm_end - jvm_start - idle_rate * wall) / len(quiet)
        print(
            f"  jvm   (driver JVM CPU per quiet poll, mean, idle background {idle_rate * 1000:.0f} ms/s taken off): {per_poll * 1000:.2f} ms"
        )
        if len(rounds) >= 4:
            late = rounds[len(rounds) // 2 :]
            print(f"  jvm   per poll, first round {rounds[0] * 1000:.2f} ms; second half of the rounds: {stats(late)}")
    print(f"  floor (one smallest GET):             {stats(floor)}")
    print(f"  quiet / floor: {statistics.median(quiet) / statistics.median(floor):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
