"""The event-log watcher's parts, each alone on real recorded logs (``tests/fixtures``): the listing, discovery, the
tailer, the line reader, the identity resolver, the clock-skew estimator, the lifecycle judge and the position store.

The whole watcher is ``test_eventlog_watch.py``'s; here each part is built with only what it is given, as the
coordinator (``spark_state_observer.fleet.eventlog_watch``) builds it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Any

from bench.eventlog_writer import recorded_lines
from conftest import FIXTURES
from spark_state_observer.fleet.app_events import DEFAULT_WANTED_EVENTS, STREAMING_ONLY_EVENTS, WatchCounts
from spark_state_observer.fleet.app_lifecycle import LifecycleJudge
from spark_state_observer.fleet.clock_skew import SkewEstimator, event_time
from spark_state_observer.fleet.discovery import Discovery
from spark_state_observer.fleet.event_lines import EventReader
from spark_state_observer.fleet.followed_app import FollowedApp, FollowedApps, Listing
from spark_state_observer.fleet.identification import IdentityResolver
from spark_state_observer.fleet.line_filter import line_pattern
from spark_state_observer.fleet.log_listing import list_logs
from spark_state_observer.fleet.log_tailing import Tailer
from spark_state_observer.fleet.watch_positions import PositionStore
from spark_state_observer.fleet.watch_problems import Problems
from spark_state_observer.model.spark_events import APP_END, APP_START, ENVIRONMENT, LOG_START, QUERY_PROGRESS, QUERY_STARTED

INCIDENTS = os.path.join(FIXTURES, "incidents")
KILLED_ROLLING = os.path.join(INCIDENTS, "driver_killed", "run1", "eventlog")  # a rolling folder, left in progress
KILLED_SINGLE = os.path.join(INCIDENTS, "driver_killed_single_file", "run1", "eventlog")  # one .inprogress file
FINISHED_SINGLE = os.path.join(INCIDENTS, "deploy_sigterm_35", "run1", "eventlog")  # one finished file
WANTED = frozenset(DEFAULT_WANTED_EVENTS)
PATTERNS = {line_pattern(t): t for t in sorted(WANTED | {APP_START, APP_END, LOG_START, QUERY_STARTED, ENVIRONMENT})}


class Parts:
    """The watcher's parts over one book, wired as the coordinator wires them."""

    def __init__(self, wall: float = 0.0, state_path: str | None = None) -> None:
        self.counts = WatchCounts()
        self.problems = Problems(self.counts)
        self.book = FollowedApps(self.counts)
        self.wall, self.now = wall, 1000.0
        self.identity = IdentityResolver(self.book, self.problems)
        self.skew = SkewEstimator(self.problems, clock=lambda: self.now, wall_clock=lambda: self.wall, poll_interval=2.0)
        self.reader = EventReader(
            self.problems,
            self.identity,
            wanted=WANTED,
            raw_events=frozenset(),
            raw_keep=None,
            progress_as_bytes=True,
            identity_properties=(),
            patterns=PATTERNS,
        )
        self.tailer = Tailer(
            self.book,
            self.problems,
            patterns=PATTERNS,
            patterns_batch={p: t for p, t in PATTERNS.items() if t not in STREAMING_ONLY_EVENTS},
            max_line_bytes=1 << 24,
            link_inside=lambda path: True,
            on_line=self.reader.line,
            on_caught_up=self.skew.caught_up,
        )
        self.judge = LifecycleJudge(
            self.book,
            self.problems,
            self.tailer,
            self.identity,
            grace_seconds=300.0,
            lost_after_seconds=600.0,
            wall_clock=lambda: self.wall,
            poll_interval=2.0,
        )
        self.positions = PositionStore(self.book, self.problems, self.tailer, state_path=state_path, replay_on_resume=False)

    def follow(self, name: str, path: str, kind: str = "single", finished: bool = False) -> FollowedApp:
        app = FollowedApp(name, Listing(kind, path, finished, -1), self.now)
        self.book.apps[name] = app
        return app


def copied(source: str, folder: Any) -> str:
    """A recorded log copied into ``folder`` (a rolling log's folder whole); its path there."""
    (name,) = os.listdir(source)
    target = os.path.join(str(folder), name)
    (shutil.copytree if os.path.isdir(os.path.join(source, name)) else shutil.copyfile)(os.path.join(source, name), target)
    return target


def decoded(path: str) -> list[bytes]:
    files = sorted(os.listdir(path), key=lambda n: int(n.split("_")[1])) if os.path.isdir(path) else [""]
    return [line for f in files for line in recorded_lines(os.path.join(path, f) if f else path)]


def batches(app: FollowedApp) -> list[int]:
    assert app.out is not None
    return [json.loads(e.progress)["batchId"] for e in app.out.events if e.event_type == QUERY_PROGRESS and e.progress is not None]


def recorded_batches(path: str) -> list[int]:
    return [json.loads(line)["progress"]["batchId"] for line in decoded(path) if line.startswith(b'{"Event":"' + QUERY_PROGRESS.encode())]


# --- listing (a pure function) and discovery --------------------------------------------------------------------


def test_the_listing_finds_single_and_rolling_logs_and_names_what_it_cannot_use(tmp_path: Any) -> None:
    rolling, single, done = (copied(s, tmp_path) for s in (KILLED_ROLLING, KILLED_SINGLE, FINISHED_SINGLE))
    os.mkfifo(tmp_path / "local-9.inprogress")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    os.symlink(str(outside), tmp_path / "eventlog_v2_local-8")
    listed = list_logs(
        [str(tmp_path), str(tmp_path / "missing")],
        listed_before={str(tmp_path)},
        link_inside=lambda path: os.path.realpath(path).startswith(str(tmp_path) + os.sep),
    )
    by_path = {item.path: (name, item.kind, item.finished, item.first) for name, item in listed.logs.items()}
    assert by_path == {
        rolling: ("local-1796673123048", "rolling", False, False),
        single: ("local-1796673351335", "single", False, False),
        done: ("local-1795809689585", "single", True, False),
    }
    assert not listed.complete and listed.folders == [str(tmp_path)]
    assert sorted(kind for _, kind, _ in listed.unusable) == ["not_regular", "symlink", "unreadable"]
    assert list_logs([str(tmp_path)], listed_before=set()).logs["local-1796673351335"].first  # a folder's first listing


def test_discovery_follows_what_is_in_progress_leaves_what_finished_before_and_forgets_a_log_gone_twice(tmp_path: Any) -> None:
    single, done = copied(KILLED_SINGLE, tmp_path), copied(FINISHED_SINGLE, tmp_path)
    parts = Parts()
    restored: list[str] = []
    discovery = Discovery(
        parts.book,
        parts.problems,
        lambda app, saved: restored.append(app.name),
        dirs=[str(tmp_path)],
        skip=None,
        link_inside=lambda path: True,
        shard=None,
        max_apps=10,
        read_finished_at_start=False,
    )
    discovery.round(0.0)
    assert list(parts.book.apps) == ["local-1796673351335"] and parts.book.done == {"local-1795809689585"}
    assert parts.counts.apps_discovered == 1 and not restored
    os.remove(single)
    for _ in range(2):  # a listing taken during a rename may miss it: the second one agrees
        assert "local-1796673351335" in parts.book.apps
        discovery.round(0.0)
    assert not parts.book.apps and parts.counts.apps_forgotten == 1 and parts.counts.problems["vanished"] == 1
    os.remove(done)
    discovery.round(0.0)
    assert parts.book.done == set()  # its log gone too: nothing left to remember


# --- tailing, lines, identity ------------------------------------------------------------------------------------


def test_the_tailer_and_reader_deliver_every_batch_once_within_the_budget(tmp_path: Any) -> None:
    path = copied(KILLED_ROLLING, tmp_path)
    parts = Parts()
    app = parts.follow("local-1796673123048", path, "rolling")
    budget = parts.tailer.follow(app, 50_000)  # far less than the log: the rest waits for the next poll
    assert budget <= 0 and parts.tailer.backlog
    for _ in range(100):
        if parts.tailer.follow(app, 1 << 24) > 0:
            break
    assert app.tail is not None and app.tail.raw == app.tail.size
    assert batches(app) == recorded_batches(path) and batches(app)
    assert app.streaming and app.identity is not None and parts.counts.events_duplicate == 0
    assert parts.counts.decoded_bytes == sum(len(line) for line in decoded(path))


def test_the_reader_drops_a_progress_already_delivered(tmp_path: Any) -> None:
    path = copied(KILLED_SINGLE, tmp_path)
    parts = Parts()
    app = parts.follow("local-1796673351335", path)
    parts.tailer.follow(app, 1 << 30)
    delivered = batches(app)
    assert app.tail is not None
    again = [line for line in decoded(path) if line.startswith(b'{"Event":"' + QUERY_PROGRESS.encode())]
    for n, line in enumerate(again):
        parts.reader.line(app, app.tail, n, QUERY_PROGRESS, line.rstrip(b"\n"))
    assert batches(app) == delivered and parts.counts.events_duplicate == len(again)


def test_the_identity_resolver_holds_events_until_the_application_start_and_names_two_alike(tmp_path: Any) -> None:
    path = copied(KILLED_SINGLE, tmp_path)
    start = next(json.loads(line) for line in decoded(path) if line.startswith(b'{"Event":"' + APP_START.encode()))
    parts = Parts()
    first, second = parts.follow("a", path), parts.follow("b", path)
    parts.identity.identify(first, start)
    assert first.identity is not None and first.identity.name == start["App Name"] and first.identity.app_id == start["App ID"]
    parts.tailer.follow(second, 1 << 30)  # the start is read with the rest: held events go out once it is named
    assert second.identity is not None and second.out is not None and len(second.out.events) > 0 and not second.held
    assert parts.counts.problems["duplicate_name"] == 2  # two running applications with one name, each told
    third = parts.follow("c", path)
    parts.identity.fallback(third, "no start")
    assert third.identity is not None and third.identity.name == "c" and parts.counts.problems["no_app_start"] == 1


# --- clock skew --------------------------------------------------------------------------------------------------


def test_the_skew_estimator_takes_the_smallest_delay_of_reads_that_follow_a_read_to_the_end(tmp_path: Any) -> None:
    times = [t for line in decoded(copied(KILLED_SINGLE, tmp_path)) if (t := event_time(*_typed(line))) is not None]
    parts = Parts()
    app = parts.follow("a", "unused")
    parts.skew.caught_up(app)  # the first read to the end: no sample yet (its events may be old)
    for n, t in enumerate(times[-4:]):
        parts.wall = t + 3600.0 + (5.0 if n == 1 else 0.0)  # the driver's clock an hour behind; one slow delivery
        app.newest_event = t
        parts.skew.caught_up(app)
    assert app.clock_known and app.clock_skew == 3600.0 and parts.counts.problems["clock_skew"] == 1
    quiet = parts.follow("b", "unused")
    parts.skew.caught_up(quiet)
    parts.skew.caught_up(quiet)
    parts.now += 33.0  # quiet past the tolerance (30 s and a poll): no sample will come
    parts.skew.caught_up(quiet)
    assert quiet.clock_known and quiet.clock_skew == 0.0 and quiet.clock_news


def _typed(line: bytes) -> tuple[str, dict[str, Any]]:
    event = json.loads(line)
    return event.get("Event", ""), event


# --- lifecycle ---------------------------------------------------------------------------------------------------


def test_the_lifecycle_judge_dates_a_log_found_long_dead_at_its_last_sign_of_life(tmp_path: Any) -> None:
    path = copied(KILLED_SINGLE, tmp_path)
    last = max(t for line in decoded(path) if (t := event_time(*_typed(line))) is not None)
    os.utime(path, (last, last))  # as the killed driver left it
    parts = Parts(wall=last + 30 * 86400.0)
    app = parts.follow("local-1796673351335", path)
    parts.tailer.follow(app, 1 << 30)
    parts.judge.judge(app, parts.now)
    # the silence before it was found dates a loss (its last event), but the verdict waits for silence on the
    # watcher's own clock: no file server's or driver's clock can make a log lost
    assert app.dead_for == parts.wall - last and app.last_growth == parts.now
    assert app.status == "running"
    parts.judge.judge(app, parts.now + parts.judge.lost_after_seconds + 1.0)
    assert app.status == "lost"
    fresh = Parts(wall=last + 10.0)  # within the skew tolerance: no silence before the watcher saw it
    app = fresh.follow("local-1796673351335", path)
    fresh.tailer.follow(app, 1 << 30)
    fresh.judge.judge(app, fresh.now)
    assert app.last_growth == fresh.now and app.dead_for == 0.0 and app.status == "running"


def test_the_lifecycle_judge_finishes_a_log_read_to_its_end_after_its_end_marker(tmp_path: Any) -> None:
    path = copied(FINISHED_SINGLE, tmp_path)
    parts = Parts(wall=os.stat(path).st_mtime)
    app = parts.follow("local-1795809689585", path, finished=True)
    parts.tailer.follow(app, 1 << 30)
    parts.judge.judge(app, parts.now)
    parts.judge.update_gauges()
    assert app.status == "finished" and parts.counts.apps_finished == 1 and parts.counts.apps_running == 0


# --- positions ---------------------------------------------------------------------------------------------------


def test_the_position_store_saves_and_restores_where_delivery_stopped(tmp_path: Any) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    path = copied(KILLED_ROLLING, logs)
    state = str(tmp_path / "state.json")
    parts = Parts(state_path=state)
    app = parts.follow("local-1796673123048", path, "rolling")
    parts.tailer.follow(app, 1 << 30)
    parts.book.dirty = True
    parts.positions.commit()
    assert parts.positions.snapshot() is None  # nothing moved since

    again = Parts(state_path=state)
    assert again.positions.load() and "local-1796673123048" in again.book.saved
    resumed = again.follow("local-1796673123048", path, "rolling")
    again.positions.restore(resumed, again.book.saved["local-1796673123048"])
    assert resumed.identity is not None and app.identity is not None and resumed.runs == app.runs
    # the identity as saved (the capacity conf is not: the watch command replays a log on resume, which reads it again)
    assert dataclasses.replace(resumed.identity, spark_conf=app.identity.spark_conf) == app.identity
    assert resumed.tail is not None and app.tail is not None and resumed.tail.raw == app.tail.raw
    again.tailer.follow(resumed, 1 << 30)
    assert resumed.out is None or not batches(resumed)  # nothing delivered twice

    broken = Parts(state_path=state)
    other = broken.follow("x", path, "rolling")
    broken.positions.restore(other, {**again.book.saved["local-1796673123048"], "tail": {"file": "../../etc/passwd"}})
    assert other.tail is None and other.identity is None and broken.counts.problems["state_file"] == 1
