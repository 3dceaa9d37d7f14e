"""The history store on recorded real runs, and on databases that are locked, read-only, full or corrupt."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time

import pytest

from conftest import REQUIRE_REAL, eventlog_dir, fixture_runs, progress_lines
from observer.capture.queue import CapturedEvent
from observer.history.loaders import load_batch, load_batches, load_events, load_operators, load_partitions, load_queries, load_runs
from observer.history.sink import HistorySink
from observer.history.store import HistoryError, HistoryStore
from observer.offline.replay import replay
from observer.runtime import Observer
from observer.settings import Settings

RESTART = fixture_runs("rocksdb_restart")


def test_replay_writes_a_browsable_history(tmp_path) -> None:
    db = str(tmp_path / "h.db")
    replay([eventlog_dir(r) for r in RESTART], history=db)
    queries = load_queries(db)
    assert len(queries) == 1 and queries.runs[0] == 2 and queries.last_outcome[0] == "clean"
    qid = queries.query_id[0]
    progress = progress_lines(RESTART[0]) + progress_lines(RESTART[1])
    batches = load_batches(db, qid)
    assert batches.batch_id.tolist() == [p["batchId"] for p in progress]
    assert batches.duration_ms.tolist() == [p["batchDuration"] for p in progress]
    last = progress[-1]
    assert load_batch(db, qid, last["runId"], last["batchId"])["stateOperators"][1]["numRowsTotal"] == last["stateOperators"][1]["numRowsTotal"]
    ops = load_operators(db, qid)
    assert len(ops) == 2 * len(progress) and set(ops.op_name) == {"stateStoreSave", "dedupe"}
    assert len(load_partitions(db, qid)) > 0
    kinds = load_events(db, qid).kind.tolist()
    assert kinds.count("query_started") == 2 and "query_restarted" in kinds and kinds.count("restore") == 2
    runs = load_runs(db, qid)
    assert runs.run_id.tolist() == [progress_lines(r)[0]["runId"] for r in RESTART]
    one_run = load_batches(db, qid, run_id=runs.run_id[1])
    assert len(one_run) == len(progress_lines(RESTART[1]))
    window = load_batches(db, qid, since=batches.ts.iloc[2], until=batches.ts.iloc[4])
    assert window.batch_id.tolist() == batches.batch_id.iloc[2:5].tolist()


def test_reader_is_not_blocked_by_a_writer(tmp_path) -> None:
    db = str(tmp_path / "h.db")
    replay([eventlog_dir(RESTART[0])], history=db)
    writer = sqlite3.connect(db)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("DELETE FROM batches")
    try:
        assert len(load_batches(db, load_queries(db).query_id[0])) == len(progress_lines(RESTART[0]))  # WAL: old snapshot
    finally:
        writer.rollback()
        writer.close()


def _observer_with_history(db: str) -> tuple[Observer, HistorySink]:
    obs = Observer(Settings(http_enabled=False), serve=False, live=False)
    sink = HistorySink(db, obs.self_metrics)
    obs.add_sink(sink)
    return obs, sink


def _feed(obs: Observer, progress: list[dict]) -> None:
    for p in progress:
        obs.process(CapturedEvent("progress", json.dumps(p), time.time(), 0.0))


def test_locked_database_drops_that_flush_only(tmp_path) -> None:
    db = str(tmp_path / "h.db")
    obs, sink = _observer_with_history(db)
    progress = progress_lines(RESTART[0])
    _feed(obs, progress[:2])
    sink.close()
    obs, sink = _observer_with_history(db)
    locker = sqlite3.connect(db)
    locker.execute("BEGIN EXCLUSIVE")
    _feed(obs, progress[2:4])
    with pytest.raises(HistoryError, match="locked"):
        sink._maybe_flush(force=True)
    assert obs.self_metrics.dropped["history"] > 0
    locker.rollback()
    locker.close()
    _feed(obs, progress[4:])
    sink.close()
    qid = progress[0]["id"]
    kept = load_batches(db, qid).batch_id.tolist()
    assert kept == [p["batchId"] for p in progress[:2] + progress[4:]]  # nothing already written was lost
    assert obs.tracker.snapshot()[0].last_progress.batch_id == progress[-1]["batchId"]  # metrics went on


def test_corrupt_database_turns_history_off_and_metrics_go_on(tmp_path) -> None:
    db = tmp_path / "h.db"
    db.write_bytes(b"this is not a database" * 1000)
    obs, sink = _observer_with_history(str(db))
    assert sink.store is None and "corrupt" in sink.error
    _feed(obs, progress_lines(RESTART[0]))
    assert obs.self_metrics.dropped["history"] == len(progress_lines(RESTART[0]))
    assert obs.tracker.snapshot()[0].last_progress is not None


def test_newer_schema_is_refused_clearly(tmp_path) -> None:
    db = str(tmp_path / "h.db")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(HistoryError, match="newer"):
        HistoryStore(db)


def test_retention_by_age_and_size(tmp_path) -> None:
    db = str(tmp_path / "h.db")
    replay([eventlog_dir(r) for r in RESTART], history=db)
    qid = load_queries(db).query_id[0]
    batches = load_batches(db, qid)
    store = HistoryStore(db, max_age_seconds=1.0)
    store.enforce_retention(now=batches.ts.iloc[5] + 1.0)
    assert load_batches(db, qid).ts.min() >= batches.ts.iloc[5]
    store.close()


def _mount_tmpfs(path: str, size: str) -> bool:
    os.makedirs(path, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], capture_output=True)
    if result.returncode != 0:
        if REQUIRE_REAL:
            pytest.fail(f"cannot mount a tmpfs: {result.stderr.decode()}")
        pytest.skip("mounting a tmpfs needs root")
    return True


def test_full_filesystem_is_reported_and_earlier_rows_kept(tmp_path) -> None:
    mnt = str(tmp_path / "small")
    _mount_tmpfs(mnt, "400k")
    try:
        db = os.path.join(mnt, "h.db")
        obs, sink = _observer_with_history(db)
        big = progress_lines(RESTART[0]) * 60
        failures = 0
        for i in range(0, len(big), 3):
            _feed(obs, big[i:i + 3])
            try:
                sink._maybe_flush(force=True)
            except HistoryError as exc:
                assert "full" in str(exc)
                failures += 1
        assert failures > 0 and obs.self_metrics.dropped["history"] > 0
        assert obs.tracker.snapshot()[0].last_progress is not None
        sink.store.close()
        assert len(load_batches(db, big[0]["id"])) > 0
    finally:
        subprocess.run(["umount", "-l", mnt])


def test_read_only_filesystem_gives_a_clear_message(tmp_path) -> None:
    mnt = str(tmp_path / "ro")
    _mount_tmpfs(mnt, "1m")
    try:
        db = os.path.join(mnt, "h.db")
        replay([eventlog_dir(RESTART[0])], history=db)
        subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
        obs, sink = _observer_with_history(db)
        _feed(obs, progress_lines(RESTART[1]))
        assert sink.store is None or sink.error is None
        if sink.store is not None:
            with pytest.raises(HistoryError, match="read-only"):
                sink._maybe_flush(force=True)
        else:
            assert "read-only" in sink.error or "cannot be opened" in sink.error
        assert len(load_batches(db, progress_lines(RESTART[0])[0]["id"])) == len(progress_lines(RESTART[0]))
    finally:
        subprocess.run(["umount", "-l", mnt])
