"""Soak: progress events through the whole pipeline; resident memory must stay flat.

    python bench/soak.py [--events 100000] [--no-history]
    python bench/soak.py --events 1000000 --no-history   # issue 17: flat within 10 MB over 1 M events

Events are derived from recorded real progress (10 queries, rotating batches, a restart every 5,000
batches), processed with signals, the Prometheus collector scraped every 1,000 events and (unless
``--no-history``) the history store writing to a temporary file. Each query's JSON is serialized once
with placeholders for batch id, time and run id, so the generator costs little beside the pipeline.
Prints the rate, RSS after warm-up (10 % of the events), its range over the rest (sampled every 1 %)
and at the end.
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
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.history.sink import HistorySink
from spark_state_observer.settings import Settings


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--no-history", action="store_true", help="without the history store (the pipeline and the exporter only)")
    args = ap.parse_args()
    base = recorded_progress()
    templates: list[list[str]] = []  # [progress index][query]: JSON with placeholders
    for b in base:
        row = []
        for q in range(10):
            p = derived(b, q, 987654321)
            p["timestamp"], p["runId"] = "@TS@", f"@RUN{q}@"
            row.append(json.dumps(p))
        templates.append(row)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(http_enabled=False)
        obs = PrometheusObserver(settings, serve=False, live=False)
        if not args.no_history:
            obs.add_sink(HistorySink(os.path.join(tmp, "history.db"), obs.self_metrics, settings))
        warm = args.events // 10
        step = max(args.events // 100, 1)
        started = time.perf_counter()
        warm_rss = 0.0
        samples: list[float] = []
        runs = [f"00000000-0000-0000-0002-{q:012d}" for q in range(10)]
        for n in range(args.events):
            q = n % 10
            if (n // 10) % 5000 == 0:
                runs[q] = f"00000000-0000-0000-0002-{n:012d}"
            text = (
                templates[n % len(base)][q]
                .replace("987654321", str(n // 10), 1)
                .replace("@TS@", time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(1.8e9 + n)), 1)
                .replace(f"@RUN{q}@", runs[q], 1)
            )
            obs.process(CapturedEvent("progress", text, 1.8e9 + n, 0.0))
            if n % 1000 == 0:
                generate_latest(obs.prometheus.registry)
            if n == warm:
                warm_rss = rss_mb()
            elif n > warm and n % step == 0:
                samples.append(rss_mb())
        elapsed = time.perf_counter() - started
        end_rss = rss_mb()
        obs.stop()
    print(
        f"events {args.events:,}{' (no history)' if args.no_history else ''}: {args.events / elapsed:,.0f}/s; "
        f"RSS after warm-up {warm_rss:.1f} MB, after it {min(samples):.1f}-{max(samples):.1f} MB, "
        f"at the end {end_rss:.1f} MB (growth {end_rss - warm_rss:+.1f} MB, range {max(samples) - min(samples):.1f} MB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
