"""``spark-state-observer watch``: every application of event-log folders through the listener's pipeline.

Real recorded Spark event logs (tests/fixtures) are written into temporary folders the way Spark writes
them (``bench.eventlog_writer``) while the ``watch`` command runs as its own process, as a user would run
it; the tests read its ``/metrics`` over HTTP, kill it, restart it and damage its input.
"""

from __future__ import annotations

import gc
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
import urllib.request
import uuid
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.eventlog_writer import ProgressiveLog, recorded_lines, renamed
from conftest import FIXTURES, ROOT, free_port, progress_lines
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.history.loaders import load_batches, load_queries
from spark_state_observer.model.identity import AppContext, LabelsError, parse_labels
from spark_state_observer.settings import Settings, SettingsError

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _lines(scenario: str) -> list[bytes]:
    return recorded_lines(glob.glob(os.path.join(FIXTURES, scenario, "run1", "eventlog", "*", "events_*"))[0])


def _batches(scenario: str) -> int:
    return len(progress_lines(os.path.join(FIXTURES, scenario, "run1")))


def parse(text: str) -> Series:
    """Every sample of an exposition; a series written twice is an error (Prometheus rejects the scrape)."""
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"series written twice: {key}"
            out[key] = s.value
    return out


def value(series: Series, name: str, **labels: str) -> float | None:
    """The one sample of ``name`` whose labels include ``labels`` (None when there is none)."""
    found = [v for (n, ls), v in series.items() if n == name and set(labels.items()) <= ls]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


class Watch:
    """The ``watch`` command in its own process, on a free port; stderr goes to a file the test can read."""

    def __init__(self, tmp: str, dirs: list[str], *extra: str, drop_root_powers: bool = False) -> None:
        self.port = free_port()
        self.err_path = os.path.join(tmp, f"watch-{self.port}.err")
        cmd = [sys.executable, "-m", "spark_state_observer.cli", "watch", *dirs, "--port", str(self.port), "--poll-interval", "0.3", *extra]
        if drop_root_powers and os.getuid() == 0:
            # root reads any file whatever its mode: without these capabilities it is held to the mode bits like any user
            cmd = ["setpriv", "--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search", *cmd]
        env = {**os.environ, "PYTHONPATH": ROOT}
        env.pop("SPARK_STATE_OBSERVER_LABELS", None)
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=tmp)

    def metrics(self) -> Series:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            return parse(r.read().decode())

    def wait(self, what: str, check: Callable[[Series], bool], timeout: float = 120.0) -> Series:
        """Scrape until ``check`` holds; on timeout, fail with the watcher's log."""
        deadline = time.monotonic() + timeout
        series: Series = {}
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"watch exited with {self.proc.returncode}: {self.stderr()[-2000:]}"
            try:
                series = self.metrics()
                if check(series):
                    return series
            except OSError:
                pass  # not serving yet
            time.sleep(0.3)
        pytest.fail(f"timed out waiting for {what}; watcher log:\n{self.stderr()[-3000:]}")

    def stderr(self) -> str:
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(60)


@pytest.fixture
def watches() -> list[Watch]:
    started: list[Watch] = []
    yield started
    for w in started:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait(30)


def _write(folder: str, scenario: str, name: str, app_id: str, codec: str | None = "zstd", finish: bool = True) -> ProgressiveLog:
    """An application's whole recorded log as ``name``; without ``finish`` it is still running (no end event, no end marker)."""
    log = ProgressiveLog(folder, app_id, codec, max_file_bytes=60_000)
    lines = [
        line for line in renamed(_lines(scenario), name, app_id) if finish or not line.startswith(b'{"Event":"SparkListenerApplicationEnd"')
    ]
    for _ in log.steps(lines):
        pass
    if finish:
        log.finish()
    return log


def test_watch_serves_every_application_with_its_identity(tmp_path, watches: list[Watch]) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    w = Watch(str(tmp_path), [str(logs)], "--labels", "cluster=a,namespace=b")
    watches.append(w)
    w.wait("the endpoint", lambda s: value(s, "spark_state_observer_watch_applications", status="running") is not None)
    _write(str(logs), "rocksdb_restart", "orders", "app-orders-1", finish=False)
    _write(str(logs), "hdfs", "payments", "app-payments-1", codec="lz4")
    expected = {"orders": _batches("rocksdb_restart"), "payments": _batches("hdfs")}
    # the finished log's end is read in a poll of its own once its batches are (CI under load: batches, then the end)
    series = w.wait(
        "both applications' batches and the finished one's end",
        lambda s: (
            all(value(s, "spark_streaming_batches_total", app=app) == n for app, n in expected.items())
            and value(s, "spark_state_observer_watch_applications", status="finished") == 1
        ),
    )

    for name, labels in series:
        ls = dict(labels)
        assert ls.get("cluster") == "a" and ls.get("namespace") == "b", (name, ls)
        if name.startswith("spark_state_observer_"):
            assert "app" not in ls, name  # the watcher's own series belong to no application
        else:
            assert ls["app"] in expected, (name, ls)
            assert "app_id" not in ls or name == "spark_streaming_application_info", name  # the volatile id only on the info series
    assert value(series, "spark_streaming_application_info", app="orders", app_id="app-orders-1", log_name="app-orders-1") == 1
    assert value(series, "spark_streaming_application_info", app="payments", app_id="app-payments-1") == 1
    assert value(series, "spark_state_observer_watch_applications", status="finished") == 1
    assert value(series, "spark_state_observer_watch_applications", status="running") == 1
    assert value(series, "spark_streaming_executors", app="orders") == 0  # local mode: the driver is no executor
    problems = {dict(ls)["kind"]: v for (n, ls), v in series.items() if n == "spark_state_observer_watch_problems_total" and v}
    # the recordings are days old and written now: where the watcher read one in pieces it measured that age as
    # the driver's clock skew (once per application); nothing else is a problem
    assert set(problems) <= {"clock_skew"} and problems.get("clock_skew", 0) <= len(expected), problems
    assert w.stop() == 0


@pytest.fixture(params=["sqlite", "postgresql"])
def history(request, tmp_path) -> str:
    """A new, empty history location on each backend (PostgreSQL: the session's real server)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    return request.getfixturevalue("postgres").create_database(f"w_{uuid.uuid4().hex[:16]}")


def test_a_watcher_killed_and_restarted_counts_every_batch_once(tmp_path, watches: list[Watch], history: str) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    state = str(tmp_path / "positions.json")
    args = ("--state-file", state, "--history", history, "--labels", "cluster=a")
    lines = renamed(_lines("rocksdb_restart"), "orders", "app-orders-1")
    expected = _batches("rocksdb_restart")
    log = ProgressiveLog(str(logs), "app-orders-1", "zstd", max_file_bytes=40_000)
    steps = log.steps(lines, split=True)
    first = Watch(str(tmp_path), [str(logs)], *args)
    watches.append(first)
    for _ in steps:  # write until the watcher has seen half of the batches, then kill it
        series = first.metrics() if first.proc.poll() is None and os.path.exists(state) else {}
        seen = value(series, "spark_streaming_batches_total", app="orders") if series else None
        if seen is not None and seen >= expected // 2:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the watcher never saw half of the batches")
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    for _ in steps:
        pass
    log.finish()
    second = Watch(str(tmp_path), [str(logs)], *args)
    watches.append(second)
    series = second.wait("every batch", lambda s: value(s, "spark_state_observer_watch_applications", status="finished") == 1)
    assert value(series, "spark_streaming_batches_total", app="orders") == expected
    assert second.stop() == 0
    queries = load_queries(history)
    assert len(queries) == 1
    batches = load_batches(history, queries.query_id[0], with_progress=True)
    assert len(batches) == expected  # none lost, none written twice
    # each row names its application, as the listener's history does
    assert set(batches.app) == {"orders"} and set(batches.app_id) == {"app-orders-1"}
    assert {json.dumps(json.loads(x), sort_keys=True) for x in batches.app_labels} == {'{"cluster": "a"}'}


def test_a_restarted_watcher_shows_an_application_finished_only_with_all_its_batches(tmp_path) -> None:
    """A watcher killed (abandoned: no ``stop()``, no last save) and restarted replays the log from its start in one
    round. No scrape may show the application finished while that round's batches are not yet in its series: the
    watcher counts its figures inside ``poll``, before the pipelines process what the poll found, and a scrape in
    between saw ``finished`` with 1 to 3 of the 6 batches (the flaky end of the subprocess test above)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    history = f"sqlite:///{tmp_path / 'history.db'}"
    settings = Settings.from_env(labels="cluster=a", history_path=history)
    options = WatchOptions(state_path=str(tmp_path / "positions.json"), history=True)
    expected = _batches("rocksdb_restart")
    log = ProgressiveLog(str(logs), "app-orders-1", "zstd", max_file_bytes=40_000)
    steps = log.steps(renamed(_lines("rocksdb_restart"), "orders", "app-orders-1"), split=True)
    first = FleetObserver([str(logs)], settings, options, serve=False)
    for _ in steps:
        first.poll_once()
        if (value(parse(first.exposition().decode()), "spark_streaming_batches_total", app="orders") or 0) >= expected // 2:
            break
    with open(str(options.state_path)) as f:
        (saved,) = json.load(f)["apps"].values()
    assert saved["runs"][0][2] < expected - 1 and saved["status"] == "running"  # killed with batches still to read
    for _ in steps:
        pass
    log.finish()

    second = FleetObserver([str(logs)], settings, options, serve=False)
    scrapes: list[Series] = []
    for _ in range(3):  # a scrape while each round's events are being processed, and one after it
        second.poll_once(on_found=lambda found: scrapes.append(parse(second.exposition().decode())))
        scrapes.append(parse(second.exposition().decode()))
    for series in scrapes:
        if value(series, "spark_state_observer_watch_applications", status="finished") == 1:
            assert value(series, "spark_streaming_batches_total", app="orders") == expected
    assert value(scrapes[-1], "spark_state_observer_watch_applications", status="finished") == 1
    assert value(scrapes[-1], "spark_state_observer_watch_events_duplicate_total") == 0
    second.stop()
    queries = load_queries(history)
    assert len(load_batches(history, queries.query_id[0])) == expected  # the replay wrote what the first had not


def test_bad_input_is_counted_and_the_other_applications_go_on(tmp_path, watches: list[Watch]) -> None:
    main_dir, extra_dir = tmp_path / "logs", tmp_path / "more"
    main_dir.mkdir()
    extra_dir.mkdir()
    w = Watch(str(tmp_path), [str(main_dir), str(extra_dir)], "--lost-after-seconds", "4", "--grace-seconds", "600", drop_root_powers=True)
    watches.append(w)
    w.wait("the endpoint", lambda s: value(s, "spark_state_observer_watch_applications", status="running") is not None)
    # two running applications with one name, a log that stops growing without an end (a killed driver),
    # a log written by a machine whose clock is an hour ahead, an unreadable log, and a folder that vanishes
    _write(str(main_dir), "hdfs", "twin", "app-twin-1", codec=None, finish=False)
    _write(str(main_dir), "hdfs", "twin", "app-twin-2", codec=None, finish=False)
    skewed = _write(str(main_dir), "rocksdb_restart", "skewed", "app-skewed-1")
    future = time.time() + 3600
    for path in glob.glob(os.path.join(skewed.dir, "*")) + [skewed.dir]:
        os.utime(path, (future, future))
    locked = _write(str(main_dir), "rocksdb_restart", "locked", "app-locked-1", finish=False)
    os.chmod(locked.path, 0)
    _write(str(extra_dir), "rocksdb_restart", "elsewhere", "app-elsewhere-1")
    hdfs_batches = _batches("hdfs")

    def problems(s: Series, kind: str) -> float:
        return value(s, "spark_state_observer_watch_problems_total", kind=kind) or 0

    series = w.wait(
        "every application and problem",
        lambda s: (
            value(s, "spark_streaming_batches_total", app="elsewhere") == _batches("rocksdb_restart")
            and value(s, "spark_streaming_batches_total", app="skewed") == _batches("rocksdb_restart")
            and problems(s, "duplicate_name") >= 1
            and problems(s, "clock_skew") >= 1
            and problems(s, "unreadable") >= 1
        ),
    )
    # same name: one info series each, told apart by the application id; their query series by the query id
    assert value(series, "spark_streaming_application_info", app="twin", app_id="app-twin-1") == 1
    assert value(series, "spark_streaming_application_info", app="twin", app_id="app-twin-2") == 1
    assert value(series, "spark_streaming_batches_total", app="twin") == hdfs_batches  # same query id: one series, not two
    shutil.rmtree(extra_dir)
    series = w.wait(
        "the lost applications",
        lambda s: value(s, "spark_state_observer_watch_applications", status="lost") == 3 and problems(s, "unreadable") >= 2,
    )
    assert "app-twin-1: no growth" in w.stderr()
    assert value(series, "spark_streaming_batches_total", app="skewed") == _batches("rocksdb_restart")  # the others went on
    os.chmod(locked.path, 0o644)
    assert w.stop() == 0


def test_forgotten_applications_leave_nothing_behind(tmp_path) -> None:
    """Applications coming and going: pipelines, series and signal state go with them; memory stays flat."""
    logs = tmp_path / "logs"
    logs.mkdir()
    fleet = FleetObserver([str(logs)], Settings.from_env(labels="cluster=a"), WatchOptions(grace_seconds=0.0), serve=False)
    lines = _lines("hdfs")
    progress = progress_lines(os.path.join(FIXTURES, "hdfs", "run1"))
    fleet.poll_once()  # the folder's first listing: what is written after it is new

    def wave(n: int) -> None:
        folders = []
        for i in range(n):
            log = ProgressiveLog(str(logs), f"app-{wave.count}-{i}", None)
            for _ in log.steps(renamed(lines, f"job-{i}", f"app-{wave.count}-{i}")):
                pass
            log.finish()
            folders.append(log.dir)
        wave.count += 1
        received = fleet.self_metrics.received.get("progress", 0)
        for _ in range(3):
            fleet.poll_once()
        assert fleet.self_metrics.received.get("progress", 0) - received == n * len(progress)  # every one went through a pipeline
        assert fleet.applications() == {}  # and was forgotten (grace 0) with its pipeline
        for folder in folders:
            shutil.rmtree(folder)
        fleet.poll_once()
        fleet.poll_once()

    wave.count = 0  # type: ignore[attr-defined]
    tracemalloc.start()
    try:
        wave(20)
        gc.collect()  # what is kept, not garbage the cycle collector has yet to run into (fewer tracked objects: later)
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(4):
            wave(20)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    text = fleet.exposition().decode()
    assert "spark_streaming_batches_total" not in text and "job-0" not in text
    assert fleet.watcher.counts.apps_forgotten == 100
    assert after - before < 1_000_000, f"{(after - before) / 1e6:.1f} MB kept after 80 more applications came and went"
    fleet.stop()


def test_static_labels_are_parsed_and_checked() -> None:
    assert parse_labels(" cluster=a , namespace=b,") == (("cluster", "a"), ("namespace", "b"))
    assert parse_labels("") == ()
    for bad, why in (("cluster", "name=value"), ("app=x", "writes itself"), ("9x=1", "label name"), ("a=1,a=2", "twice")):
        with pytest.raises(LabelsError, match=why):
            parse_labels(bad)
    assert Settings.from_env({"SPARK_STATE_OBSERVER_LABELS": "cluster=prod"}).static_labels == (("cluster", "prod"),)
    with pytest.raises(SettingsError, match="query"):
        Settings.from_env(labels="query=x")


def test_the_listener_side_carries_the_same_identity() -> None:
    """An PrometheusObserver told its application puts it on every series, the info series, and every signal."""
    from spark_state_observer.capture.queue import CapturedEvent

    identity = AppContext("orders", (("cluster", "a"),), "local-1", "", "local-1")
    observer = PrometheusObserver(Settings.from_env(labels="cluster=a"), serve=False, live=False, identity=identity)
    from spark_state_observer.offline.eventlog import Record, read_records

    progress = progress_lines(os.path.join(FIXTURES, "rocksdb_restart", "run1"))
    signals = []
    observer.on("*", signals.append)
    for r in read_records([os.path.join(FIXTURES, "rocksdb_restart", "run1", "eventlog")]):
        if isinstance(r, Record) and not r.kind.startswith("executor_"):
            observer.process(CapturedEvent(r.kind, r.payload, r.timestamp or 0.0, 0.0))
    series = parse(observer.exposition().decode())
    assert value(series, "spark_streaming_batches_total", app="orders", cluster="a") == len(progress)
    assert value(series, "spark_streaming_application_info", app="orders", app_id="local-1", attempt="", log_name="local-1") == 1
    assert value(series, "spark_state_observer_queries", cluster="a") == 1
    assert signals and all(dict(s.app) == {"cluster": "a", "app": "orders"} for s in signals)
    assert signals[0].to_json()["app"] == {"cluster": "a", "app": "orders"}
