"""History store: ingest rate, and loading the last hour of one query out of 1 M stored batches.

    python bench/history_bench.py [--batches 1000000]

Rows are derived from recorded real progress (10 queries, one batch a second each, operators and
partition rows included). Ingest goes through ``HistoryStore.add_event`` + ``flush`` as the live sink
does (progress already parsed; the parse is measured by bench/replay_rate.py). The load uses the
browser's loader ``load_batches(query, since=now-1h)``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.common import derived, recorded_progress
from observer.history.loaders import load_batches
from observer.history.store import HistoryStore
from observer.model.events import QueryProgress
from observer.model.parse import parse_progress

START_TS = 1.8e9


def bench_events(queries: int = 10, first_query: int = 0) -> list[QueryProgress]:
    """One parsed event per query, as the live path gets it (from JSON text); ``ingest`` re-stamps them."""
    base = recorded_progress()[-1]
    events = []
    for q in range(first_query, first_query + queries):
        obj = derived(base, q, 0)
        events.append(parse_progress(obj, raw_text=json.dumps(obj)))
    return events


def ingest(store: HistoryStore, events: list[QueryProgress], n: int, flush_rows: int = 20_000) -> None:
    """``n`` progress events (one batch a second per query) through ``add_event`` + ``flush``, as the sink does."""
    for i in range(n):
        template = events[i % len(events)]
        ts = START_TS + i // len(events)
        event = template.__class__(**{**template.__dict__, "batch_id": i // len(events), "timestamp": ts})
        store.add_event(event, ts)
        if store.pending >= flush_rows:
            store.flush()
    store.flush()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=1_000_000)
    args = ap.parse_args()
    events = bench_events()
    start_ts = START_TS
    with tempfile.TemporaryDirectory() as tmp:
        store = HistoryStore(os.path.join(tmp, "h.db"), max_age_seconds=1e12, max_bytes=1e15)
        t = time.perf_counter()
        ingest(store, events, args.batches)
        ingest_seconds = time.perf_counter() - t
        size = os.path.getsize(os.path.join(tmp, "h.db")) / 1e9
        now = start_ts + args.batches // 10
        qid = events[3].query_id
        times = []
        for _ in range(5):
            t = time.perf_counter()
            frame = load_batches(os.path.join(tmp, "h.db"), qid, since=now - 3600)
            times.append(time.perf_counter() - t)
        store.close()
    print(
        f"ingest: {args.batches:,} progress events in {ingest_seconds:.1f} s = {args.batches / ingest_seconds:,.0f} events/s ({size:.1f} GB)"
    )
    print(f"last hour of one query ({len(frame):,} batches) out of {args.batches:,}: median {statistics.median(times) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
