"""PostgreSQL history: ingest rate of progress events from one writer and from ten at once, SQLite as baseline.

    python bench/history_pg.py [--events 20000] [--repeat 3] [--writers 10] [--url postgresql://...] [--baseline DIR]

Each event is a recorded real progress (bench/history_bench.py's workload: 10 queries, every operator
and partition row written, the raw JSON kept) going through ``HistoryStore.add_event`` + ``flush`` as
the sink does. Measured in the same run, each repeat into a fresh database:

- SQLite, one writer (the baseline);
- PostgreSQL, one writer, flushing synchronously;
- PostgreSQL, one writer through the live path (rows handed to the ``BackgroundWriter`` thread in the
  sink's 2,000-row flushes, timed until all are committed);
- PostgreSQL, ``--writers`` processes at once, each with its own queries and ``--events`` events (rate
  = all events / time from the common start until the last commit).

Without ``--url`` a throw-away server is started as tests/support/pg_server.py does (fsync on, as in production).
Each measurement runs in a subprocess of its own; with ``--baseline DIR`` (a checkout of another version,
e.g. ``git archive merge17 | tar -x -C DIR``) every measurement is also made with that version's ``observer``
package, interleaved, on the same server. Client CPU is the writer process's; server CPU is that of the
server's processes (when the bench started the server), both per progress event.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
# the version measured (--baseline runs another)
sys.path.insert(0, os.environ.get("HISTORY_BENCH_CODE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))

from bench.history_bench import bench_events, ingest
from spark_state_observer.history.backend import open_backend
from spark_state_observer.history.store import HistoryStore
from spark_state_observer.history.writer import BackgroundWriter

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SINK_FLUSH_ROWS = 2000  # spark_state_observer.history.sink.FLUSH_ROWS


def _store(location: str) -> HistoryStore:
    return HistoryStore(location, max_age_seconds=1e12, max_bytes=1e15)


CPU = [0.0]  # CPU seconds of this process in the last timed section (a worker runs one)


def sqlite_rate(n: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        store = _store(os.path.join(tmp, "h.db"))
        events = bench_events()
        t, CPU[0] = time.perf_counter(), time.process_time()
        ingest(store, events, n)
        store.close()
        seconds, CPU[0] = time.perf_counter() - t, time.process_time() - CPU[0]
    return n / seconds


def pg_rate(url: str, n: int) -> float:
    store = _store(url)
    store.backend.write(store.take())  # connect and migrate outside the timing
    events = bench_events()
    t, CPU[0] = time.perf_counter(), time.process_time()
    ingest(store, events, n)
    seconds, CPU[0] = time.perf_counter() - t, time.process_time() - CPU[0]
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
    t, CPU[0] = time.perf_counter(), time.process_time()
    for i in range(n):
        template = events[i % len(events)]
        ts = 1.8e9 + i // len(events)
        store.add_event(template.__class__(**{**template.__dict__, "batch_id": i // len(events), "timestamp": ts}), ts)
        if store.pending >= SINK_FLUSH_ROWS:
            writer.offer(store.take())
    writer.offer(store.take())
    ok = writer.drain(600)
    seconds, CPU[0] = time.perf_counter() - t, time.process_time() - CPU[0]
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


MODES = {"sqlite": "SQLite, one writer (baseline)", "pg": "PostgreSQL, one writer", "pg_live": "PostgreSQL, one writer, live sink"}


def _measure(mode: str, url: str, events: int, writers: int) -> float:
    if mode == "sqlite":
        return sqlite_rate(events)
    if mode == "pg":
        return pg_rate(url, events)
    if mode == "pg_live":
        return pg_live_rate(url, events)
    return pg_concurrent_rate(url, writers, events)


def _server_cpu(pid: int | None) -> float:
    """CPU seconds of the server (postmaster ``pid``) and its backends so far (exited backends included)."""
    if pid is None:
        return 0.0
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid:
            total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
        elif int(fields[1]) == pid:
            total += sum(int(x) for x in fields[11:13])
    return total / os.sysconf("SC_CLK_TCK")


def _run(code: str, mode: str, url: str, events: int, writers: int, server_pid: int | None) -> dict:
    env = dict(
        os.environ, HISTORY_BENCH_CODE=os.path.abspath(code), PYTHONPATH=os.pathsep.join([os.path.abspath(code), os.path.abspath(ROOT)])
    )
    args = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--url", url, "--events", str(events), "--writers", str(writers)]
    before = _server_cpu(server_pid)
    out = subprocess.run(args, env=env, cwd=os.path.abspath(code), capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{mode} with {code} failed: {out.stderr[-3000:]}")
    time.sleep(0.5)  # backends that just ended are counted in the postmaster's children times
    result = json.loads(out.stdout.strip().splitlines()[-1])
    total = events * (writers if mode == "pg_concurrent" else 1)
    result["server_us"] = (_server_cpu(server_pid) - before) / total * 1e6 if mode != "sqlite" and server_pid else None
    return result


def fmt(rates: list[float]) -> str:
    return f"{statistics.median(rates):>9,.0f} events/s (min {min(rates):,.0f}, max {max(rates):,.0f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000, help="progress events per writer and repeat")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--writers", type=int, default=10)
    ap.add_argument("--url", default=None, help="server to use (a database is created per repeat); default: a temporary one")
    ap.add_argument("--baseline", default=None, help="a checkout of another version to measure in the same run")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        rate = _measure(args.worker, args.url, args.events, args.writers)
        print(json.dumps({"rate": rate, "client_us": CPU[0] / args.events * 1e6}))
        return 0
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
    server_pid = server.proc.pid if server is not None and server.proc is not None else None

    def fresh() -> str:
        import psycopg
        from psycopg import conninfo

        name = f"bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return conninfo.make_conninfo(admin, dbname=name) if "://" not in admin else admin.rsplit("/", 1)[0] + "/" + name

    versions = {"this version": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
    modes = [*MODES, "pg_concurrent"]
    results: dict[tuple[str, str], list[dict]] = {(v, m): [] for v in versions for m in modes}
    try:
        for r in range(args.repeat):
            order = list(versions.items()) if r % 2 == 0 else list(reversed(versions.items()))
            for mode in modes:
                for name, code in order:
                    results[name, mode].append(_run(code, mode, fresh() if mode != "sqlite" else "", args.events, args.writers, server_pid))
                    print(f"repeat {r + 1}/{args.repeat} {name} {mode}: {results[name, mode][-1]['rate']:,.0f}/s", flush=True)
    finally:
        if server is not None:
            server.remove()
    load = os.getloadavg()
    print(
        f"\n{args.events:,} progress events per writer (1 batch + 2 operator + 4 partition rows each, 4.3 kB of JSON), "
        f"{args.repeat} repeats, cpus {os.cpu_count()}, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )
    labels = MODES | {"pg_concurrent": f"PostgreSQL, {args.writers} writers at once (total)"}
    for name in versions:
        base = statistics.median(x["rate"] for x in results[name, "sqlite"])
        print(f"\n{name}:")
        for mode in modes:
            rs = results[name, mode]
            line = f"  {labels[mode] + ':':<46} {fmt([x['rate'] for x in rs])}  = {statistics.median(x['rate'] for x in rs) / base:.2f} x SQLite"
            if mode != "pg_concurrent":
                line += f"; writer CPU {statistics.median(x['client_us'] for x in rs):.0f} us/event"
            if rs[0]["server_us"] is not None:
                line += f", server CPU {statistics.median(x['server_us'] for x in rs):.0f} us/event"
            print(line)
    if args.baseline:
        print()
        for mode in modes:
            ratio = statistics.median(x["rate"] for x in results["this version", mode]) / statistics.median(
                x["rate"] for x in results["baseline", mode]
            )
            print(f"this version / baseline, {labels[mode]}: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
