"""Job overhead: what attaching the observer costs a real stateful query, paired within one session.

    python bench/job_overhead.py [--rounds 10] [--batches 20] [--settle 2] [--scrape 1] [--otlp-endpoint URL]

Wall-clock batch durations swing by tens of percent on a shared 2-core machine, forty times the 2 %
goal, so the primary figure is CPU time, paired. One Spark session runs one demo query (RocksDB, two
state operators, 100 rows/s, a 0.5 s trigger) for the whole run; the observer is attached and detached
between segments (``observer.attach`` / ``handle.stop()``, which removes the listener), so JVM warm-up,
state size and the JIT are the same for both modes. Each round is two adjacent segments, without and
with, in alternating order (ABBA); a segment lets ``--settle`` batches pass after the switch, then
counts ``--batches`` batches between two batch boundaries and reads, per completed batch:

- job CPU: the JVM's process CPU (``/proc/<pid>/stat``: driver, executors, listener bus; local mode
  runs executors in the driver JVM) plus this Python process's CPU (the observer's worker, endpoint and
  history writer live here). The goal's figure: with / without - 1, per round; also per input row (the
  rate source puts more rows in a longer batch);
- attributed CPU: the Python process's extra CPU, the streams listener thread's extra CPU (the JVM's
  ``ThreadMXBean``) and the JVM's py4j threads' extra CPU, against the job CPU without: the observer's
  own cost with the executors' noise left out. The JVM's CPU per thread group (``/proc/<pid>/task``)
  is printed to show nothing else moves;
- the streams listener thread's busy time per batch (its wall time neither waiting nor blocked, from
  the JVM's contention monitoring; a runnable thread waiting for a core counts as busy): the time the
  callbacks hold Spark's listener thread;
- median batch duration (wall), for comparison.

Per-round paired figures are summarized by their median, min-max and a bootstrap 95 % interval of the
median (rounds resampled). "With" means the Prometheus endpoint, scraped every ``--scrape`` seconds by
a separate process (Prometheus's own CPU is not the job's), the history store, and OTLP when an endpoint
is given. The JVM's own timer of the streams queue (``queue.streams.listenerProcessingTime``, Spark's
metrics system) is printed at the end; it is decay-weighted over minutes, so it mixes the two modes.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

_SCRAPER = """
import sys, time, urllib.request
while True:
    try:
        urllib.request.urlopen(sys.argv[1], timeout=5).read()
    except Exception:
        pass
    time.sleep(float(sys.argv[2]))
"""

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Reading:
    wall: float
    batch: int
    jvm_cpu: float
    py_cpu: float
    bus_cpu: float
    bus_idle: float  # seconds the streams listener thread spent waiting or blocked
    jvm_threads: dict[str, float]  # CPU seconds per JVM thread group (thread name without digits)


@dataclass
class Segment:
    observed: bool
    batches: int
    job_cpu: float  # seconds per batch, JVM + Python
    py_cpu: float
    bus_cpu: float
    bus_busy: float  # seconds per batch
    jvm_threads: dict[str, float]  # CPU seconds per batch per JVM thread group
    duration: float  # median batch duration, seconds
    rows: float  # input rows per batch (the rate source's rows since the last batch: longer batches take more)
    python_threads: int


class Probe:
    """Reads the counters of the JVM and this process at a batch boundary."""

    def __init__(self, spark: Any, query: Any, checkpoint: str) -> None:
        self.spark, self.query = spark, query
        self.commits = os.path.join(checkpoint, "commits")
        self.last = -1
        jvm = spark.sparkContext._jvm
        mf = jvm.java.lang.management.ManagementFactory
        self.pid = int(mf.getRuntimeMXBean().getPid())
        self.threads = mf.getThreadMXBean()
        self.threads.setThreadContentionMonitoringEnabled(True)
        self.bus_thread = next(
            t.getId() for t in jvm.java.lang.Thread.getAllStackTraces().keySet().toArray() if t.getName() == "spark-listener-group-streams"
        )
        self.registry = spark.sparkContext._jsc.sc().listenerBus().metrics().metricRegistry()

    def batch(self) -> int:
        """The last committed batch: its commit file (a stat per poll, no JVM call that would cost CPU on both sides)."""
        if self.last < 0:
            self.last = max((int(n) for n in os.listdir(self.commits) if n.isdigit()), default=-1)
        while os.path.exists(os.path.join(self.commits, str(self.last + 1))):
            self.last += 1
        return self.last

    def wait_batches(self, n: int) -> int:
        """Return right after ``n`` more batches have been committed (polled every 20 ms)."""
        target = self.batch() + n
        while (b := self.batch()) < target:
            time.sleep(0.02)
        return b

    def read(self) -> Reading:
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        jvm_cpu = (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
        groups: dict[str, float] = {}
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            try:
                with open(f"/proc/{self.pid}/task/{tid}/stat") as f:
                    text = f.read()
            except OSError:  # the thread ended
                continue
            name, rest = text.split("(", 1)[1].rsplit(")", 1)
            cols = rest.split()
            key = name.rstrip("0123456789-_ ")
            groups[key] = groups.get(key, 0.0) + (int(cols[11]) + int(cols[12])) / _TICK
        times = os.times()
        info = self.threads.getThreadInfo(self.bus_thread)
        return Reading(
            wall=time.monotonic(),
            batch=self.batch(),
            jvm_cpu=jvm_cpu,
            py_cpu=times.user + times.system,
            bus_cpu=self.threads.getThreadCpuTime(self.bus_thread) / 1e9,
            bus_idle=(info.getWaitedTime() + info.getBlockedTime()) / 1000,
            jvm_threads=groups,
        )

    def spark_timer(self) -> str:
        timer = self.registry.getTimers().get("queue.streams.listenerProcessingTime")
        if timer is None:
            return "not registered"
        s = timer.getSnapshot()
        return f"{timer.getCount()} events, median {s.getMedian() / 1e6:.2f} ms, p99 {s.get99thPercentile() / 1e6:.2f} ms, max {s.getMax() / 1e6:.2f} ms"


class Attached:
    """The observer attached as a user would, plus an external scraper standing in for Prometheus."""

    def __init__(self, spark: Any, tmp: str, scrape: float, otlp: str | None) -> None:
        import spark_state_observer as observer

        settings: dict[str, Any] = {"http_port": 0, "history_path": os.path.join(tmp, "history.db")}
        if otlp:
            settings["otlp_endpoint"] = otlp
        self.handle = observer.attach(spark, **settings)
        self.scraper = subprocess.Popen([sys.executable, "-c", _SCRAPER, self.handle.url, str(scrape)]) if scrape > 0 else None

    def stop(self) -> None:
        if self.scraper is not None:
            self.scraper.terminate()
            self.scraper.wait(10)
        self.handle.stop()


def segment(probe: Probe, observed: bool, batches: int, settle: int) -> Segment:
    probe.wait_batches(settle)
    start = probe.read()
    probe.wait_batches(batches)
    end = probe.read()
    n = end.batch - start.batch
    progress = [p for p in probe.query.recentProgress if start.batch < p["batchId"] <= end.batch]
    durations = [p["batchDuration"] / 1000 for p in progress]
    events = max(n, 1)
    return Segment(
        observed=observed,
        batches=n,
        job_cpu=(end.jvm_cpu - start.jvm_cpu + end.py_cpu - start.py_cpu) / n,
        py_cpu=(end.py_cpu - start.py_cpu) / n,
        bus_cpu=(end.bus_cpu - start.bus_cpu) / n,
        bus_busy=max(0.0, (end.wall - start.wall) - (end.bus_idle - start.bus_idle)) / events,
        duration=statistics.median(durations) if durations else float("nan"),
        rows=sum(p["numInputRows"] for p in progress) / max(len(progress), 1),
        python_threads=threading.active_count(),
        jvm_threads={k: (v - start.jvm_threads.get(k, 0.0)) / n for k, v in end.jvm_threads.items()},
    )


def summary(values: list[float], scale: float = 100.0, unit: str = " %", signed: bool = True) -> str:
    """Median (min-max), and a bootstrap 95 % interval of the median over resampled rounds."""
    rng = random.Random(17)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(2000))
    lo, hi = medians[50], medians[1949]
    f = "{:+.2f}" if signed else "{:.2f}"
    fmt = lambda v: f.format(v * scale)  # noqa: E731
    return f"{fmt(statistics.median(values))}{unit} (min {fmt(min(values))}, max {fmt(max(values))}; 95 % interval of the median {fmt(lo)} to {fmt(hi)})"


def attributed(w: Segment, o: Segment) -> float:
    """What the observer runs itself, with - without, against the job's CPU without: this process, the
    streams listener thread, and the JVM's py4j threads ("Thread-N") serving its calls (the bench makes
    none inside a window: it polls commit files)."""
    extra = (o.py_cpu - w.py_cpu) + (o.bus_cpu - w.bus_cpu) + (o.jvm_threads.get("Thread", 0.0) - w.jvm_threads.get("Thread", 0.0))
    return extra / w.job_cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--batches", type=int, default=20, help="batches counted per segment")
    ap.add_argument("--settle", type=int, default=2, help="batches let pass after attaching or detaching")
    ap.add_argument("--warmup", type=int, default=60, help="batches before the first round (JIT, state fills its window)")
    ap.add_argument("--scrape", type=float, default=1.0, help="seconds between scrapes of /metrics (0: none)")
    ap.add_argument("--otlp-endpoint", default=None)
    args = ap.parse_args()
    from spark_state_observer.cli.demo import dedup_window_query, spark_session

    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    rounds: list[tuple[Segment, Segment]] = []  # (without, with)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = os.path.join(tmp, "checkpoint")
        query = dedup_window_query(spark, checkpoint, rows_per_second=100, trigger_seconds=0.5)
        while query.lastProgress is None:
            time.sleep(0.2)
        probe = Probe(spark, query, checkpoint)
        probe.wait_batches(args.warmup)
        warm = Attached(spark, tmp, args.scrape, args.otlp_endpoint)  # first attach: imports, first events
        probe.wait_batches(5)
        warm.stop()
        for r in range(args.rounds):
            pair: dict[bool, Segment] = {}
            for observed in (False, True) if r % 2 == 0 else (True, False):
                attached = Attached(spark, tmp, args.scrape, args.otlp_endpoint) if observed else None
                pair[observed] = segment(probe, observed, args.batches, args.settle)
                if attached:
                    attached.stop()
            rounds.append((pair[False], pair[True]))
            w, o = pair[False], pair[True]
            print(
                f"round {r + 1}: job CPU per batch {w.job_cpu * 1000:.0f} -> {o.job_cpu * 1000:.0f} ms "
                f"({100 * (o.job_cpu / w.job_cpu - 1):+.1f} %; attributed {100 * attributed(w, o):+.2f} %), Python {w.py_cpu * 1000:.1f} -> {o.py_cpu * 1000:.1f} ms, "
                f"streams listener thread busy {w.bus_busy * 1000:.2f} -> {o.bus_busy * 1000:.2f} ms a batch, "
                f"median batch {w.duration * 1000:.0f} -> {o.duration * 1000:.0f} ms, rows {w.rows:.0f} -> {o.rows:.0f}; Python threads {w.python_threads}/{o.python_threads}",
                flush=True,
            )
        timer = probe.spark_timer()
        query.stop()
    spark.stop()
    job = [o.job_cpu / w.job_cpu - 1 for w, o in rounds]
    per_row = [(o.job_cpu / o.rows) / (w.job_cpu / w.rows) - 1 for w, o in rounds]
    observer_share = [attributed(w, o) for w, o in rounds]
    wall = [o.duration / w.duration - 1 for w, o in rounds]
    busy_with = [o.bus_busy for _, o in rounds]
    busy_without = [w.bus_busy for w, _ in rounds]
    print(
        f"\n{args.rounds} rounds x {args.batches} batches per mode (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores); "
        f"job CPU per batch without: {statistics.median([w.job_cpu for w, _ in rounds]) * 1000:.0f} ms "
        f"({min(w.job_cpu for w, _ in rounds) * 1000:.0f}-{max(w.job_cpu for w, _ in rounds) * 1000:.0f})"
    )
    print(f"job overhead, CPU (JVM + Python), paired per round: {summary(job)}")
    print(f"job overhead, CPU per input row, paired per round: {summary(per_row)}")
    print(f"attributed CPU (Python process + streams listener thread + py4j threads), paired per round: {summary(observer_share)}")
    print(f"batch duration (wall), paired per round: {summary(wall)}")
    print(
        f"streams listener thread busy per batch: without {summary(busy_without, 1000, ' ms', False)}; "
        f"with {summary(busy_with, 1000, ' ms', False)}"
    )
    groups = sorted({k for w, o in rounds for k in (*w.jvm_threads, *o.jvm_threads)})
    diffs = {k: statistics.median(o.jvm_threads.get(k, 0.0) - w.jvm_threads.get(k, 0.0) for w, o in rounds) for k in groups}
    shown = sorted(groups, key=lambda k: -abs(diffs[k]))[:10]
    print("JVM threads, CPU per batch with - without (median of rounds): " + ", ".join(f"{k!r} {diffs[k] * 1000:+.1f} ms" for k in shown))
    print(f"Spark's queue.streams.listenerProcessingTime (decay-weighted, both modes): {timer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
