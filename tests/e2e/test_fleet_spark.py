"""The watcher's exposition of a real application equals the listener's for the same run.

One real Spark run (tests/support/fleet_job.py) is observed both ways: the listener attached in the driver, and
its event log, which the watcher follows afterwards. Same series names, same labels (``app``, the static
labels, the info series' application id, attempt and log name) and the same values, except what is
documented to differ: the observer's own series (what each process received and spent),
``spark_streaming_query_seconds_since_progress`` (the age of the last progress at the moment of the scrape),
placement and the snapshot series read from the checkpoint's listing (below).
"""

from __future__ import annotations

import math
import os
import urllib.request

import pytest
from test_fleet import parse

from conftest import run_script
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import CAPACITY_METRICS, PLACEMENT_METRICS
from spark_state_observer.settings import Settings

# documented differences: the observer's own series, the seconds since progress (the listener's clock runs on), and
# placement, which the watcher reads from the log's task events while this job's listener runs with Spark's UI off
# (no REST API to poll); tests/unit/test_placement_pipeline.py checks watch and replay placement against the truth. The
# per-executor capacity series follow placement (which executor holds which store), so they differ with it
# (tests/unit/test_capacity_live.py checks them live and replayed). The snapshot series taken from the checkpoint's
# listing are listed at each observer's own moment: the listener while the job runs, the watcher after it, reading
# the finished log, when snapshots uploaded after the last batch are there (tests/unit/test_snapshot_health.py checks
# them against the truth; the largest lag too, which the listing gives where it is read)
LISTED = (
    catalog.SNAPSHOT_LAG_BATCHES,
    catalog.SNAPSHOT_MAX_LAG_BATCHES,
    catalog.SNAPSHOT_INSTANCES_NEVER_UPLOADED,
    catalog.SNAPSHOT_INSTANCES_UNKNOWN,
    catalog.SNAPSHOT_INSTANCES_LAGGING,
    catalog.SNAPSHOT_RESTORE_REPLAY_FILES,
)
DIFFER = (
    "spark_state_observer_",
    "spark_streaming_query_seconds_since_progress",
    *{s.prometheus_name for s in (*PLACEMENT_METRICS, *CAPACITY_METRICS, *LISTED)},
)


@pytest.mark.slow
def test_watcher_and_listener_export_the_same_series_for_one_run(tmp_path) -> None:
    logs, exposition = tmp_path / "logs", tmp_path / "listener.prom"
    logs.mkdir()
    run_script(
        [
            "tests/support/fleet_job.py",
            "--event-log-dir",
            str(logs),
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--exposition",
            str(exposition),
        ]
    )
    listener = {k: v for k, v in parse(exposition.read_text()).items() if not k[0].startswith(DIFFER)}

    fleet = FleetObserver(
        [str(logs)],
        Settings.from_env(labels="cluster=a,namespace=b"),
        WatchOptions(read_finished_at_start=True, grace_seconds=3600),
        serve=False,
    )
    for _ in range(5):
        fleet.poll_once()
    watcher = {k: v for k, v in parse(fleet.exposition().decode()).items() if not k[0].startswith(DIFFER)}
    fleet.stop()

    batches = [
        v
        for (name, labels), v in listener.items()
        if name == "spark_streaming_batches_total" and dict(labels)["app"] == "fleet-equivalence"
    ]
    assert batches and batches[0] >= 6
    assert len(listener) > 100  # query, operator, custom state metrics, signals, the info series: compared one by one
    only_listener = sorted(set(listener) - set(watcher))
    only_watcher = sorted(set(watcher) - set(listener))
    assert not only_listener and not only_watcher, f"listener only: {only_listener[:10]}\nwatcher only: {only_watcher[:10]}"
    different = {k: (listener[k], watcher[k]) for k in listener if not math.isclose(listener[k], watcher[k], rel_tol=1e-9, abs_tol=1e-9)}
    assert not different, different


@pytest.mark.slow
def test_demo_watch_shows_two_applications_and_stops_cleanly(tmp_path) -> None:
    """``demo --watch``: two real applications, one endpoint, told apart by ``app``; SIGTERM stops all of it."""
    import re
    import signal
    import subprocess
    import sys
    import time

    from test_fleet import value

    from conftest import ROOT, free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_state_observer.cli", "demo", "--watch", "--port", str(port)],
        cwd=str(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    try:
        assert proc.stdout is not None
        folder, deadline = None, time.monotonic() + 600
        for line in proc.stdout:
            folder = folder or (re.search(r"into (\S+)/eventlogs", line) or [None, None])[1]
            if re.search(r"demo-orders: [2-9]\d* batches, demo-payments: [2-9]\d* batches", line) or time.monotonic() > deadline:
                break
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            series = parse(r.read().decode())
        for app in ("demo-orders", "demo-payments"):
            assert (value(series, "spark_streaming_batches_total", app=app, cluster="demo", namespace="local") or 0) >= 2, app
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(180) == 0
        assert folder and not os.path.exists(folder)  # its temporary folder is gone with it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
