"""History store: ingest rate into SQLite, and the browser's reads of one query out of the stored batches.

    python bench/history_bench.py [--batches 100000] [--repeat 3] [--baseline DIR]

Rows are derived from recorded real progress (10 queries, one batch a second each, 2 operator and 4
partition rows per batch, the 4.3 kB raw JSON kept). Ingest goes through ``HistoryStore.add_event`` +
``flush`` as the sink does (progress already parsed; the parse is measured by bench/replay_rate.py), each
round into a new file, in a subprocess of its own. Rates are given per wall second and per CPU second of
that process (the machine is shared; CPU time is what this code controls). The reads are the browser's
loaders on one query: its last hour of batches and operator rows, and its whole history downsampled.

``--baseline DIR`` (a checkout of another version, e.g. ``git archive merge17 | tar -x -C DIR``) runs the
same rounds with that version's ``observer`` package, interleaved with this one's, so both are measured
under the same load.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
START_TS = 1.8e9


def bench_events(queries: int = 10, first_query: int = 0) -> list:
    """One parsed event per query, as the live path gets it (from JSON text); ``ingest`` re-stamps them."""
    from bench.common import derived, recorded_progress
    from spark_state_observer.model.parse import parse_progress

    base = recorded_progress()[-1]
    events = []
    for q in range(first_query, first_query + queries):
        obj = derived(base, q, 0)
        events.append(parse_progress(obj, raw_text=json.dumps(obj)))
    return events


def ingest(store, events: list, n: int, flush_rows: int = 20_000) -> None:
    """``n`` progress events (one batch a second per query) through ``add_event`` + ``flush``, as the sink does."""
    for i in range(n):
        ts = START_TS + i // len(events)
        event = copy.copy(events[i % len(events)])  # a new event per batch, as the live path has (frozen: set directly)
        object.__setattr__(event, "batch_id", i // len(events))
        object.__setattr__(event, "timestamp", ts)
        store.add_event(event, ts)
        if store.pending >= flush_rows:
            store.flush()
    store.flush()


def _median_ms(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def _waited_for_cpu() -> float:
    """Seconds this thread has spent runnable but waiting for a CPU (Linux schedstat; 0 elsewhere)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def worker(batches: int) -> dict:
    """One round in this process (``observer`` from the first entry of sys.path): ingest, then the reads."""
    from spark_state_observer.history import loaders
    from spark_state_observer.history.store import HistoryStore

    events = bench_events()
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "h.db")
        store = HistoryStore(db, max_age_seconds=1e12, max_bytes=1e15)
        wall, cpu, waited = time.perf_counter(), time.process_time(), _waited_for_cpu()
        ingest(store, events, batches)
        store.close()  # included: the last checkpoint of the WAL into the file
        wall, cpu, waited = time.perf_counter() - wall, time.process_time() - cpu, _waited_for_cpu() - waited
        size = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp))
        now = START_TS + batches // len(events)
        qid = events[3].query_id
        reads = {
            "last hour of batches": _median_ms(lambda: loaders.load_batches(db, qid, since=now - 3600)),
            "last hour of operator rows": _median_ms(lambda: loaders.load_operators(db, qid, since=now - 3600)),
            "operator series, whole history": _median_ms(lambda: loaders.load_operator_series(db, qid)),
            "partition lag, whole history": _median_ms(lambda: loaders.load_partition_lag(db, qid)),
        }
    return {"wall": batches / wall, "cpu": batches / cpu, "cpu_wait": waited / wall, "bytes_per_event": size / batches, "reads_ms": reads}


def _round(code: str, batches: int) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.abspath(code), os.path.abspath(ROOT)]))
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", "--batches", str(batches)],
        env=env,
        cwd=os.path.abspath(code),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _spread(values: list[float], fmt: str = ",.0f") -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=100_000, help="progress events per round")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", default=None, help="a checkout of another version to measure in the same run")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.batches)))
        return 0
    versions = {"this version": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
    results: dict[str, list[dict]] = {name: [] for name in versions}
    for r in range(args.repeat):
        for name, code in versions.items() if r % 2 == 0 else reversed(versions.items()):
            results[name].append(_round(code, args.batches))
            last = results[name][-1]
            print(
                f"round {r + 1} {name}: {last['wall']:,.0f}/s wall, {last['cpu']:,.0f}/s CPU, waited for a CPU {last['cpu_wait']:.0%}",
                flush=True,
            )
    load = os.getloadavg()
    print(f"\n{args.batches:,} progress events a round (1 batch + 2 operator + 4 partition rows each), {args.repeat} rounds")
    print(f"cpus {os.cpu_count()}, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; medians (min-max)")
    for name, rounds in results.items():
        print(f"\n{name}:")
        print(f"  ingest per wall second: {_spread([x['wall'] for x in rounds])} events/s")
        print(f"  ingest per CPU second:  {_spread([x['cpu'] for x in rounds])} events/s")
        print(f"  share of the wall time the writing thread waited for a CPU: {_spread([x['cpu_wait'] * 100 for x in rounds], '.0f')} %")
        print(f"  file: {statistics.median(x['bytes_per_event'] for x in rounds):,.0f} bytes per event")
        for read in rounds[0]["reads_ms"]:
            print(f"  {read}: {_spread([x['reads_ms'][read] for x in rounds], ',.1f')} ms")
    if args.baseline:
        for key, label in (("wall", "wall"), ("cpu", "CPU")):
            ratio = statistics.median(x[key] for x in results["this version"]) / statistics.median(x[key] for x in results["baseline"])
            print(f"\nthis version / baseline, per {label} second: {ratio:.2f}x", end="")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
