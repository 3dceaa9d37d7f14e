"""Capture cost per progress event: our listener vs PySpark's stock conversion vs the floor.

    python bench/capture_cost.py [--partitions 8 200] [--events 15]

For every progress event of a real stateful query (the demo pipeline, RocksDB, two state operators),
one JVM-side listener times three ways of taking the *same* event, in rotating order:
  stock  - ``QueryProgressEvent.fromJObject(jevent)``: what a plain PySpark listener pays before its body
  ours   - the observer's callback: one ``progress().json()`` call and a bounded-queue append
  floor  - one ``progress().json()`` call plus ``json.loads``
Prints medians (ms) and the ratios ours/stock and ours/floor per shuffle-partition count.
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


def measure(partitions: int, events: int) -> dict[str, float]:
    from pyspark.java_gateway import ensure_callback_server_started

    from observer.capture.listener import _JsonBridge
    from observer.cli.demo import dedup_window_query, spark_session
    from observer.runtime import Observer
    from observer.settings import Settings

    spark = spark_session(extra={"spark.sql.shuffle.partitions": str(partitions)})
    spark.sparkContext.setLogLevel("ERROR")
    obs = Observer(Settings(http_enabled=False), serve=False).start()
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
    return {k: statistics.median(v[2:]) * 1000 for k, v in timing.times.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, nargs="+", default=[8, 200])
    ap.add_argument("--events", type=int, default=15)
    args = ap.parse_args()
    print("| shuffle partitions | stock median ms | ours median ms | floor median ms | ours/stock | ours/floor |")
    print("|---|---|---|---|---|---|")
    for n in args.partitions:
        m = measure(n, args.events)
        print(
            f"| {n} | {m['stock']:.1f} | {m['ours']:.2f} | {m['floor']:.2f} | 1/{m['stock'] / m['ours']:.0f} | {m['ours'] / m['floor']:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
