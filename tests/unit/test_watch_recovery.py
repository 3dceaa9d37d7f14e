"""``watch --history`` through a full disk, a PostgreSQL server going away, and SIGKILL: every batch once.

Issue 23: with SQLite, rows dropped while the disk was full were counted, but the watcher saved its read
positions past them, so after freeing space and restarting, those batches never reached the history. The
watcher now saves positions only as far as the history has written rows (SQLite and PostgreSQL alike),
and a signal row written again is skipped, so each case below ends with the recorded log's every batch
exactly once in the history, and no signal row twice:

- a real full disk (a tmpfs of a few MB holding the SQLite file, filled by the test): rows wait and are
  written once space is freed; filled again and the watcher stopped while full, its restart writes them;
- a real PostgreSQL server stopped, the watcher stopped while it is down, the server started, the watcher
  restarted;
- the watcher SIGKILLed while it writes, twice, then restarted.

The log is a recorded one (tests/fixtures, 59 batches), written as it grows (``bench.eventlog_writer``).
"""

from __future__ import annotations

import errno
import glob
import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from growth_recording import APP, APP_ID, SCENARIO, _progress_cuts
from test_fleet import Series, Watch, parse, value

from bench.eventlog_writer import ProgressiveLog, recorded_lines, renamed
from conftest import REQUIRE_REAL

pytestmark = pytest.mark.slow


class GrowingLog:
    """The recorded application's log, written up to a given progress event."""

    def __init__(self, folder: str) -> None:
        self.lines = renamed(recorded_lines(glob.glob(os.path.join(SCENARIO, "*", "events_*"))[0]), APP, APP_ID)
        self.cuts = _progress_cuts(self.lines)
        self.total = len(self.cuts)
        self.log = ProgressiveLog(folder, APP_ID, "zstd", max_file_bytes=2_000_000)
        self.written = 0

    def grow(self, upto: int) -> None:
        start = self.cuts[self.written - 1] if self.written else 0
        for _ in self.log.steps(self.lines[start : self.cuts[upto - 1]]):
            pass
        self.written = upto


def _batches(series: Series) -> float:
    return value(series, "spark_streaming_batches_total", app=APP) or 0.0


def _failures(series: Series) -> float:
    return value(series, "spark_state_observer_export_failures_total", exporter="history") or 0.0


def _dropped(series: Series) -> float:
    return value(series, "spark_state_observer_events_dropped_total", reason="history") or 0.0


def _sqlite_rows(db: str) -> dict[str, Any]:
    """Batch ids, and signal rows with how many are distinct (read-only: never a write on the test's side)."""
    if not os.path.exists(db):
        return {"batch_ids": [], "events": 0, "distinct_events": 0}
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            ids = [r[0] for r in conn.execute("SELECT batch_id FROM batches WHERE app = ? ORDER BY batch_id", (APP,))]
            events = conn.execute("SELECT count(*) FROM events WHERE app = ?", (APP,)).fetchone()[0]
            distinct = conn.execute(
                "SELECT count(*) FROM (SELECT DISTINCT query_id, run_id, ts, kind, attributes FROM events WHERE app = ?)", (APP,)
            ).fetchone()[0]
    except sqlite3.Error:  # not created yet
        return {"batch_ids": [], "events": 0, "distinct_events": 0}
    return {"batch_ids": ids, "events": events, "distinct_events": distinct}


def _wait_rows(
    read: Callable[[], dict[str, Any]], what: str, check: Callable[[dict[str, Any]], bool], watch: Watch, timeout: float = 120.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    rows = read()
    while not check(rows):
        assert watch.proc.poll() is None, f"watch exited with {watch.proc.returncode}: {watch.stderr()[-2000:]}"
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what} (has {len(rows['batch_ids'])} batches); watcher log:\n{watch.stderr()[-3000:]}")
        time.sleep(0.3)
        rows = read()
    return rows


def _exactly_once(rows: dict[str, Any], total: int) -> None:
    assert rows["batch_ids"] == list(range(total)), "a batch is missing or written twice"
    assert rows["events"] == rows["distinct_events"] > 0, "a signal row was written twice"


def _no_traceback(watch: Watch) -> None:
    err = watch.stderr()
    assert "Traceback" not in err, err[-3000:]


@pytest.fixture
def quiet(monkeypatch) -> None:
    # the tests' pauses are no stalls, and every watcher started derives the same signals from the same log
    monkeypatch.setenv("SPARK_STATE_OBSERVER_STALL_MIN_SECONDS", "86400")


# --- a full disk ----------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A real 6 MB file system (tmpfs) for the history file; only root may mount one."""
    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], capture_output=True, check=False)
    if proc.returncode != 0:
        message = f"cannot mount a small tmpfs (needs root): {proc.stderr.decode(errors='replace').strip()}"
        if REQUIRE_REAL:
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield str(mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: str, db: str) -> str:
    """Copy the write-ahead log into the database and empty it, then fill the disk: the next write must
    grow the log and fails (SQLite reuses a log's existing space, which would not need the disk)."""
    deadline = time.monotonic() + 30
    with sqlite3.connect(db, timeout=5) as conn:
        while conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] != 0:  # busy: the watcher is writing
            assert time.monotonic() < deadline, "the history never let the test checkpoint it"
            time.sleep(0.1)
    filler = os.path.join(folder, "filler")
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_a_full_disk_delays_rows_and_a_restart_writes_them_each_once(tmp_path, small_disk, quiet) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    db = os.path.join(small_disk, "history.db")
    state = str(tmp_path / "state.json")  # the positions on another disk: the history's is the one that fills
    log = GrowingLog(str(logs))
    args = ("--history", f"sqlite:///{db}", "--state-file", state)
    watch = Watch(str(tmp_path), [str(logs)], *args)
    rows = lambda: _sqlite_rows(db)  # noqa: E731
    try:
        log.grow(10)
        watch.wait("the first batches", lambda s: _batches(s) == 10)
        _wait_rows(rows, "the first batches", lambda r: len(r["batch_ids"]) == 10, watch)

        # the disk fills: the log goes on growing and being followed, the rows wait (nothing is dropped)
        filler = _fill(small_disk, db)
        failed = _failures(watch.metrics())
        log.grow(20)
        series = watch.wait("a failed write on the full disk", lambda s: _batches(s) == 20 and _failures(s) > failed)
        assert len(rows()["batch_ids"]) == 10 and _dropped(series) == 0
        os.unlink(filler)
        _wait_rows(rows, "the rows held while the disk was full", lambda r: len(r["batch_ids"]) == 20, watch)
        assert _dropped(watch.metrics()) == 0

        # full again, and the watcher stopped while it is: what it could not write it did not save positions for
        filler = _fill(small_disk, db)
        failed = _failures(watch.metrics())
        log.grow(30)
        watch.wait("a failed write on the full disk", lambda s: _batches(s) == 30 and _failures(s) > failed)
        assert watch.stop() == 0
        _no_traceback(watch)
        assert "not written at shutdown" in watch.stderr() and "the disk is full" in watch.stderr()
        assert len(rows()["batch_ids"]) == 20
        os.unlink(filler)

        # restarted with space: it reads from the saved positions again, and the rest of the log comes
        watch = Watch(str(tmp_path), [str(logs)], *args)
        log.grow(log.total)
        watch.wait("the whole log", lambda s: _batches(s) == log.total)
        final = _wait_rows(rows, "every batch", lambda r: len(r["batch_ids"]) >= log.total, watch)
        assert watch.stop() == 0
        _no_traceback(watch)
        _exactly_once(final, log.total)
        _exactly_once(rows(), log.total)
    finally:
        if watch.proc.poll() is None:
            watch.proc.kill()
            watch.proc.wait(30)


# --- SIGKILL while writing -----------------------------------------------------------------------------


def test_sigkill_after_writing_before_saving_then_restart_writes_each_batch_once(tmp_path, quiet) -> None:
    """Killed once its rows are written and before it saves their positions (it saves them a round later, and
    a round here is 5 s): the restarted watcher reads those events again; each batch and signal stays once."""
    logs = tmp_path / "logs"
    logs.mkdir()
    db = str(tmp_path / "history.db")
    args = ("--history", f"sqlite:///{db}", "--state-file", str(tmp_path / "state.json"))
    log = GrowingLog(str(logs))
    rows = lambda: _sqlite_rows(db)  # noqa: E731
    watch: Watch | None = None
    try:
        for upto in (20, 40):
            log.grow(upto)
            watch = Watch(str(tmp_path), [str(logs)], *args, "--poll-interval", "5")
            _wait_rows(rows, "the rows of the first round", lambda r, upto=upto: len(r["batch_ids"]) == upto, watch)
            watch.stop(signal.SIGKILL)
        assert not os.path.exists(tmp_path / "state.json")  # killed before each save: every restart reads it all again
        watch = Watch(str(tmp_path), [str(logs)], *args)
        log.grow(log.total)
        watch.wait("the whole log", lambda s: _batches(s) == log.total)
        final = _wait_rows(rows, "every batch", lambda r: len(r["batch_ids"]) >= log.total, watch)
        assert watch.stop() == 0
        _no_traceback(watch)
        _exactly_once(final, log.total)
    finally:
        if watch is not None and watch.proc.poll() is None:
            watch.proc.kill()
            watch.proc.wait(30)


# --- a drop the positions were saved past: the state file says so ---------------------------------------


def test_events_dropped_before_saved_positions_are_kept_in_the_state_file(tmp_path, caplog) -> None:
    """A history locked by another process (the test) while more than its buffer arrives: the overflow is dropped
    and counted; once writes succeed the positions are saved past it, and the state file keeps how many
    events the history misses, which the next start reports."""
    from spark_state_observer.fleet.runtime import HISTORY_DROPPED_KEY, FleetObserver, WatchOptions
    from spark_state_observer.settings import Settings

    logs = tmp_path / "logs"
    logs.mkdir()
    db = str(tmp_path / "history.db")
    state = str(tmp_path / "state.json")
    settings = Settings.from_env(history_path=db, history_buffer_rows=30, stall_min_seconds=86400.0)
    options = WatchOptions(state_path=state, history=True)
    log = GrowingLog(str(logs))
    fleet = FleetObserver([str(logs)], settings, options, serve=False)
    history = fleet._history
    assert history is not None and history.writer is not None

    def settle() -> None:
        assert history.wait_written(60)
        fleet.poll_once()  # saves the positions whose rows are written

    log.grow(5)
    fleet.poll_once()
    settle()
    assert _sqlite_rows(db)["batch_ids"] == list(range(5))
    lock = sqlite3.connect(db, timeout=5)
    lock.execute("BEGIN EXCLUSIVE")  # every write fails as "locked" meanwhile
    try:
        for upto in (15, 25, 35):
            log.grow(upto)
            fleet.poll_once()
        assert history.dropped_rows > 0
    finally:
        lock.rollback()
        lock.close()
    settle()
    with open(state) as f:
        saved = json.load(f)
    assert saved[HISTORY_DROPPED_KEY] == history.dropped_rows
    stored = _sqlite_rows(db)["batch_ids"]
    assert stored[:5] == list(range(5)) and len(stored) < 35  # what did not fit the buffer is not there
    fleet.stop()

    with caplog.at_level("WARNING", logger="spark_state_observer"):
        again = FleetObserver([str(logs)], settings, options, serve=False)
    assert f"the history misses {saved[HISTORY_DROPPED_KEY]} events" in caplog.text
    again.stop()
    with open(state) as f:
        assert json.load(f)[HISTORY_DROPPED_KEY] == saved[HISTORY_DROPPED_KEY]  # kept across runs


def test_a_history_that_cannot_be_opened_keeps_the_saved_positions(tmp_path, caplog) -> None:
    """History off for the run (here a location with %00): nothing is written, so no position moves either."""
    from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
    from spark_state_observer.settings import Settings

    logs = tmp_path / "logs"
    logs.mkdir()
    state = tmp_path / "state.json"
    GrowingLog(str(logs)).grow(5)
    with caplog.at_level("WARNING", logger="spark_state_observer"):
        fleet = FleetObserver(
            [str(logs)], Settings.from_env(history_path="sqlite:///x%00.db"), WatchOptions(state_path=str(state), history=True), serve=False
        )
    assert "holds a NUL byte" in caplog.text and "saves no read positions" in caplog.text
    for _ in range(3):
        fleet.poll_once()
    assert _batches(parse(fleet.exposition().decode())) == 5  # followed and served all the same
    fleet.stop()
    assert not state.exists()
