"""Soak: 100,000 progress events through the whole pipeline; resident memory must stay flat.

    python bench/soak.py [--events 100000]

Events are derived from recorded real progress (10 queries, rotating batches, a restart every 5,000
batches), processed with signals, the Prometheus collector scraped every 1,000 events and the history
store writing to a temporary file. Prints RSS after warm-up and at the end, and the rate.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from prometheus_client import generate_latest

from bench.common import derived, recorded_progress
from observer.capture.queue import CapturedEvent
from observer.history.sink import HistorySink
from observer.runtime import Observer
from observer.settings import Settings


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    args = ap.parse_args()
    base = recorded_progress()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(http_enabled=False)
        obs = Observer(settings, serve=False, live=False)
        obs.add_sink(HistorySink(os.path.join(tmp, "history.db"), obs.self_metrics, settings))
        warm = args.events // 10
        started = time.perf_counter()
        warm_rss = 0.0
        for n in range(args.events):
            p = derived(base[n % len(base)], n % 10, n // 10)
            p["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(1.8e9 + n))
            if (n // 10) % 5000 == 0:
                p["runId"] = f"00000000-0000-0000-0002-{n:012d}"
            obs.process(CapturedEvent("progress", json.dumps(p), 1.8e9 + n, 0.0))
            if n % 1000 == 0:
                generate_latest(obs.prometheus.registry)
            if n == warm:
                warm_rss = rss_mb()
        elapsed = time.perf_counter() - started
        end_rss = rss_mb()
        obs.stop()
    print(
        f"events {args.events:,}: {args.events / elapsed:,.0f}/s; RSS after warm-up {warm_rss:.1f} MB, "
        f"at the end {end_rss:.1f} MB (growth {end_rss - warm_rss:+.1f} MB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
