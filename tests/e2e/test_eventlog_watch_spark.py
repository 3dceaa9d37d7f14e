"""The event-log watcher following a real Spark application while it runs."""

from __future__ import annotations

import glob
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

import pytest

from conftest import REQUIRE_REAL, ROOT
from spark_state_observer.fleet.app_events import AppEvents
from spark_state_observer.fleet.eventlog_watch import EventLogWatcher
from spark_state_observer.model.parse import parse_timestamp
from spark_state_observer.model.spark_events import QUERY_PROGRESS
from spark_state_observer.offline.eventlog import Record, read_records


@pytest.mark.slow
def test_real_spark_application_followed_while_it_runs(tmp_path) -> None:
    """A real PySpark application (Spark 4 defaults: rolling, zstd) writes its log while the watcher follows."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if REQUIRE_REAL:
            pytest.fail("Java is not installed")
        pytest.skip("Java is not installed")
    logs = tmp_path / "eventlog"
    logs.mkdir()
    poll, trigger = 0.5, 2.0
    watcher = EventLogWatcher([str(logs)], poll_interval=poll, grace_seconds=3600)
    delivered: list[tuple[float, dict]] = []
    statuses: list[str] = []

    def take(found: list[AppEvents]) -> None:
        now = time.time()
        for app in found:
            statuses.extend(s.status for s in app.status_changes)
            delivered.extend((now, e.data["progress"]) for e in app.events if e.event_type == QUERY_PROGRESS)

    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(take, stop), daemon=True)
    thread.start()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                os.path.join(ROOT, "tests", "support", "watch_job.py"),
                "--event-log-dir",
                str(logs),
                "--checkpoint",
                str(tmp_path / "checkpoint"),
                "--batches",
                "8",
                "--trigger-seconds",
                str(trigger),
            ],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=600,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
        deadline = time.monotonic() + 60
        while "finished" not in statuses and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        thread.join(30)
    folders = glob.glob(str(logs / "eventlog_v2_*"))
    assert len(folders) == 1 and glob.glob(os.path.join(folders[0], "events_1_*.zstd")), os.listdir(logs)
    assert glob.glob(os.path.join(folders[0], "appstatus_*")) and not glob.glob(os.path.join(folders[0], "appstatus_*.inprogress"))
    in_log = [r.payload["batchId"] for r in read_records([folders[0]]) if isinstance(r, Record) and r.kind == "progress"]
    assert len(in_log) >= 8 and [p["batchId"] for _, p in delivered] == in_log
    assert statuses == ["running", "finished"]
    # latency: Spark posts a progress event when its batch ends (trigger start + batch duration)
    latencies = sorted(at - (parse_timestamp(p["timestamp"]) + p["batchDuration"] / 1000.0) for at, p in delivered)
    print(
        f"\nwatcher latency, batch end -> delivered (poll {poll} s, trigger {trigger} s, zstd rolling): "
        f"median {statistics.median(latencies):.2f} s, min {latencies[0]:.2f} s, max {latencies[-1]:.2f} s over {len(latencies)} batches"
    )
