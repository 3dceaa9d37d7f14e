"""Event-log watcher at fleet scale: one watcher following N applications writing at real pace.

    python bench/watch_scale.py [--apps 200] [--interval 10] [--duration 120] [--codec zstd] [--poll 1]
    python bench/watch_scale.py --scan-only          # cost per MB: batch vs streaming application
    python bench/watch_scale.py --apps 1000 --pipeline --drain [--queries 2]   # issue 17: RSS per observed query

A writer process (its own CPU, not counted) writes real recorded events (tests/fixtures, a stateful
RocksDB run) into N rolling compressed logs the way Spark does (bench/eventlog_writer.py): the recorded
start-up, ``--idle`` seconds of nothing (the watcher's fixed cost per poll is measured then), then one
recorded micro-batch (its SQL, job, stage and task events and its progress event) per application every
``--interval`` seconds (``--interval 0``: the recorded intervals between batches, divided by
``--time-scale``), applications phase-shifted, each progress event carrying its own query id and an
increasing batch id, its ``timestamp`` set to the moment it is written. The lines of a batch other than
its progress event are encoded once and reused, so the writer keeps its pace on a loaded machine; it
reports how many of the batches due it wrote and how many late. The watcher is the ``watch`` command's
(``FleetObserver``'s settings), in this process; with ``--pipeline`` the whole command. Figures over the
steady window (after every application has started):

- CPU share of one core (process CPU time / wall time), RSS now and peak, events delivered per second,
  CPU per progress event (counted as delivered, so a writer behind its pace changes the count, not the cost);
- latency from written (the progress event's timestamp) to delivered by ``poll()``: median, p99, max,
  over every progress event and over those the writer appended within ``ON_TIME_SECONDS`` of their due time;
- baseline in the same run: reading the finished logs once with ``observer.eventlog.read_records``
  (the offline reader), as CPU seconds per decoded MB, against the watcher's CPU per decoded MB.

``--scan-only``: decode one large log four ways (zstd decompression alone, the ``watch`` command's watcher on
a batch application's log and on a streaming application's log, the watcher with its defaults, which parse
every wanted line, on the streaming one) and report MB/s and lines per CPU second for each.

Before and after in one session: copy this file and ``eventlog_writer.py`` into the other tree's ``bench/``
(it reads the progress events either way) and take turns.
"""

from __future__ import annotations

import argparse
import collections
import heapq
import json
import multiprocessing
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timezone
from multiprocessing.connection import Connection
from types import FrameType
from typing import NamedTuple

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import itertools

import msgspec

from bench.common import ROOT
from bench.eventlog_writer import ProgressiveLog, StreamEncoder, flush_groups, recorded_lines, renamed
from spark_state_observer.fleet.app_events import AppEvents
from spark_state_observer.fleet.eventlog_watch import EventLogWatcher
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.model.parse import parse_timestamp
from spark_state_observer.model.spark_events import QUERY_PROGRESS
from spark_state_observer.offline.eventlog import read_records
from spark_state_observer.settings import Settings

_PROGRESS = b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"'
_STARTED = b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryStartedEvent"'
ON_TIME_SECONDS = 0.25  # a batch appended later than this after its due time: the writer fell behind


def recorded(scenario: str) -> tuple[list[bytes], list[list[bytes]], list[float]]:
    """The recorded log cut into its start-up lines, one segment per micro-batch, and the gaps between batches."""
    folder = os.path.join(ROOT, "tests", "fixtures", scenario, "run1", "eventlog")
    source = next(os.path.join(r, f) for r, _, files in os.walk(folder) for f in files if f.startswith("events_"))
    lines = recorded_lines(source)
    first_batch = next(i for i, line in enumerate(lines) if line.startswith(_STARTED)) + 1
    header, segments, current = lines[:first_batch], [], []
    for line in lines[first_batch:]:
        current.append(line)
        if line.startswith(_PROGRESS):
            segments.append(current)
            current = []
    times = [parse_timestamp(json.loads(s[-1])["progress"]["timestamp"]) or 0.0 for s in segments]
    gaps = [max(0.1, b - a) for a, b in itertools.pairwise(times)] or [10.0]
    return header, segments, gaps


def _retimed(line: bytes, app: int, batch: int, queries: int, stamp: float) -> bytes:
    """The recorded progress event as the ``batch``-th of application ``app``, whose ``queries`` queries take turns,
    stamped with wall time ``stamp``."""
    event = json.loads(line)
    p = event["progress"]
    q, p["batchId"] = batch % queries, batch // queries
    p["id"] = f"00000000-0000-{q:04d}-0000-{app:012d}"
    p["runId"] = f"00000000-0000-{q:04d}-0001-{app:012d}"
    p["timestamp"] = datetime.fromtimestamp(stamp, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


class _Mark(msgspec.Struct):
    """The fields of a delivered progress event the bench reads: which batch of which application, written when."""

    id: str
    batchId: int  # noqa: N815
    timestamp: str


_MARK = msgspec.json.Decoder(_Mark)


def _written_key(query_id: str, batch_id: int, queries: int) -> tuple[int, int]:
    """(application, batch) of a progress event ``_retimed`` wrote."""
    parts = query_id.split("-")
    return int(parts[4]), batch_id * queries + int(parts[2])


class Writes(NamedTuple):
    """What the writer did: per (application, batch) how late after its due time the batch was on disk."""

    asked: int  # batches due within the run
    late: dict[tuple[int, int], float]  # seconds after the due time each written batch was appended


def writer(
    folder: str,
    apps: int,
    interval: float,
    time_scale: float,
    duration: float,
    codec: str,
    max_file_bytes: int,
    scenario: str,
    ready: multiprocessing.synchronize.Event,  # type: ignore[name-defined]
    queries: int,
    idle: float,
    report: Connection,
) -> None:
    """Write N applications' logs at their pace until ``duration`` is over, then finish them.

    The recorded start-up first; then, after ``idle`` seconds, each application's batches. Every batch is the
    same recorded lines but its progress event, so with a codec whose units stand alone (not lz4) each
    batch's other lines are encoded once and reused: the writer spends its CPU on the progress line and one
    append, and keeps its pace on a loaded machine (it wrote a tenth of its batches when it compressed every
    batch anew). ``report`` gets the ``Writes``.
    """
    header, segments, gaps = recorded(scenario)
    groups = [flush_groups(s) for s in segments]
    reuse = codec != "lz4"
    shared = StreamEncoder(codec)
    shared.flush([])  # snappy's stream header: each log writes its own
    encoded = [b"".join(shared.flush(g) for g in gs[:-1]) for gs in groups] if reuse else []
    rng = random.Random(7)
    logs = []
    for i in range(apps):
        app_id = f"app-20261122000000-{i:04d}"
        log = ProgressiveLog(folder, app_id, codec, max_file_bytes=max_file_bytes)
        for group in flush_groups(renamed(header, f"bench-app-{i:03d}", app_id)):
            for _ in log.write_group(group):
                pass
        logs.append(log)
    start = time.monotonic() + idle
    first_gap = interval or gaps[0] / time_scale
    due = [(start + rng.uniform(0, first_gap), i) for i in range(apps)]
    heapq.heapify(due)
    batch = [0] * apps
    late: dict[tuple[int, int], float] = {}
    asked = 0
    ready.set()
    end = start + max(0.0, duration - idle)
    while True:
        now = time.monotonic()
        if now >= end:
            break
        at, i = due[0]
        if at > now:
            time.sleep(min(at - now, end - now))
            continue
        heapq.heappop(due)
        s = batch[i] % len(segments)
        last = groups[s][-1][:-1] + [_retimed(segments[s][-1], i, batch[i], queries, time.time())]
        if reuse:
            logs[i].write_encoded(encoded[s] + logs[i].encoder.flush(last))
        else:
            for group in groups[s][:-1] + [last]:
                for _ in logs[i].write_group(group):
                    pass
        late[(i, batch[i])] = time.monotonic() - at
        asked += 1
        batch[i] += 1
        heapq.heappush(due, (at + (interval or gaps[batch[i] % len(gaps)] / time_scale), i))
    asked += sum(1 for at, _ in due if at < end)  # due but not written: the writer fell behind
    for log in logs:
        log.finish()
    report.send((asked, late))  # plain types: the parent may run under a profiler, with another __main__


def _rss() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MB."""
    values = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":", 1)
                values[key] = int(value.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


class WindowSampler:
    """Where the steady window's CPU goes (``--profile``): the main thread's stack sampled every ``every`` seconds of
    this process's CPU (``SIGPROF``), each function counted once per sample it is on the stack (inclusive share).

    Sampling, not cProfile: cProfile multiplies the cost of each Python call and skews the split towards the
    call-heavy parts (``bench/replay_profile.py`` does the same for a replay). The timer counts the CPU of every
    thread, the sample sees the main thread: while a scrape renders in the endpoint's thread, the samples land
    in the bench's ``urlopen``.
    """

    def __init__(self, every: float = 0.001) -> None:
        self.every = every
        self.root = os.path.abspath(ROOT)
        self.samples = 0
        self.inclusive: collections.Counter[tuple[str, str]] = collections.Counter()
        signal.signal(signal.SIGPROF, self._sample)  # the handler from the main thread; the timer from any

    def start(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, self.every, self.every)

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)

    def _sample(self, _signum: int, frame: FrameType | None) -> None:
        self.samples += 1
        seen: set[tuple[str, str]] = set()
        while frame is not None:
            file = frame.f_code.co_filename
            seen.add((os.path.relpath(file, self.root) if file.startswith(self.root) else os.path.basename(file), frame.f_code.co_name))
            frame = frame.f_back
        self.inclusive.update(seen)

    def report(self, top: int) -> None:
        print(f"  profile of the steady window: {self.samples} samples of the main thread's stack, inclusive share:")
        for (file, name), count in self.inclusive.most_common(top):
            print(f"    {100 * count / max(self.samples, 1):5.1f} %  {file}:{name}")


def scale(args: argparse.Namespace) -> None:
    sampler = WindowSampler() if args.profile else None
    folder = tempfile.mkdtemp(prefix="sso-watch-scale-")
    try:
        ready = multiprocessing.Event()
        receive, send = multiprocessing.Pipe(duplex=False)
        proc = multiprocessing.Process(
            target=writer,
            args=(
                folder,
                args.apps,
                args.interval,
                args.time_scale,
                args.duration,
                args.codec,
                args.max_file_bytes,
                args.scenario,
                ready,
                args.queries,
                args.idle,
                send,
            ),
        )
        proc.start()
        ready.wait(600)
        # the watch command's watcher (its settings: placement's lines unparsed, progress as bytes); with
        # --pipeline the whole command: every application through its own pipeline (metrics, signals), the
        # shared self-metrics, and a rendering of the one endpoint's text every --scrape seconds
        overrides = {"placement": "off"} if args.no_placement else {}
        fleet = FleetObserver(
            [folder],
            Settings.from_env(labels="cluster=bench", history_enabled=False, http_port=0, **overrides),
            WatchOptions(poll_interval=args.poll, grace_seconds=3600),
            serve=args.pipeline,
        )
        watcher = fleet.watcher
        if args.tasks_parsed:  # as before the typed task decode: the watcher parses every task, job and SQL line whole
            watcher.reader.raw_events = frozenset()
        if args.progress_parsed:  # as before issue 32's session 7: progress lines parsed whole (json.loads)
            watcher.reader.progress_as_bytes = False
        if args.pipeline:
            fleet.start(follow=False)  # the endpoint (and its pre-rendering) as the command has it; polls are driven below
        # the fixed cost: the applications' start-up read, then polls of 200 logs that do not grow
        watcher.poll()
        while watcher.backlog:  # the start-up lines may be more than one poll's decode budget
            watcher.poll()
        idle_polls, t0, c0 = 0, time.monotonic(), time.process_time()
        while time.monotonic() - t0 < args.idle - 1.0:
            watcher.poll()
            idle_polls += 1
            time.sleep(max(0.0, args.poll - (time.monotonic() - t0) % args.poll))
        idle_cpu = (time.process_time() - c0) / max(idle_polls, 1)
        delivered = [0]
        progressed = [0]
        window: dict[str, float] = {}
        rss_start = _rss()[0]  # before the first poll: imports, the endpoint, no application yet
        observed: set[str] = set()
        arrivals: list[tuple[float, tuple[str, int, str]]] = []  # (delivered at, (query id, batch id, timestamp))

        def take(found: list[AppEvents]) -> None:
            now = time.time()
            for app in found:
                delivered[0] += len(app.events)
                for e in app.events:
                    if e.event_type == QUERY_PROGRESS:
                        progressed[0] += 1
                        # only the three fields read after the run: holding the objects would weigh on the RSS figures
                        raw = getattr(e, "progress", None)  # the tree before issue 32's session 7 has no progress bytes
                        if raw is not None:
                            m = _MARK.decode(raw)
                            arrivals.append((now, (m.id, m.batchId, m.timestamp)))
                        else:
                            p = e.data["progress"]
                            arrivals.append((now, (p["id"], p["batchId"], p["timestamp"])))

        stop = threading.Event()
        warmup = (args.interval or 10.0) + 5.0

        def mark() -> None:
            time.sleep(warmup)
            window.update(
                wall=time.monotonic(),
                cpu=time.process_time(),
                events=delivered[0],
                progress=progressed[0],
                arrivals=len(arrivals),
                decoded=watcher.counts.decoded_bytes,
                lines=watcher.counts.lines,
            )
            if sampler is not None:
                sampler.start()
            time.sleep(max(1.0, args.duration - args.idle - warmup - 2.0))
            if sampler is not None:
                sampler.stop()
            window.update(
                wall_end=time.monotonic(),
                cpu_end=time.process_time(),
                events_end=delivered[0],
                progress_end=progressed[0],
                arrivals_end=len(arrivals),
                decoded_end=watcher.counts.decoded_bytes,
                lines_end=watcher.counts.lines,
            )
            stop.set()

        threading.Thread(target=mark, daemon=True).start()
        scrapes: list[float] = []
        size = 0
        if args.pipeline:
            next_scrape = time.monotonic() + args.scrape
            while not stop.is_set():
                started = time.monotonic()
                fleet.poll_once(take)
                if time.monotonic() >= next_scrape:
                    t = time.perf_counter()
                    assert fleet.server is not None
                    with urllib.request.urlopen(fleet.server.url, timeout=120) as r:
                        size = len(r.read())
                    scrapes.append(time.perf_counter() - t)
                    next_scrape += args.scrape
                if not watcher.backlog:
                    stop.wait(max(0.0, args.poll - (time.monotonic() - started)))
            if args.drain:  # read the logs to their end: every application's queries observed, however far behind
                proc.join()
                seen = -1
                while watcher.backlog or delivered[0] != seen:  # until a poll finds nothing more
                    seen = delivered[0]
                    fleet.poll_once(take)
            fleet.stop()
        else:
            watcher.run(take, stop)
        rss_now, rss_peak = _rss()
        # read before joining (the report may exceed the pipe's buffer); nothing if the writer failed
        writes = Writes(*receive.recv()) if receive.poll(120) else Writes(0, {})
        proc.join()
        wall = window["wall_end"] - window["wall"]
        cpu = window["cpu_end"] - window["cpu"]
        decoded_mb = (window["decoded_end"] - window["decoded"]) / 1e6
        # latency written -> delivered over the window, and over the batches the writer appended on time
        latencies, on_time = [], []
        for k, (at, (query_id, batch_id, stamp)) in enumerate(arrivals):
            observed.add(query_id)
            if window["arrivals"] <= k < window["arrivals_end"]:
                latency = at - (parse_timestamp(stamp) or at)
                latencies.append(latency)
                if writes.late.get(_written_key(query_id, batch_id, args.queries), 1e9) <= ON_TIME_SECONDS:
                    on_time.append(latency)
        # baseline in the same run: the offline reader over the finished logs
        folders = sorted(os.path.join(folder, d) for d in os.listdir(folder))
        files = sum(len([n for n in os.listdir(d) if n.startswith("events_")]) for d in folders)
        t = time.process_time()
        for path in folders:
            for _ in read_records([path]):
                pass
        base_cpu = time.process_time() - t
        total_decoded_mb = watcher.counts.decoded_bytes / 1e6
        settings = (
            "full pipeline" + (", placement off" if args.no_placement else ", task lines parsed whole" if args.tasks_parsed else "")
            if args.pipeline
            else "the watch command's watcher alone" + (", pipeline events only" if args.no_placement else "")
        )
        if args.progress_parsed:
            settings += ", progress lines parsed whole"
        print(
            f"apps {args.apps}, one batch every {args.interval or 'recorded interval'} s each, {args.codec}, rolling at "
            f"{args.max_file_bytes / 1e6:.2f} MB ({files} event files), poll {args.poll} s, {settings}, steady window {wall:.0f} s "
            f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
        )
        written = len(writes.late)
        late = sum(1 for v in writes.late.values() if v > ON_TIME_SECONDS)
        print(
            f"  writer: {written} of {writes.asked} batches due written ({written / max(writes.asked, 1):.0%}), "
            f"{late} of them more than {ON_TIME_SECONDS} s after their due time"
        )
        print(
            f"  fixed cost: {idle_cpu * 1e3:.1f} ms CPU per poll of {args.apps} logs that do not grow "
            f"({idle_cpu / max(args.apps, 1) * 1e6:.0f} µs per application per poll, {idle_polls} polls)"
        )
        n_progress = window["progress_end"] - window["progress"]
        events = window["events_end"] - window["events"]
        print(
            f"  CPU share of one core: {cpu / wall:.3f}   RSS now {rss_now:.0f} MB, peak {rss_peak:.0f} MB   "
            f"CPU per delivered event: {cpu / max(events, 1) * 1e6:.0f} µs ({events / max(cpu, 1e-9):,.0f} events per CPU second)"
        )
        print(
            f"  CPU per progress event: {cpu / max(n_progress, 1) * 1e6:.0f} µs ({n_progress} progress events, "
            f"{n_progress / max(cpu, 1e-9):,.0f} a CPU second; {n_progress / wall:.0f} a second of wall)"
        )
        lines = window["lines_end"] - window["lines"]
        print(
            f"  lines scanned in the window: {lines} ({lines / max(cpu, 1e-9):,.0f} a CPU second); "
            f"decoded {decoded_mb / wall:.2f} MB/s; parsed in all: {watcher.counts.events_parsed}"
        )
        print(
            f"  RSS per observed query: {(rss_now - rss_start) * 1024 / max(len(observed), 1):.0f} kB "
            f"({rss_start:.0f} MB before the first poll, {rss_now:.0f} MB at the end, {len(observed)} queries in {args.apps} applications)"
        )
        for label, values in (("every progress event", latencies), (f"written on time (within {ON_TIME_SECONDS} s)", on_time)):
            if values:
                lat = sorted(values)
                print(
                    f"  latency written -> delivered, {label}: median {statistics.median(lat):.2f} s, "
                    f"p99 {lat[max(0, int(len(lat) * 0.99) - 1)]:.2f} s, max {lat[-1]:.2f} s, min {lat[0]:.2f} s over {len(lat)} progress events"
                )
        print(
            f"  CPU per decoded MB: watcher {cpu / max(decoded_mb, 1e-9) * 1000:.1f} ms; baseline, the offline reader "
            "(parses streaming and executor events only, no task or SQL events) over the finished logs: "
            f"{base_cpu / max(total_decoded_mb, 1e-9) * 1000:.1f} ms (ratio {cpu / max(decoded_mb, 1e-9) / max(base_cpu / max(total_decoded_mb, 1e-9), 1e-9):.2f})"
        )
        if scrapes:
            print(
                f"  full pipeline: {args.apps} applications, GET /metrics "
                f"({size / 1e6:.1f} MB uncompressed): median {statistics.median(scrapes) * 1000:.0f} ms, max {max(scrapes) * 1000:.0f} ms "
                f"over {len(scrapes)} scrapes"
            )
        if sampler is not None:
            sampler.report(args.profile)
        print(f"  problems: {dict(watcher.counts.problems) or 'none'}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def scan_only(args: argparse.Namespace) -> None:
    """MB/s of zstd decompression alone, the watch command's watcher on a batch application's log and on a streaming
    one, and the watcher with its defaults (every wanted line parsed) on the streaming one."""
    header, segments, _ = recorded(args.scenario)
    body = [line for s in segments for line in s]
    copies = max(1, int(args.scan_mb * 1e6 / sum(len(x) for x in body)))
    import zstandard

    runs = (
        ("watcher, batch application", False, True),
        ("watcher, streaming application", True, True),
        ("watcher with its defaults (every wanted line parsed), streaming application", True, False),
    )
    results: dict[str, list[float]] = {"zstd decompression only": [], **{label: [] for label, _, _ in runs}}
    parsed: dict[str, int] = {}
    lines_per_mb = 0.0
    for _ in range(args.repeat):
        for label, streaming, command in runs:
            folder = tempfile.mkdtemp(prefix="sso-watch-scan-")
            try:
                lines = list(header) + body * copies
                if not streaming:
                    lines = [x for x in lines if b"StreamingQueryListener" not in x[:80]]
                log = ProgressiveLog(folder, "app-scan", "zstd")
                for group in flush_groups(lines):
                    for _ in log.write_group(group):
                        pass
                log.finish()
                size = sum(len(x) for x in lines) / 1e6
                if streaming and command:
                    lines_per_mb = len(lines) / size
                    t = time.process_time()
                    dctx = zstandard.ZstdDecompressor()
                    with open(log.path, "rb") as f, dctx.stream_reader(f, read_across_frames=True) as r:
                        while r.read(1 << 20):
                            pass
                    results["zstd decompression only"].append(size / (time.process_time() - t))
                if command:  # as ``watch`` sets it up: placement's lines unparsed, progress as bytes
                    options = WatchOptions(read_finished_at_start=True)
                    watcher = FleetObserver([folder], Settings.from_env(history_enabled=False), options, serve=False).watcher
                else:
                    watcher = EventLogWatcher([folder], read_finished_at_start=True)
                watcher.max_decoded_bytes_per_poll = 1 << 40
                t = time.process_time()
                watcher.poll()
                results[label].append(size / (time.process_time() - t))
                parsed[label] = watcher.counts.events_parsed
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    print(
        f"one zstd log of ~{args.scan_mb:.0f} MB decoded (recorded events repeated, {lines_per_mb:.0f} lines a MB), "
        f"median of {args.repeat} (min-max), MB/s decoded (load average {os.getloadavg()[0]:.1f}):"
    )
    base = statistics.median(results["zstd decompression only"])
    for label, values in results.items():
        extra = f", events parsed {parsed[label]}" if label in parsed else ""
        median = statistics.median(values)
        print(
            f"  {label}: {median:.0f} ({min(values):.0f}-{max(values):.0f}) = {median * lines_per_mb:,.0f} lines per CPU second, "
            f"{median / base:.2f}x of decompression alone{extra}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=200)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between batches per application; 0: recorded intervals")
    parser.add_argument("--time-scale", type=float, default=1.0, help="with --interval 0: divide the recorded intervals by this")
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--codec", default="zstd", choices=["zstd", "lz4", "snappy", "none"])
    parser.add_argument("--max-file-bytes", type=int, default=256 << 10, help="roll event files at this size (Spark: 128 MB)")
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--scenario", default="rocksdb_restart")
    parser.add_argument("--queries", type=int, default=1, help="queries per application, taking turns batch by batch")
    parser.add_argument("--drain", action="store_true", help="with --pipeline: after the window, read the logs to their end before the RSS")
    parser.add_argument("--no-placement", action="store_true", help="want only the pipeline's events (no task and SQL events)")
    parser.add_argument(
        "--tasks-parsed",
        action="store_true",
        help="with --pipeline: the watcher parses placement's lines whole (json.loads) and feeds the objects, as before the typed task decode",
    )
    parser.add_argument(
        "--pipeline", action="store_true", help="run the full watch pipeline (metrics, signals, /metrics text), not the watcher alone"
    )
    parser.add_argument("--scrape", type=float, default=15.0, help="with --pipeline: seconds between renderings of /metrics")
    parser.add_argument(
        "--progress-parsed",
        action="store_true",
        help="the watcher parses progress lines whole (json.loads), as before issue 32's session 7",
    )
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of polls before the first batch: the fixed cost per poll")
    parser.add_argument("--scan-only", action="store_true")
    parser.add_argument("--scan-mb", type=float, default=100.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--profile", type=int, default=0, metavar="TOP", help="sample the steady window's stacks and print the TOP functions by share"
    )
    args = parser.parse_args()
    if args.codec == "none":
        args.codec = None
    if args.scan_only:
        scan_only(args)
    else:
        scale(args)


if __name__ == "__main__":
    main()
