"""Stalls in ``watch`` are judged on the followed application's clock, whatever its skew.

A recorded log (tests/fixtures, days old) written now batch by batch is what a driver whose clock is days
behind writes, or an old log copied in at its original pace. Judged on the watcher's clock every batch
would look days late: a ``stalled`` and a ``stall_recovered`` per batch, as many as the polls' timing
made, so two watchers of one log disagreed. The skew is measured and exported, and the stall rule waits
for it and then compares the log's times with the log's clock. A live log with a correct clock that stops
making progress still stalls, as it did before.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import sqlite3
import time
from datetime import datetime, timezone

from prometheus_client.parser import text_string_to_metric_families

from bench.eventlog_writer import ProgressiveLog, recorded_lines, renamed
from conftest import FIXTURES
from spark_state_observer.fleet.clock_skew import event_time
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.model.spark_events import QUERY_PROGRESS
from spark_state_observer.settings import Settings

SOURCE = glob.glob(os.path.join(FIXTURES, "rocksdb_restart", "run1", "eventlog", "*", "events_*"))[0]
APP, APP_ID = "old", "app-old-1"


@functools.lru_cache(maxsize=4)
def _samples(exposition: bytes) -> tuple[tuple[str, dict[str, str], float], ...]:
    """Every sample of a text exposition, parsed as Prometheus reads it; once per exposition (a poll's checks
    read several series of one exposition, and parsing it is most of a paced test's time)."""
    return tuple((s.name, s.labels, s.value) for family in text_string_to_metric_families(exposition.decode()) for s in family.samples)


def values(exposition: bytes, name: str, **labels: str) -> list[float]:
    """The values of ``name``'s series with ``labels`` in a text exposition, parsed as Prometheus reads it."""
    return [value for sample, have, value in _samples(exposition) if sample == name and all(have.get(k) == v for k, v in labels.items())]


def test_an_old_log_written_now_is_judged_on_its_own_clock_without_a_stall_storm(tmp_path) -> None:
    lines = renamed(recorded_lines(SOURCE), APP, APP_ID)
    cuts = [i + 1 for i, line in enumerate(lines) if line.startswith(b'{"Event":"' + QUERY_PROGRESS.encode())]
    newest = max(t for t in (event_time(e.get("Event", ""), e) for e in map(json.loads, lines)) if t is not None)
    logs = tmp_path / "logs"
    logs.mkdir()
    db = tmp_path / "history.db"
    # the default stall rule: a progress days old on the watcher's clock is far beyond any limit
    fleet = FleetObserver([str(logs)], Settings.from_env(history_path=str(db)), WatchOptions(history=True), serve=False)
    log = ProgressiveLog(str(logs), APP_ID, "zstd", max_file_bytes=60_000)
    started = time.time()
    age = started - newest
    assert age > 86400, "the recording is expected to be more than a day old (the cap this test guards against)"
    fleet.poll_once()
    for n, cut in enumerate(cuts):  # a batch a poll, as a live driver writes them; every poll ticks the stall rule
        for _ in log.steps(lines[cuts[n - 1] if n else 0 : cut]):
            pass
        fleet.poll_once()
    series = fleet.exposition()
    fleet.stop()

    with sqlite3.connect(db) as conn:
        batches = conn.execute("SELECT count(*) FROM batches WHERE app = ?", (APP,)).fetchone()[0]
        signals = dict(conn.execute("SELECT kind, count(*) FROM events WHERE app = ? GROUP BY kind", (APP,)).fetchall())
    assert batches == len(cuts)
    assert "stalled" not in signals and "stall_recovered" not in signals, signals
    # the skew is measured (the recording's age at least, as the watcher's clock ran on while it was written),
    # counted and exported; the ages are judged on the driver's clock, so the last progress is recent on it
    skew = values(series, "spark_state_observer_watch_clock_skew_seconds")
    assert skew and age <= skew[0] <= time.time() - newest + 600, (skew, age)
    assert fleet.watcher.counts.problems["clock_skew"] == 1
    since = values(series, "spark_streaming_query_seconds_since_progress", app=APP)
    assert since and max(since) < 60, since
    assert values(series, "spark_streaming_query_stalled", app=APP) == [0.0]


def _now(line: bytes) -> bytes:
    """A recorded streaming event as a driver with a correct clock logs it now (its batch 10 ms long)."""
    event = json.loads(line)
    progress = event.get("progress")
    if isinstance(progress, dict):
        progress["batchDuration"] = 10
        progress["timestamp"] = _iso(time.time() - 0.01)
    elif "timestamp" in event:
        event["timestamp"] = _iso(time.time())
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def test_a_live_log_with_a_correct_clock_still_stalls_when_its_progress_stops(tmp_path) -> None:
    lines = renamed(recorded_lines(SOURCE), APP, APP_ID)
    cuts = [i + 1 for i, line in enumerate(lines) if line.startswith(b'{"Event":"' + QUERY_PROGRESS.encode())][:6]
    logs = tmp_path / "logs"
    logs.mkdir()
    db = tmp_path / "history.db"
    settings = Settings.from_env(history_path=str(db), stall_min_seconds=2.0, stall_factor=1.0)
    fleet = FleetObserver([str(logs)], settings, WatchOptions(history=True), serve=False)
    log = ProgressiveLog(str(logs), APP_ID, "zstd", max_file_bytes=60_000)
    fleet.poll_once()
    for n, cut in enumerate(cuts):  # a batch a poll, every one logged now
        piece = [
            _now(line) if line.startswith(b'{"Event":"org.apache.spark.sql.streaming') else line
            for line in lines[cuts[n - 1] if n else 0 : cut]
        ]
        for _ in log.steps(piece):
            pass
        fleet.poll_once()
        time.sleep(0.2)
    running = values(fleet.exposition(), "spark_streaming_query_stalled", app=APP)
    time.sleep(3.0)  # no progress for longer than the limit: the query stalled, on the watcher's clock as before
    fleet.poll_once()
    series = fleet.exposition()
    fleet.stop()

    assert running == [0.0]
    assert values(series, "spark_streaming_query_stalled", app=APP) == [1.0]
    assert values(series, "spark_state_observer_watch_clock_skew_seconds") == [0.0]
    assert "clock_skew" not in fleet.watcher.counts.problems
    with sqlite3.connect(db) as conn:
        signals = dict(conn.execute("SELECT kind, count(*) FROM events WHERE app = ? GROUP BY kind", (APP,)).fetchall())
    assert signals.get("stalled") == 1 and "stall_recovered" not in signals, signals
