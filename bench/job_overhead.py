"""Job overhead: batch duration of a real stateful query with the observer attached vs without.

    python bench/job_overhead.py [--rounds 4] [--batches 12] [--otlp-endpoint URL]

One Spark session; rounds alternate the order of the two modes (without, with; then with, without) so
drift on this shared machine hits both. Each run is the demo pipeline on a fresh checkpoint; its first 3
batches (planning, JIT) are dropped. "With" means all exporters on: the Prometheus endpoint (scraped
every second by a thread, as Prometheus would), the history store, and OTLP when an endpoint is given.
Prints median batch duration per mode and the overhead ratio; goal: at most 2 %.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def run_once(spark, observed: bool, batches: int, tmp: str, otlp: str | None) -> list[float]:  # type: ignore[no-untyped-def]
    import observer
    from observer.cli.demo import dedup_window_query

    handle = None
    stop_scraping = threading.Event()
    if observed:
        settings = {"http_port": 0, "history_path": os.path.join(tmp, "history.db")}
        if otlp:
            settings["otlp_endpoint"] = otlp
        handle = observer.attach(spark, **settings)

        def scrape() -> None:
            while not stop_scraping.wait(1.0):
                urllib.request.urlopen(handle.url, timeout=5).read()

        threading.Thread(target=scrape, daemon=True).start()
    query = dedup_window_query(spark, tempfile.mkdtemp(dir=tmp), rows_per_second=100, trigger_seconds=0.5)
    while len(query.recentProgress) < batches + 3:
        time.sleep(0.2)
    durations = [p["batchDuration"] / 1000 for p in query.recentProgress][3 : batches + 3]
    query.stop()
    stop_scraping.set()
    if handle:
        handle.stop()
    return durations


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--otlp-endpoint", default=None)
    args = ap.parse_args()
    from observer.cli.demo import spark_session

    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[bool, list[float]] = {False: [], True: []}
    per_round: list[float] = []  # each round's overhead: median with / median without, of that round's runs
    with tempfile.TemporaryDirectory() as tmp:
        run_once(spark, False, 3, tmp, None)  # warm the JVM
        for r in range(args.rounds):
            runs: dict[bool, list[float]] = {}
            for observed in (False, True) if r % 2 == 0 else (True, False):
                runs[observed] = run_once(spark, observed, args.batches, tmp, args.otlp_endpoint)
                results[observed].extend(runs[observed])
            per_round.append(statistics.median(runs[True]) / statistics.median(runs[False]) - 1)
    spark.stop()
    without, with_ = statistics.median(results[False]), statistics.median(results[True])
    print(
        f"batches per mode: {len(results[False])}; median batch duration without {without * 1000:.0f} ms "
        f"({min(results[False]) * 1000:.0f}-{max(results[False]) * 1000:.0f}), with the observer {with_ * 1000:.0f} ms "
        f"({min(results[True]) * 1000:.0f}-{max(results[True]) * 1000:.0f}): overhead {100 * (with_ / without - 1):+.1f} %"
    )
    print(
        f"overhead per round ({args.rounds} rounds): median {100 * statistics.median(per_round):+.1f} % "
        f"(min {100 * min(per_round):+.1f} %, max {100 * max(per_round):+.1f} %)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
