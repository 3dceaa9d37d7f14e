"""``replay --history`` stamps each log's rows with its own application (issue 51): the Applications page
names the application and two applications of one name are told apart by their ids."""

from __future__ import annotations

import glob
import os
import sqlite3
import subprocess
import sys

from spark_state_observer.history.browse import load_query_apps
from spark_state_observer.offline.log_identity import app_start
from tests.conftest import eventlog_dir, fixture_runs

RESTART = fixture_runs("rocksdb_restart")


def started(run: str) -> dict:
    (log,) = glob.glob(os.path.join(eventlog_dir(run), "*", "events_1_*"))
    start = app_start(log)
    assert start is not None
    return start


def test_replay_history_records_each_logs_application_name_and_id(tmp_path) -> None:
    db = str(tmp_path / "h.db")
    done = subprocess.run(
        [sys.executable, "-m", "spark_state_observer.cli", "replay", *(eventlog_dir(r) for r in RESTART), "--history", db],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    starts = [started(r) for r in RESTART]
    with sqlite3.connect(db) as conn:
        runs = conn.execute("SELECT app, app_id FROM runs ORDER BY started").fetchall()
        events = set(conn.execute("SELECT app, app_id FROM events").fetchall())
    assert runs == [(s["App Name"], s["App ID"]) for s in starts]  # the restart is a second application of the same name
    assert events == {(s["App Name"], s["App ID"]) for s in starts}
    apps = load_query_apps(db)
    assert apps.app.tolist() == [starts[-1]["App Name"]] and apps.app_id.tolist() == [starts[-1]["App ID"]]
