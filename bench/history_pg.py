"""PostgreSQL history: ingest rate of progress events from one writer and from ten at once, SQLite as baseline.

    python bench/history_pg.py [--events 20000] [--repeat 3] [--writers 10] [--url postgresql://...]

Each event is a recorded real progress (bench/history_bench.py's workload: 10 queries, every operator
and partition row written, the raw JSON kept) going through ``HistoryStore.add_event`` + ``flush`` as
the sink does. Measured in the same run, each repeat into a fresh database:

- SQLite, one writer (the baseline);
- PostgreSQL, one writer, flushing synchronously;
- PostgreSQL, one writer through the live path (rows handed to the ``BackgroundWriter`` thread in the
  sink's 2,000-row flushes, timed until all are committed);
- PostgreSQL, ``--writers`` processes at once, each with its own queries and ``--events`` events (rate
  = all events / time from the common start until the last commit).

Without ``--url`` a throw-away server is started as tests/pg_server.py does (fsync on, as in production).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from bench.history_bench import bench_events, ingest
from observer.history.backend import open_backend
from observer.history.store import HistoryStore
from observer.history.writer import BackgroundWriter

SINK_FLUSH_ROWS = 2000  # observer.history.sink.FLUSH_ROWS


def _store(location: str) -> HistoryStore:
    return HistoryStore(location, max_age_seconds=1e12, max_bytes=1e15)


def sqlite_rate(n: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        store = _store(os.path.join(tmp, "h.db"))
        events = bench_events()
        t = time.perf_counter()
        ingest(store, events, n)
        seconds = time.perf_counter() - t
        store.close()
    return n / seconds


def pg_rate(url: str, n: int) -> float:
    store = _store(url)
    store.backend.write(store.take())  # connect and migrate outside the timing
    events = bench_events()
    t = time.perf_counter()
    ingest(store, events, n)
    seconds = time.perf_counter() - t
    store.close()
    return n / seconds


def pg_live_rate(url: str, n: int) -> float:
    """The sink's path: the caller builds rows and hands them over; the writer thread commits them."""
    backend = open_backend(url)
    writer = BackgroundWriter(backend, capacity_rows=10**9, on_dropped=lambda k: None, on_failure=lambda: None)
    store = HistoryStore(url, backend=backend)
    writer.offer(store.take())
    writer.drain(30)
    events = bench_events()
    t = time.perf_counter()
    for i in range(n):
        template = events[i % len(events)]
        ts = 1.8e9 + i // len(events)
        store.add_event(template.__class__(**{**template.__dict__, "batch_id": i // len(events), "timestamp": ts}), ts)
        if store.pending >= SINK_FLUSH_ROWS:
            writer.offer(store.take())
    writer.offer(store.take())
    ok = writer.drain(600)
    seconds = time.perf_counter() - t
    writer.close(10)
    if not ok or writer.error:
        raise RuntimeError(f"live writer did not finish: {writer.error}")
    return n / seconds


def _writer_process(url: str, index: int, n: int, ready, go, done) -> None:
    store = _store(url)
    store.backend.write(store.take())  # connected and migrated before the start
    events = bench_events(first_query=100 * (index + 1))
    ready.put(index)
    go.wait()
    ingest(store, events, n)
    store.close()
    done.put(time.time())


def pg_concurrent_rate(url: str, writers: int, n: int) -> float:
    ctx = mp.get_context("spawn")
    ready, done, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_writer_process, args=(url, i, n, ready, go, done)) for i in range(writers)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=300)
    start = time.time()
    go.set()
    ends = [done.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode:
            raise RuntimeError(f"writer exited with {p.exitcode}")
    return writers * n / (max(ends) - start)


def fmt(rates: list[float]) -> str:
    return f"{statistics.median(rates):>9,.0f} events/s (min {min(rates):,.0f}, max {max(rates):,.0f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000, help="progress events per writer and repeat")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--writers", type=int, default=10)
    ap.add_argument("--url", default=None, help="server to use (a database is created per repeat); default: a temporary one")
    args = ap.parse_args()
    server = None
    if args.url is None:
        from pg_server import PostgresServer, find_bindir

        bindir = find_bindir()
        if bindir is None:
            print("PostgreSQL server binaries not found (apt-get install postgresql), or give --url", file=sys.stderr)
            return 2
        server = PostgresServer(bindir, fsync=True).start()
        admin = server.url(database="postgres")
    else:
        admin = args.url

    def fresh() -> str:
        import psycopg
        from psycopg import conninfo

        name = f"bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return conninfo.make_conninfo(admin, dbname=name) if "://" not in admin else admin.rsplit("/", 1)[0] + "/" + name

    results: dict[str, list[float]] = {"sqlite": [], "pg": [], "pg_live": [], "pg_concurrent": []}
    try:
        for r in range(args.repeat):
            results["sqlite"].append(sqlite_rate(args.events))
            results["pg"].append(pg_rate(fresh(), args.events))
            results["pg_live"].append(pg_live_rate(fresh(), args.events))
            results["pg_concurrent"].append(pg_concurrent_rate(fresh(), args.writers, args.events))
            print(f"repeat {r + 1}/{args.repeat}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in results.items()), flush=True)
    finally:
        if server is not None:
            server.remove()
    base = statistics.median(results["sqlite"])
    print(
        f"\n{args.events:,} progress events per writer (1 batch + 2 operator + 4 partition rows each, 4.3 kB of JSON), "
        f"{args.repeat} repeats, cpus {os.cpu_count()}"
    )
    print(f"SQLite, one writer (baseline):        {fmt(results['sqlite'])}")
    for key, label in (
        ("pg", "PostgreSQL, one writer:              "),
        ("pg_live", "PostgreSQL, one writer, live sink:   "),
        ("pg_concurrent", f"PostgreSQL, {args.writers} writers at once:      "),
    ):
        print(f"{label} {fmt(results[key])}  = {statistics.median(results[key]) / base:.2f} x SQLite")
    return 0


if __name__ == "__main__":
    sys.exit(main())
