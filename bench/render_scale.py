"""Scale of the /metrics render: 100 queries x 4 operators, and the per-partition cap at 2,000 partitions.

    python bench/render_scale.py [--repeat 11]

Workload derived from a recorded real progress (RocksDB, ~40 custom metrics per operator). For each
workload it prints the series count and exposition size, the traced memory of the observer's state
(and of the endpoint's per-query cache after a first scrape), then median times, in the same run, of:

- endpoint GET: a full HTTP GET of /metrics, gzip accepted as Prometheus asks, against the same
  endpoint ``Observer.start()`` serves (``StateCollector.exposition``, cached per query), on 127.0.0.1;
- endpoint render: ``StateCollector.exposition()`` alone;
- generate_latest: prometheus-client over the registry (what the endpoint served before, and the
  Pushgateway too until both shared ``exposition()``), and its ratio to the endpoint's render.

"cold" is a scrape after every query received a new progress (nothing cached is valid), "warm" a
scrape after 1 query did. Events are applied between timed scrapes, untimed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import tracemalloc
import urllib.request
from typing import Callable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from prometheus_client import generate_latest

from bench.common import derived, recorded_progress
from observer.capture.queue import CapturedEvent
from observer.exporters.http import MetricsServer
from observer.runtime import Observer
from observer.settings import Settings


class Workload:
    """An observer fed ``queries`` queries of ``operators`` operators; ``advance`` gives some a new batch."""

    def __init__(self, queries: int, operators: int, partitions: int = 0) -> None:
        self.base = recorded_progress()[-1]
        self.queries, self.operators, self.partitions = queries, operators, partitions
        self.batch = self.base["batchId"]
        self.obs = Observer(Settings(http_enabled=False), serve=False, live=False)
        for _ in range(3):
            self.advance(queries)

    def advance(self, n: int) -> None:
        """The next batch's progress for the first ``n`` queries."""
        for q in range(n):
            p = derived(self.base, q, self.batch, self.operators)
            if self.partitions:
                custom = p["stateOperators"][0]["customMetrics"]
                for i in range(self.partitions):
                    custom[f"SnapshotLastUploaded.partition_{i}_default"] = self.batch - self.base["batchId"] + (i % 7)
            self.obs.process(CapturedEvent("progress", json.dumps(p), 0.0, 0.0))
        self.batch += 1


def timed(prepare: Callable[[], object], fn: Callable[[], object], repeat: int) -> float:
    """Median seconds of ``fn``, each run after an untimed ``prepare``."""
    times = []
    for _ in range(repeat):
        prepare()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def report(label: str, repeat: int, queries: int, operators: int, partitions: int = 0) -> None:
    tracemalloc.start()
    w = Workload(queries, operators, partitions)
    state = tracemalloc.get_traced_memory()[0]
    text = w.obs.prometheus.collector.exposition()
    cache = tracemalloc.get_traced_memory()[0] - state - len(text)
    tracemalloc.stop()
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    server = MetricsServer(w.obs.prometheus.collector.exposition, w.obs.prometheus.registry, "127.0.0.1", 0)
    request = urllib.request.Request(server.url, headers={"Accept-Encoding": "gzip"})
    try:

        def get() -> None:
            with urllib.request.urlopen(request, timeout=60) as response:
                response.read()

        print(
            f"\n{label}: {series:,} series, {len(text) / 1e6:.1f} MB exposition, "
            f"observer state {state / 1e6:.1f} MB, endpoint cache {cache / 1e6:.1f} MB",
            flush=True,
        )
        print("| scrape | endpoint GET (gzip) | endpoint render | generate_latest | generate_latest / endpoint render |")
        print("|---|---|---|---|---|")
        cases = [("cold (all queries changed)", queries, False), ("all changed, pre-rendered by the worker (live default)", queries, True)]
        cases += [("warm (1 query changed)", 1, False)] if queries > 1 else []
        for case, changed, prerendered in cases:

            def prepare(
                changed: int = changed, prerendered: bool = prerendered
            ) -> None:  # the previous timed scrape cached everything before these changes
                w.advance(changed)
                if prerendered:  # what the live worker does after each round of events, off the scrape path
                    w.obs.prometheus.collector.prerender()

            endpoint = timed(prepare, get, repeat)
            render = timed(prepare, w.obs.prometheus.collector.exposition, repeat)
            latest = timed(prepare, lambda: generate_latest(w.obs.prometheus.registry), repeat)
            print(
                f"| {case} | {endpoint * 1000:.0f} ms | {render * 1000:.0f} ms | {latest * 1000:.0f} ms | {latest / render:.1f}x |",
                flush=True,
            )
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=11, help="timed scrapes per cell (median reported)")
    args = parser.parse_args()
    report("100 queries x 4 operators", args.repeat, 100, 4)
    report("1 query, 2,000 partitions (top-K 10)", args.repeat, 1, 2, 2000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
