"""Capture cost per progress event: our listener vs PySpark's stock conversion vs the floor.

    python bench/capture_cost.py [--partitions 8 200] [--events 15]

For every progress event of a real stateful query (the demo pipeline, RocksDB, two state operators),
one JVM-side listener times three ways of taking the *same* event, in rotating order:
  stock  - ``QueryProgressEvent.fromJObject(jevent)``: what a plain PySpark listener pays before its body
  ours   - the observer's callback: one ``progress().json()`` call and a bounded-queue append
  floor  - one ``progress().json()`` call plus ``json.loads``
Prints medians (min-max, ms) and the ratios ours/stock and ours/floor, paired per event, per shuffle-partition count.
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


class TimingBridge:
    """Implements the JVM listener interface; times the three capture paths on each progress event."""

    def __init__(self, observer_bridge) -> None:  # type: ignore[no-untyped-def]
        self.bridge = observer_bridge
        self.times: dict[str, list[float]] = {"stock": [], "ours": [], "floor": []}
        self.n = 0

    def onQueryStarted(self, jevent) -> None:  # noqa: N802
        pass

    def onQueryIdle(self, jevent) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, jevent) -> None:  # noqa: N802
        pass

    def onQueryProgress(self, jevent) -> None:  # noqa: N802
        from pyspark.sql.streaming.listener import QueryProgressEvent

        paths = {
            "stock": lambda: QueryProgressEvent.fromJObject(jevent),
            "ours": lambda: self.bridge.onQueryProgress(jevent),
            "floor": lambda: json.loads(jevent.progress().json()),
        }
        order = list(paths)
        order = order[self.n % 3 :] + order[: self.n % 3]
        self.n += 1
        for name in order:
            t = time.perf_counter()
            paths[name]()
            self.times[name].append(time.perf_counter() - t)

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def measure(partitions: int, events: int) -> dict[str, list[float]]:
    from pyspark.java_gateway import ensure_callback_server_started

    from spark_state_observer.capture.listener import _JsonBridge
    from spark_state_observer.cli.demo import dedup_window_query, spark_session
    from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
    from spark_state_observer.settings import Settings

    spark = spark_session(extra={"spark.sql.shuffle.partitions": str(partitions)})
    spark.sparkContext.setLogLevel("ERROR")
    obs = PrometheusObserver(Settings(http_enabled=False), serve=False).start()
    timing = TimingBridge(_JsonBridge(obs.submit))
    gw = spark.sparkContext._gateway
    ensure_callback_server_started(gw)
    jlistener = spark.sparkContext._jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(timing)
    spark._jsparkSession.streams().addListener(jlistener)
    with tempfile.TemporaryDirectory() as ck:
        query = dedup_window_query(spark, ck, rows_per_second=100)
        while timing.n < events + 2:
            time.sleep(0.5)
        query.stop()
    spark._jsparkSession.streams().removeListener(jlistener)
    obs.stop()
    spark.stop()
    # drop the first two events: JIT and first-batch effects
    return {k: v[2:] for k, v in timing.times.items()}


def spread(values: list[float], scale: float = 1000.0, digits: int = 2) -> str:
    """Median (min-max)."""
    return f"{statistics.median(values) * scale:.{digits}f} ({min(values) * scale:.{digits}f}-{max(values) * scale:.{digits}f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, nargs="+", default=[8, 200])
    ap.add_argument("--events", type=int, default=15)
    args = ap.parse_args()
    print(
        "| shuffle partitions | events | stock ms | ours ms | floor ms | ours/stock per event | ours/floor per event |\n"
        "|---|---|---|---|---|---|---|"
    )
    for n in args.partitions:
        m = measure(n, args.events)
        # the three paths timed on the same event: the ratios are paired per event
        to_stock = [s / o for s, o in zip(m["stock"], m["ours"])]
        to_floor = [o / f for o, f in zip(m["ours"], m["floor"])]
        print(
            f"| {n} | {len(to_stock)} | {spread(m['stock'], digits=1)} | {spread(m['ours'])} | {spread(m['floor'])} "
            f"| 1/{statistics.median(to_stock):.0f} (1/{min(to_stock):.0f}-1/{max(to_stock):.0f}) "
            f"| {spread(to_floor, 1.0)} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
