"""The event-log watcher following real recorded Spark logs while they are written, in every codec."""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
import threading
import time

import pytest

from bench.eventlog_writer import ProgressiveLog, recorded_lines, renamed
from conftest import FIXTURES, progress_lines
from spark_state_observer.fleet.app_events import AppEvents
from spark_state_observer.fleet.clock_skew import event_time
from spark_state_observer.fleet.eventlog_watch import EventLogWatcher
from spark_state_observer.fleet.log_names import in_shard, log_name
from spark_state_observer.model.spark_events import QUERY_PROGRESS, TASK_END

CODECS = [("rocksdb_restart", "zstd"), ("hdfs", "lz4"), ("rocksdb_nochangelog_snappy", "snappy"), ("rocksdb_plain_log", None)]


def _source(scenario: str, run: str = "run1") -> str:
    return glob.glob(os.path.join(FIXTURES, scenario, run, "eventlog", "*", "events_*"))[0]


def _event_time(line: bytes) -> float | None:
    """A recorded line's event time as the watcher reads it (None for lines without one)."""
    event = json.loads(line)
    return event_time(event.get("Event", ""), event)


def _expected(scenario: str, run: str = "run1") -> list[int]:
    return [p["batchId"] for p in progress_lines(os.path.join(FIXTURES, scenario, run))]


class Collector:
    """Everything a watcher delivered, per log."""

    def __init__(self) -> None:
        self.batches: dict[str, list[int]] = {}
        self.replayed: dict[str, list[int]] = {}
        self.statuses: dict[str, list[str]] = {}
        self.problems: dict[str, list[str]] = {}
        self.names: dict[str, str] = {}
        self.types: dict[str, set[str]] = {}
        self.skew: dict[str, float] = {}

    def take(self, found: list[AppEvents]) -> None:
        for app in found:
            if app.identity is not None:
                self.names[app.log_name] = app.identity.name
            for e in app.events:
                self.types.setdefault(app.log_name, set()).add(e.event_type)
                if e.event_type == QUERY_PROGRESS:
                    (self.replayed if e.replayed else self.batches).setdefault(app.log_name, []).append(e.progress_object()["batchId"])
            self.statuses.setdefault(app.log_name, []).extend(s.status for s in app.status_changes)
            self.problems.setdefault(app.log_name, []).extend(app.problems)
            self.skew[app.log_name] = app.clock_skew

    def poll(self, watcher: EventLogWatcher, times: int = 1) -> None:
        for _ in range(times):
            self.take(watcher.poll())


@pytest.mark.parametrize("scenario, codec", CODECS)
def test_progress_delivered_exactly_once_while_a_rolling_log_is_written(tmp_path, scenario: str, codec: str | None) -> None:
    lines = recorded_lines(_source(scenario))
    watcher = EventLogWatcher([str(tmp_path)], grace_seconds=0)
    log = ProgressiveLog(str(tmp_path), "local-1", codec, max_file_bytes=40_000)
    seen = Collector()
    started = time.time()
    for _ in log.steps(lines, split=True):
        seen.poll(watcher)
    log.finish()
    seen.poll(watcher, 2)
    assert log.index > 2  # it rolled
    assert seen.batches["local-1"] == _expected(scenario)
    assert seen.names["local-1"] == "spark-state-observer-demo"
    assert seen.statuses["local-1"] == ["running", "finished", "forgotten"]
    # the recording, written now, is a driver whose clock is behind by the recording's age: that skew (and
    # nothing else) is measured, between the age of its last event when writing began and of its first at the end
    times = [t for t in (_event_time(line) for line in lines) if t is not None]
    if started - max(times) > 31.0:
        assert dict(watcher.counts.problems) == {"clock_skew": 1} and "behind" in seen.problems["local-1"][0]
        assert started - max(times) <= seen.skew["local-1"] <= time.time() - min(times)
    else:
        assert not seen.problems["local-1"] and not watcher.counts.problems


@pytest.mark.parametrize("codec", ["zstd", None])
def test_single_file_log_is_followed_until_renamed(tmp_path, codec: str | None) -> None:
    scenario = "rocksdb_restart"
    watcher = EventLogWatcher([str(tmp_path)], grace_seconds=60)
    log = ProgressiveLog(str(tmp_path), "app-20261122-0001", codec, rolling=False)
    seen = Collector()
    lines = recorded_lines(_source(scenario))
    assert lines[-1].startswith(b'{"Event":"SparkListenerApplicationEnd"')
    for _ in log.steps(lines[:-1], split=True):  # without the end event: only the rename says it ended
        seen.poll(watcher)
    assert seen.statuses["app-20261122-0001"] == ["running"]
    log.finish()
    seen.poll(watcher)
    assert seen.batches["app-20261122-0001"] == _expected(scenario)
    assert seen.statuses["app-20261122-0001"] == ["running", "finished"]


@pytest.mark.parametrize("scenario, codec", CODECS)
@pytest.mark.parametrize("where", ["mid_file", "after_roll"])
def test_restart_loses_nothing_and_repeats_nothing(tmp_path, scenario: str, codec: str | None, where: str) -> None:
    logs, state = tmp_path / "logs", str(tmp_path / "state.json")
    logs.mkdir()
    lines = recorded_lines(_source(scenario))
    log = ProgressiveLog(str(logs), "local-7", codec, max_file_bytes=60_000)
    seen = Collector()
    first = EventLogWatcher([str(logs)], state_path=state)
    steps = log.steps(lines, split=True)
    for _ in steps:
        seen.poll(first)
        if (where == "mid_file" and len(seen.batches.get("local-7", [])) >= 2) or (where == "after_roll" and log.index == 3):
            break
    first.commit()
    second = EventLogWatcher([str(logs)], state_path=state)
    for _ in steps:
        seen.poll(second)
    log.finish()
    seen.poll(second, 2)
    assert seen.batches["local-7"] == _expected(scenario)
    total = sum(os.path.getsize(f) for f in glob.glob(os.path.join(log.dir, "events_*")))
    assert second.counts.read_bytes < total  # resumed where the first one stopped, not from the start


def test_replay_on_resume_marks_what_was_delivered_before(tmp_path) -> None:
    logs, state = tmp_path / "logs", str(tmp_path / "state.json")
    logs.mkdir()
    log = ProgressiveLog(str(logs), "local-8", "zstd", max_file_bytes=50_000)
    seen = Collector()
    first = EventLogWatcher([str(logs)], state_path=state)
    steps = log.steps(recorded_lines(_source("rocksdb_restart")), split=True)
    for n, _ in enumerate(steps):
        seen.poll(first)
        if n == 60:
            break
    first.commit()
    before = list(seen.batches["local-8"])
    second = EventLogWatcher([str(logs)], state_path=state, replay_on_resume=True)
    for _ in steps:
        seen.poll(second)
    log.finish()
    seen.poll(second, 2)
    assert before and seen.replayed["local-8"] == before
    assert seen.batches["local-8"] == _expected("rocksdb_restart")


def test_duplicate_guard_drops_a_batch_delivered_twice(tmp_path) -> None:
    """A progress event whose query run and batch were delivered already (a log re-read) is not repeated."""
    lines = recorded_lines(_source("rocksdb_plain_log"))
    progress = [
        line for line in lines if line.startswith(b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"')
    ]
    log = ProgressiveLog(str(tmp_path), "local-9", None)
    for _ in log.steps(lines + progress[:2]):
        pass
    log.finish()
    watcher = EventLogWatcher([str(tmp_path)], read_finished_at_start=True)
    seen = Collector()
    seen.poll(watcher, 2)
    assert seen.batches["local-9"] == _expected("rocksdb_plain_log")
    assert watcher.counts.events_duplicate == 2


def _write_whole(
    folder: str, app_id: str, scenario: str, codec: str | None, name: str | None = None, finish: bool = True
) -> ProgressiveLog:
    lines = recorded_lines(_source(scenario))
    if not finish:  # still running: no end event yet
        lines = [line for line in lines if not line.startswith(b'{"Event":"SparkListenerApplicationEnd"')]
    log = ProgressiveLog(folder, app_id, codec)
    for _ in log.steps(renamed(lines, name, app_id) if name else lines):
        pass
    if finish:
        log.finish()
    return log


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_truncated_and_corrupt_logs_are_reported_and_the_others_go_on(tmp_path) -> None:
    cut = _write_whole(str(tmp_path), "local-cut", "rocksdb_restart", "zstd", name="cut", finish=False)
    data = _read(cut.path)
    frame_start = data.rfind(b"\x28\xb5\x2f\xfd", 0, len(data) * 2 // 3)
    with open(cut.path, "wb") as f:
        f.write(data[: frame_start + 40])  # ends inside a frame
    cut.finish()
    bad = _write_whole(str(tmp_path), "local-bad", "rocksdb_restart", "zstd", name="bad", finish=False)
    data = bytearray(_read(bad.path))
    frame_start = data.find(b"\x28\xb5\x2f\xfd", len(data) // 2)
    data[frame_start : frame_start + 4] = b"JUNK"
    with open(bad.path, "wb") as f:
        f.write(bytes(data))
    bad.finish()
    _write_whole(str(tmp_path), "local-good", "rocksdb_restart", "zstd", name="good")
    watcher = EventLogWatcher([str(tmp_path)], read_finished_at_start=True)
    seen = Collector()
    seen.poll(watcher, 2)
    expected = _expected("rocksdb_restart")
    assert seen.batches["local-good"] == expected and not seen.problems["local-good"]
    assert 0 < len(seen.batches["local-cut"]) < len(expected) and seen.batches["local-cut"] == expected[: len(seen.batches["local-cut"])]
    assert any("ends inside a zstd unit" in p for p in seen.problems["local-cut"])
    assert seen.batches.get("local-bad", []) == expected[: len(seen.batches.get("local-bad", []))]
    assert any("corrupt zstd data" in p for p in seen.problems["local-bad"])
    assert watcher.counts.problems["truncated"] == 1 and watcher.counts.problems["corrupt"] == 1
    assert watcher.app_problems() == {"local-cut": {"truncated": 1}, "local-bad": {"corrupt": 1}}


def test_fifos_symlink_loops_and_stray_folders_are_never_opened(tmp_path) -> None:
    os.mkfifo(tmp_path / "app-fifo.inprogress")
    os.symlink("loop", tmp_path / "loop")
    os.symlink(tmp_path / "loop", tmp_path / "local-loop")
    (tmp_path / "not-a-log-folder").mkdir()
    rolling = _write_whole(str(tmp_path), "local-ok", "rocksdb_restart", "zstd", finish=False)
    os.mkfifo(os.path.join(rolling.dir, "events_2_local-ok.zstd"))  # Spark would roll here: a FIFO instead
    watcher = EventLogWatcher([str(tmp_path)])
    seen = Collector()
    done = threading.Event()

    def polls() -> None:
        seen.poll(watcher, 3)
        done.set()

    threading.Thread(target=polls, daemon=True).start()
    assert done.wait(60), "a poll blocked (opened a FIFO?)"
    assert seen.batches["local-ok"] == _expected("rocksdb_restart")
    assert watcher.counts.problems["not_regular"] >= 3  # the FIFO, the loop (reported once each), the rolled FIFO
    assert any("not a regular file" in p for p in seen.problems["local-ok"])


def test_over_long_lines_are_skipped_with_a_bounded_buffer(tmp_path) -> None:
    lines = recorded_lines(_source("rocksdb_restart"))
    sizes = sorted(len(line) for line in lines if b"QueryProgressEvent" in line[:100])
    limit = sizes[len(sizes) // 2]
    log = ProgressiveLog(str(tmp_path), "local-long", "zstd")
    watcher = EventLogWatcher([str(tmp_path)], max_line_bytes=limit)
    seen = Collector()
    for _ in log.steps(lines, split=True):
        seen.poll(watcher)
    long_ones = sum(1 for s in sizes if s > limit)
    assert long_ones and len(seen.batches["local-long"]) == len(sizes) - long_ones
    assert watcher.counts.problems["line_too_long"] >= long_ones


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_lost_after_timeout_grows_again_then_forgotten_with_skewed_file_times(tmp_path) -> None:
    clock = FakeClock()
    watcher = EventLogWatcher([str(tmp_path)], lost_after_seconds=30, grace_seconds=100, clock=clock)
    log = ProgressiveLog(str(tmp_path), "local-lost", "zstd", max_file_bytes=50_000)
    steps = log.steps(recorded_lines(_source("rocksdb_restart"))[:-1])  # a driver that never logs its end
    seen = Collector()
    for n, _ in enumerate(steps):
        if n == 30:
            break
    # the writer's clock is an hour ahead: its files look modified in the future; nothing else changes
    for f in glob.glob(os.path.join(log.dir, "*")):
        os.utime(f, (time.time() + 3600, time.time() + 3600))
    seen.poll(watcher)
    clock.now += 29
    seen.poll(watcher)
    assert seen.statuses["local-lost"] == ["running"]
    clock.now += 2
    seen.poll(watcher)
    assert seen.statuses["local-lost"] == ["running", "lost"]
    assert any("in the future" in p for p in seen.problems["local-lost"])
    for _ in steps:  # the driver was only stalled
        pass
    seen.poll(watcher)
    assert seen.statuses["local-lost"] == ["running", "lost", "running"]
    clock.now += 31
    seen.poll(watcher)
    clock.now += 101
    seen.poll(watcher)
    assert seen.statuses["local-lost"] == ["running", "lost", "running", "lost", "forgotten"]
    assert seen.batches["local-lost"] == _expected("rocksdb_restart")
    assert watcher.counts.problems["clock_skew"] == 1
    seen.poll(watcher)  # a forgotten log still in the folder is not read again
    assert seen.batches["local-lost"] == _expected("rocksdb_restart")


def test_two_running_applications_with_the_same_name(tmp_path) -> None:
    for app_id in ("local-a", "local-b"):
        _write_whole(str(tmp_path), app_id, "rocksdb_restart", "zstd", name="same-name", finish=False)
    watcher = EventLogWatcher([str(tmp_path)])
    seen = Collector()
    seen.poll(watcher)
    assert seen.names == {"local-a": "same-name", "local-b": "same-name"}
    assert seen.batches["local-a"] == seen.batches["local-b"] == _expected("rocksdb_restart")
    assert all(any("two running applications are named 'same-name'" in p for p in seen.problems[a]) for a in ("local-a", "local-b"))


def test_vanishing_folder_mid_read(tmp_path) -> None:
    gone = ProgressiveLog(str(tmp_path), "local-gone", "zstd")
    steps = gone.steps(recorded_lines(_source("rocksdb_restart")), split=True)
    stay = _write_whole(str(tmp_path), "local-stay", "rocksdb_restart", "snappy", finish=False)
    watcher = EventLogWatcher([str(tmp_path)])
    seen = Collector()
    for n, _ in enumerate(steps):
        seen.poll(watcher)
        if n == 40:
            break
    shutil.rmtree(gone.dir)
    seen.poll(watcher)
    assert seen.statuses["local-gone"] == ["running"]  # one listing may have been taken during a rename
    seen.poll(watcher)
    assert seen.statuses["local-gone"] == ["running", "forgotten"]
    assert any("vanished" in p for p in seen.problems["local-gone"])
    stay.finish()
    seen.poll(watcher)
    assert seen.batches["local-stay"] == _expected("rocksdb_restart")
    assert seen.statuses["local-stay"] == ["running", "finished"]


def test_sharding_splits_disjointly_and_completely(tmp_path) -> None:
    app_ids = [f"app-20261122{i:06d}-{i:04d}" for i in range(12)]
    for app_id in app_ids:
        _write_whole(str(tmp_path), app_id, "rocksdb_plain_log", None)
    owners: dict[str, int] = {}
    for k in range(3):
        watcher = EventLogWatcher([str(tmp_path)], shard=(k, 3), read_finished_at_start=True)
        seen = Collector()
        seen.poll(watcher)
        for name in seen.batches:
            assert name not in owners
            owners[name] = k
        assert watcher.counts.apps_other_shards == 12 - len(seen.batches)
    assert sorted(owners) == sorted(app_ids) and len(set(owners.values())) > 1
    assert all(in_shard(log_name(f"eventlog_v2_{a}"), (owners[a], 3)) for a in app_ids)
    assert log_name("eventlog_v2_local-1") == log_name("local-1.zstd.inprogress") == "local-1"


def test_batch_application_is_only_scanned(tmp_path) -> None:
    """Task and SQL events are parsed only once an application has shown a streaming query."""
    lines = [line for line in recorded_lines(_source("rocksdb_restart")) if b"StreamingQueryListener" not in line[:80]]
    _write_whole_lines(str(tmp_path), "local-batch", lines)
    streaming = _write_whole(str(tmp_path), "local-stream", "rocksdb_restart", "zstd")
    watcher = EventLogWatcher([str(tmp_path)], read_finished_at_start=True)
    seen = Collector()
    seen.poll(watcher, 2)
    assert TASK_END not in seen.types["local-batch"] and TASK_END in seen.types["local-stream"]
    task_ends = sum(1 for line in lines if line.startswith(b'{"Event":"SparkListenerTaskEnd"'))
    assert task_ends and watcher.counts.events_parsed < 2 * task_ends + 20 and streaming.index == 1


def _write_whole_lines(folder: str, app_id: str, lines: list[bytes]) -> None:
    log = ProgressiveLog(folder, app_id, "zstd")
    for _ in log.steps(lines):
        pass
    log.finish()


def test_finished_logs_found_at_first_start_are_not_read(tmp_path) -> None:
    _write_whole(str(tmp_path), "local-old", "rocksdb_restart", "zstd")
    _write_whole(str(tmp_path), "local-running", "rocksdb_restart", "zstd", finish=False)
    later = tmp_path / "later"  # a folder unreadable at the first poll: its finished logs are old too
    later.mkdir()
    _write_whole(str(later), "local-old-2", "rocksdb_restart", None)
    os.rename(later, tmp_path / "later-hidden")
    watcher = EventLogWatcher([str(tmp_path), str(later)])
    seen = Collector()
    seen.poll(watcher)
    os.rename(tmp_path / "later-hidden", later)
    _write_whole(str(tmp_path), "local-new", "rocksdb_restart", "zstd", name="new-app")  # finished after the start: read
    seen.poll(watcher, 2)
    assert sorted(seen.batches) == ["local-new", "local-running"]
    assert watcher.counts.problems == {"unreadable": 1}


def test_unreadable_file_is_reported_once_and_the_others_go_on() -> None:
    folder = tempfile.mkdtemp(prefix="sso-watch-perm-")  # not under pytest's 0700 folder: "nobody" must reach it
    try:
        os.chmod(folder, 0o755)
        locked = _write_whole(folder, "local-locked", "rocksdb_restart", "zstd", finish=False)
        _write_whole(folder, "local-open", "rocksdb_restart", "zstd", finish=False)
        for path in glob.glob(folder + "/**", recursive=True):
            os.chmod(path, 0o755 if os.path.isdir(path) else 0o644)
        os.chmod(locked.path, 0)
        watcher = EventLogWatcher([folder])
        seen = Collector()
        as_root = os.geteuid() == 0
        if as_root:  # root reads everything: drop to "nobody" for these polls
            os.setegid(65534)
            os.seteuid(65534)
        try:
            seen.poll(watcher, 3)
        finally:
            if as_root:
                os.seteuid(0)
                os.setegid(0)
        assert seen.batches["local-open"] == _expected("rocksdb_restart")
        assert "local-locked" not in seen.batches
        assert [p for p in seen.problems["local-locked"] if "Permission denied" in p] and dict(watcher.counts.problems) == {"unreadable": 1}
        os.chmod(locked.path, 0o644)  # fixed: it is read from where it stopped
        seen.poll(watcher)
        assert seen.batches["local-locked"] == _expected("rocksdb_restart")
    finally:
        shutil.rmtree(folder)


def test_memory_stays_bounded_as_applications_come_and_go(tmp_path) -> None:
    clock = FakeClock()
    watcher = EventLogWatcher([str(tmp_path)], grace_seconds=5, clock=clock)
    seen = Collector()
    lines = recorded_lines(_source("rocksdb_plain_log"))
    for wave in range(4):
        logs = [ProgressiveLog(str(tmp_path), f"local-{wave}-{i}", "zstd") for i in range(10)]
        for log in logs:
            for _ in log.steps(lines):
                pass
        seen.poll(watcher)
        assert len(watcher._apps) == 10
        for log in logs:
            log.finish()
        seen.poll(watcher)
        clock.now += 6
        seen.poll(watcher)
        assert not watcher._apps and len(watcher._done) == 10  # earlier waves' logs are gone from the folder
        for log in logs[:5]:
            shutil.rmtree(log.dir)  # the History Server's cleaner
        seen.poll(watcher, 2)
        assert len(watcher._done) == 5  # only logs still in the folder are remembered
        for log in logs[5:]:
            shutil.rmtree(log.dir)
    assert all(seen.batches[f"local-{w}-{i}"] == _expected("rocksdb_plain_log") for w in range(4) for i in range(10))
    assert watcher.counts.apps_forgotten == 40 and not watcher.counts.problems


def test_invalid_json_in_a_wanted_line_is_counted_and_skipped(tmp_path) -> None:
    lines = recorded_lines(_source("rocksdb_plain_log"))
    k = next(i for i, line in enumerate(lines) if b"QueryProgressEvent" in line[:100])
    lines[k] = lines[k][:200] + b"\n"  # a progress event cut short, then the log goes on
    log = ProgressiveLog(str(tmp_path), "local-json", None)
    for _ in log.steps(lines):
        pass
    log.finish()
    watcher = EventLogWatcher([str(tmp_path)], read_finished_at_start=True)
    seen = Collector()
    seen.poll(watcher)
    assert seen.batches["local-json"] == _expected("rocksdb_plain_log")[1:]
    assert watcher.counts.problems == {"bad_json": 1} and f"{log.path}:{k + 1}: not valid JSON" in seen.problems["local-json"][0]


def test_damaged_state_file_is_reported_and_the_watcher_starts_afresh(tmp_path) -> None:
    state = tmp_path / "state.json"
    state.write_text('{"version": 1, "apps": {"local-1": ')
    logs = tmp_path / "logs"
    logs.mkdir()
    _write_whole(str(logs), "local-1", "rocksdb_restart", "zstd", finish=False)
    watcher = EventLogWatcher([str(logs)], state_path=str(state))
    seen = Collector()
    seen.poll(watcher)
    assert watcher.counts.problems == {"state_file": 1}
    assert seen.batches["local-1"] == _expected("rocksdb_restart")
    watcher.commit()
    assert json.loads(state.read_text())["apps"]["local-1"]["identity"]["name"] == "spark-state-observer-demo"


def test_identity_from_application_start_and_chosen_spark_properties(tmp_path) -> None:
    _write_whole(str(tmp_path), "local-id", "rocksdb_restart", "zstd", name="orders-enricher", finish=False)
    watcher = EventLogWatcher([str(tmp_path)], identity_properties=("spark.sql.shuffle.partitions", "spark.master", "no.such.key"))
    found = [a for a in watcher.poll() if a.identity is not None]
    identity = found[0].identity
    assert identity is not None
    assert (identity.name, identity.app_id, identity.log_name, identity.spark_version) == (
        "orders-enricher",
        "local-id",
        "local-id",
        "4.3.0",
    )
    assert dict(identity.properties) == {"spark.sql.shuffle.partitions": "2", "spark.master": "local[2]"}


def test_bytes_not_yet_visible_are_read_again_not_reported(tmp_path) -> None:
    """A network file system may show a grown size before the bytes (zeros): decode that part again next poll."""
    log = ProgressiveLog(str(tmp_path), "local-nfs", "zstd")
    lines = recorded_lines(_source("rocksdb_restart"))
    steps = log.steps(lines)
    watcher = EventLogWatcher([str(tmp_path)])
    seen = Collector()
    for n, _ in enumerate(steps):
        if n == 60:
            break
    seen.poll(watcher)
    at = os.path.getsize(log.path)
    next(steps)  # one more unit reaches the file...
    with open(log.path, "r+b") as f:
        f.seek(at)
        written = f.read()
        f.seek(at)
        f.write(b"\0" * len(written))  # ...but reads still see zeros there
    seen.poll(watcher)
    with open(log.path, "r+b") as f:
        f.seek(at)
        f.write(written)
    for _ in steps:
        pass
    log.finish()
    seen.poll(watcher, 2)
    assert seen.batches["local-nfs"] == _expected("rocksdb_restart") and not watcher.counts.problems


def test_raw_events_are_delivered_unparsed_and_filtered(tmp_path) -> None:
    """``raw_events`` types come as their logged lines (those ``raw_keep`` accepts), in order among the parsed ones."""
    from spark_state_observer.model.spark_events import JOB_START
    from spark_state_observer.placement.task_lines import wanted_line

    _write_whole(str(tmp_path), "local-raw", "rocksdb_restart", "zstd")
    lines = recorded_lines(_source("rocksdb_restart"))
    results = {}
    for raw in (False, True):
        kwargs = {"raw_events": {TASK_END, JOB_START}, "raw_keep": wanted_line} if raw else {}
        watcher = EventLogWatcher([str(tmp_path)], read_finished_at_start=True, **kwargs)  # type: ignore[arg-type]
        events = [e for found in [watcher.poll(), watcher.poll()] for app in found for e in app.events]
        results[raw] = (events, watcher.counts.events_parsed)
    parsed, raw_events = results[False][0], results[True][0]
    kept = [
        line
        for line in lines
        if line.startswith((b'{"Event":"SparkListenerTaskEnd"', b'{"Event":"SparkListenerJobStart"')) and wanted_line(line)
    ]
    assert [e.line for e in raw_events if e.line is not None] == kept and kept
    assert all(e.data == {} for e in raw_events if e.line is not None)
    assert all(e.line is None for e in parsed)
    # the other events are the same, in the same order; the raw ones sit where their parsed form was
    same = [(e.event_type, e.data) for e in parsed if e.event_type not in (TASK_END, JOB_START)]
    assert [(e.event_type, e.data) for e in raw_events if e.line is None] == same
    parsed_order = [e.source for e in parsed if e.event_type not in (TASK_END, JOB_START) or wanted_line(_line_at(lines, e))]
    assert [e.source.rsplit(":", 1)[1] for e in raw_events] == [s.rsplit(":", 1)[1] for s in parsed_order]
    assert results[True][1] < results[False][1] - len(kept)  # task ends and job starts were not parsed


def _line_at(lines: list[bytes], event) -> bytes:  # type: ignore[no-untyped-def]
    """The recorded line of a parsed event, found again by its content."""
    return next(line for line in lines if json.loads(line) == event.data)
