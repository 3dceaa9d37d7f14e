"""Watching many applications' logs in one bucket: what each poll costs the store and the watcher.

    python bench/store_scale.py [--apps 1000] [--poll 2] [--cycles 15] [--parts-per-second 20] [--shards 1]

A real S3-compatible server (s3proxy, as in the tests: bash scripts/fetch_s3proxy.sh) holds ``--apps``
rolling event logs under one prefix, each an ``appstatus_<app>.inprogress`` marker and its first part: a
real recorded log (tests/fixtures, RocksDB) rolled into ~16 KiB zstd parts, as s3a makes them visible. The
watcher's store mirror (``spark_state_observer.fleet.store_mirror``) and folder watcher follow the prefix as ``watch``
does, shard K of ``--shards`` (shard 0 is measured; every shard lists the whole prefix). An uploader thread
(another S3 client, not counted) adds the next part of random applications at ``--parts-per-second``; the
poll loop syncs and polls every ``--poll`` seconds. Reported per poll cycle over the steady cycles:

- requests the watcher sent, by kind (LIST pages, GETs), and their rate per minute;
- the cycle's wall time (the LIST of the whole prefix, then the GETs) and CPU time, the process RSS;
- latency from a part's upload to its bytes in the mirror (what the watcher reads at the same poll):
  median and max.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "support"))

from bench.common import ROOT
from bench.eventlog_writer import ProgressiveLog, recorded_lines
from spark_state_observer.fleet.eventlog_watch import EventLogWatcher
from spark_state_observer.fleet.log_names import in_shard
from spark_state_observer.fleet.store_mirror import StoreMirror


def template(folder: str) -> list[tuple[str, bytes]]:
    """A real recorded log rolled into small zstd parts: (name with ``APP``, bytes) in index order."""
    source = glob.glob(os.path.join(ROOT, "tests", "fixtures", "rocksdb_restart", "run1", "eventlog", "**", "events_*"), recursive=True)[0]
    log = ProgressiveLog(folder, "APP", "zstd", max_file_bytes=16 << 10)
    for _ in log.steps(recorded_lines(source)):
        pass
    log.finish()
    parts = sorted(glob.glob(os.path.join(log.dir, "events_*")), key=lambda p: int(os.path.basename(p).split("_")[1]))
    out = []
    for p in parts:
        with open(p, "rb") as f:
            out.append((os.path.basename(p), f.read()))
    return out


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--poll", type=float, default=2.0)
    parser.add_argument("--cycles", type=int, default=15)
    parser.add_argument("--parts-per-second", type=float, default=20.0)
    parser.add_argument("--shards", type=int, default=1)
    args = parser.parse_args()

    from s3_server import JAR_DIR, S3Server

    jars = sorted(glob.glob(os.path.join(JAR_DIR, "s3proxy-*.jar")))
    if not jars:
        sys.exit(f"s3proxy is not in {JAR_DIR}: bash scripts/fetch_s3proxy.sh")
    root = tempfile.mkdtemp(prefix="sso-store-scale-")
    server = S3Server(jars[-1], root)
    os.environ.update(server.env)
    try:
        run(args, root)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace, root: str) -> None:
    import s3fs

    parts = template(os.path.join(root, "template"))
    uploader = s3fs.S3FileSystem(skip_instance_cache=True)
    bucket = "bench"
    uploader.call_s3("create_bucket", Bucket=bucket)
    apps = [f"app-20261126{i:06d}-0001" for i in range(args.apps)]
    folder = {a: f"{bucket}/eventlogs/eventlog_v2_{a}" for a in apps}
    started = time.monotonic()
    for i in range(0, len(apps), 200):  # batched PUTs (s3fs sends a batch concurrently)
        batch = apps[i : i + 200]
        objects = {f"{folder[a]}/appstatus_{a}.inprogress": b"" for a in batch}
        objects.update({f"{folder[a]}/{parts[0][0].replace('APP', a)}": parts[0][1] for a in batch})
        uploader.pipe(objects)
    print(f"{len(apps)} applications, {2 * len(apps)} objects uploaded in {time.monotonic() - started:.1f} s")

    shard = (0, args.shards) if args.shards > 1 else None
    mine = [a for a in apps if in_shard(a, shard)]
    local = os.path.join(root, "mirror")
    mirror = StoreMirror(f"s3://{bucket}/eventlogs", local, shard=shard)
    watcher = EventLogWatcher([local], grace_seconds=3600, shard=shard)

    logging.disable(logging.WARNING)  # every application is the same recorded one: the watcher says so, once each
    next_part = dict.fromkeys(apps, 1)
    listed = [2 * len(apps)]
    uploaded: dict[str, float] = {}  # local path the part will have -> when its upload finished
    lock = threading.Lock()
    stop = threading.Event()

    def upload() -> None:
        rng = random.Random(7)
        interval = 1.0 / args.parts_per_second
        while not stop.wait(interval):
            app = rng.choice(apps)
            index = next_part[app]
            if index >= len(parts):
                continue
            name = parts[index][0].replace("APP", app)
            uploader.pipe_file(f"{folder[app]}/{name}", parts[index][1])
            next_part[app] = index + 1
            listed[0] += 1
            if in_shard(app, shard):
                with lock:
                    uploaded[os.path.join(local, f"eventlog_v2_{app}", name)] = time.monotonic()

    def cycle() -> tuple[dict[str, float], list[float]]:
        before = dict(mirror.requests)
        cpu, wall = time.process_time(), time.monotonic()
        mirror.sync()
        synced = time.monotonic()
        watcher.poll()
        done = time.monotonic()
        latencies = []
        with lock:
            for path, at in list(uploaded.items()):
                if os.path.exists(path):
                    latencies.append(synced - at)
                    del uploaded[path]
        costs = {
            "list": mirror.requests["list"] - before.get("list", 0),
            "get": mirror.requests["get"] - before.get("get", 0),
            "sync": synced - wall,
            "cycle": done - wall,
            "cpu": time.process_time() - cpu,
        }
        return costs, latencies

    first, _ = cycle()
    print(
        f"first cycle (shard {shard or '1/1'}: {len(mine)} applications): {first['list']:.0f} LIST, {first['get']:.0f} GET, "
        f"{first['cycle']:.1f} s wall, {first['cpu']:.1f} s CPU, RSS {_rss_mb():.0f} MB"
    )
    thread = threading.Thread(target=upload, daemon=True)
    thread.start()
    rows: list[dict[str, float]] = []
    latencies: list[float] = []
    tick = time.monotonic()
    for _ in range(args.cycles):
        tick += args.poll
        time.sleep(max(0.0, tick - time.monotonic()))
        costs, seen = cycle()
        rows.append(costs)
        latencies += seen if len(rows) > 1 else []
    stop.set()
    thread.join()
    steady = rows[1:]
    lists, gets = [r["list"] for r in steady], [r["get"] for r in steady]
    per_minute = 60.0 / args.poll
    print(
        "| apps | shards | poll | objects listed (last) | LIST per cycle | GET per cycle | requests per minute "
        "| cycle wall median / max | CPU per cycle | RSS | upload -> mirrored median / max |"
    )
    print(
        f"| {args.apps} | {args.shards} | {args.poll:g} s | {listed[0]} | {statistics.median(lists):.0f} "
        f"| {statistics.median(gets):.0f} | {statistics.median(lists) * per_minute:.0f} LIST + {statistics.mean(gets) * per_minute:.0f} GET "
        f"| {statistics.median(r['sync'] for r in steady):.2f} s / {max(r['sync'] for r in steady):.2f} s "
        f"| {statistics.median(r['cpu'] for r in steady):.2f} s | {_rss_mb():.0f} MB "
        f"| {statistics.median(latencies) if latencies else float('nan'):.2f} s / {max(latencies) if latencies else float('nan'):.2f} s |"
    )


if __name__ == "__main__":
    main()
