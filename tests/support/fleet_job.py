"""A real streaming application observed both ways at once: the listener attached, and its event log written.

The equivalence test (tests/e2e/test_fleet_spark.py) then follows the log with the watcher and compares the
two expositions. Writes the listener's exposition, taken after the query stopped and the observer
drained, to ``--exposition``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--event-log-dir", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--exposition", required=True)
    parser.add_argument("--batches", type=int, default=6)
    args = parser.parse_args()

    import spark_state_observer as observer
    from spark_state_observer.cli.demo import dedup_window_query, spark_session

    spark = spark_session(event_log_dir=args.event_log_dir, extra={"spark.app.name": "fleet-equivalence"})
    spark.sparkContext.setLogLevel("ERROR")
    handle = observer.attach(spark, http_enabled=False, history_enabled=False, labels="cluster=a,namespace=b")
    query = dedup_window_query(spark, args.checkpoint, rows_per_second=20, name="orders", trigger_seconds=1.0)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        last = query.lastProgress
        if last is not None and last["batchId"] + 1 >= args.batches:
            break
        time.sleep(0.2)
    query.stop()
    time.sleep(1.5)  # the terminated event reaches the listener and the event log asynchronously
    handle.flush()
    with open(args.exposition, "wb") as f:
        f.write(handle.observer.exposition())
    handle.stop()
    spark.stop()


if __name__ == "__main__":
    main()
