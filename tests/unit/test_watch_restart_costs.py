"""What a restart, a restore, a Kafka backlog, an executor loss and a migration cost: the watcher says it live as replay does.

Real recorded jobs (tests/fixtures): a Kafka job restarted as a new process on its checkpoint
(``kafka_restart``), a RocksDB job restarted likewise (``rocksdb_restart``) with its first driver killed
without a word (its log cut before the termination and left in progress, as a killed driver leaves it), and
a local cluster with an executor killed inside a batch (``incidents/executor_loss``, ``placement/kill``). Each
log is written into a folder the way Spark writes it (``bench.eventlog_writer``), application after
application, while the watcher follows the folder and writes its history; what the history then holds (the
signals with their times and figures, the partitions' placement) and the downtime the endpoint exports are
compared with ``replay`` of the same logs into a history of its own."""

from __future__ import annotations

import glob
import json
import os
import sqlite3
from typing import Any

import pytest
from test_fleet import parse, value

from bench.eventlog_writer import ProgressiveLog, recorded_lines
from conftest import FIXTURES
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.history.loaders import load_events
from spark_state_observer.metrics import catalog
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

TERMINATED = b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryTerminatedEvent"'


def applications(*runs: str) -> list[tuple[str, list[bytes]]]:
    """Each recorded run's application id and event-log lines, in the order the runs happened."""
    out = []
    for run in runs:
        # a rolling log's files, else (Spark 3.5's default) the single file
        files = sorted(glob.glob(os.path.join(FIXTURES, run, "eventlog", "*", "events_*"))) or sorted(
            glob.glob(os.path.join(FIXTURES, run, "eventlog", "*.*"))
        )
        lines = [line for path in files for line in recorded_lines(path)]
        start = next(json.loads(line) for line in lines if line.startswith(b'{"Event":"SparkListenerApplicationStart"'))
        out.append((start["App ID"], lines))
    return out


def killed(app: tuple[str, list[bytes]]) -> tuple[str, list[bytes]]:
    """The application as a driver killed before its query stopped leaves its log: no termination, no end."""
    app_id, lines = app
    return app_id, lines[: next(i for i, line in enumerate(lines) if line.startswith(TERMINATED))]


def write(folder: str, apps: list[tuple[str, list[bytes]]], unfinished: tuple[str, ...], fleet: FleetObserver | None = None) -> None:
    """Write each application's log flush group by flush group (the watcher, if any, polling after each)."""
    for app_id, lines in apps:
        log = ProgressiveLog(folder, app_id, "zstd")
        for _ in log.steps(lines):
            if fleet is not None:
                fleet.poll_once()
        if app_id not in unfinished:
            log.finish()
        if fleet is not None:
            fleet.poll_once()


def signals(history: str) -> list[tuple[Any, ...]]:
    frame = load_events(history)
    return sorted((row.kind, row.run_id, round(row.ts, 3), json.dumps(row.attributes, sort_keys=True)) for row in frame.itertuples())


def placements(history: str) -> list[tuple[Any, ...]]:
    """The placement rows, all but the application id: a replay of several applications' logs knows none."""
    with sqlite3.connect(history) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(placements)") if row[1] != "app_id"]
        return sorted(db.execute(f"SELECT {', '.join(columns)} FROM placements").fetchall(), key=repr)


def followed_and_replayed(tmp_path: Any, apps: list[tuple[str, list[bytes]]], unfinished: tuple[str, ...] = ()) -> dict[str, Any]:
    """The watcher's history and exposition after following ``apps`` as they were written, and replay's of the same logs."""
    live_history, replay_history = str(tmp_path / "watch.db"), str(tmp_path / "replay.db")
    (tmp_path / "logs").mkdir()
    fleet = FleetObserver(
        [str(tmp_path / "logs")],
        Settings(http_enabled=False, history_path=live_history),
        WatchOptions(history=True, grace_seconds=3600),
        serve=False,
    )
    write(str(tmp_path / "logs"), apps, unfinished, fleet)
    exposition = fleet.exposition().decode()
    fleet.stop()
    (tmp_path / "copy").mkdir()
    write(str(tmp_path / "copy"), apps, unfinished)
    replayed = replay(sorted(glob.glob(str(tmp_path / "copy" / "*"))), Settings(http_enabled=False), history=replay_history)
    return {
        "live": signals(live_history),
        "replayed": signals(replay_history),
        "live_placements": placements(live_history),
        "replayed_placements": placements(replay_history),
        "live_series": parse(exposition),
        "replayed_series": parse(replayed.exposition()),
    }


def of_kind(found: list[tuple[Any, ...]], kind: str) -> list[dict[str, Any]]:
    return [json.loads(attrs) for k, _, _, attrs in found if k == kind]


def downtime(series: dict[Any, float]) -> float | None:
    return value(series, catalog.QUERY_LAST_DOWNTIME.prometheus_name)


def test_a_kafka_job_restarted_as_a_new_process_costs_the_same_live_as_replayed(tmp_path: Any) -> None:
    said = followed_and_replayed(tmp_path, applications("kafka_restart/run1", "kafka_restart/run2"))
    assert said["live"] == said["replayed"]
    (restart,) = of_kind(said["live"], kinds.QUERY_RESTARTED)
    assert 50 < restart["downtime_seconds"] < 60 and restart["downtime_seconds"] == restart["gap_since_previous_run_seconds"]
    (forecast,) = of_kind(said["live"], kinds.KAFKA_CATCH_UP_FORECAST)
    # the records produced while the query was down, read at the new run's first batch with the rate before the restart
    assert forecast["basis"] == "rate_before_restart" and forecast["restart_backlog_records"] > 1000
    assert of_kind(said["live"], kinds.KAFKA_CAUGHT_UP)[0]["backlog_records"] == forecast["restart_backlog_records"]
    assert [r["confidence"] for r in of_kind(said["live"], kinds.RESTORE)] == ["estimated"]
    assert downtime(said["live_series"]) == pytest.approx(downtime(said["replayed_series"]), abs=1e-3)
    assert downtime(said["live_series"]) == pytest.approx(restart["downtime_seconds"], abs=1e-3)


def test_a_restart_after_a_killed_driver_gives_its_downtime_live_as_replayed(tmp_path: Any) -> None:
    """The killed driver's log stays in progress (the watcher calls it lost only minutes later): the new
    application's run continues its query all the same, from its last progress."""
    first, second = applications("rocksdb_restart/run1", "rocksdb_restart/run2")
    said = followed_and_replayed(tmp_path, [killed(first), second], unfinished=(first[0],))
    assert said["live"] == said["replayed"]
    (restart,) = of_kind(said["live"], kinds.QUERY_RESTARTED)
    assert restart["gap_since_previous_run_seconds"] is None  # never seen ending
    assert restart["downtime_seconds"] == restart["since_last_progress_seconds"] and 5 < restart["downtime_seconds"] < 30
    assert downtime(said["live_series"]) == pytest.approx(restart["downtime_seconds"], abs=1e-3)
    assert sorted((r["operator"], r["batch_id"]) for r in of_kind(said["live"], kinds.RESTORE)) == [("dedupe", 6), ("stateStoreSave", 6)]


@pytest.mark.parametrize("recording", ["incidents/executor_loss/run1", "placement/kill"])
def test_an_executor_loss_and_its_migrations_are_placed_live_as_replayed(tmp_path: Any, recording: str) -> None:
    (app,) = applications(recording)
    said = followed_and_replayed(tmp_path, [app])
    assert said["live"] == said["replayed"]
    (removed,) = [(ts, json.loads(a)) for k, _, ts, a in said["live"] if k == kinds.EXECUTOR_REMOVED]
    logged = next(json.loads(line) for line in app[1] if line.startswith(b'{"Event":"SparkListenerExecutorRemoved"'))
    assert removed == (logged["Timestamp"] / 1000.0, {"executor_id": logged["Executor ID"]})  # when Spark logged it, not a batch later
    assert of_kind(said["live"], kinds.PARTITION_MIGRATED) and of_kind(said["live"], kinds.STORE_RELOAD)
    assert said["live_placements"] == said["replayed_placements"]
    moved = [row for row in said["live_placements"] if row[13] is not None]  # moved_from: the Placement page's migrations
    assert moved and {row[13] for row in moved} == {logged["Executor ID"]}
