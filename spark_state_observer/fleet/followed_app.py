"""What the watcher keeps about one followed application (``FollowedApp``), a log as a folder listing found it
(``Listing``), and the book of them all (``FollowedApps``): small, whatever the logs' sizes.

Why here: every part of the watcher reads and changes one application's state; the state is data, kept in one
place, and each part is a small object that acts on it (see ``spark_state_observer.fleet.eventlog_watch``).
"""

from __future__ import annotations

import os
import time
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from spark_state_observer.fleet.app_events import AppEvents, LoggedApp, RawEvent, StatusChange, WatchCounts
from spark_state_observer.fleet.file_tail import FileTail

SKEW_SAMPLES = 16  # clock-skew samples kept per application: spark_state_observer.fleet.clock_skew acts on the smallest


@dataclass
class Listing:
    """One log as found in a folder listing."""

    kind: str  # "single" or "rolling"
    path: str  # the file, or the rolling folder
    finished: bool  # single file without .inprogress (rolling: decided from the folder's appstatus marker)
    mtime_ns: int
    first: bool = False  # found in its folder's first successful listing of a watcher without saved state


class FollowedApp:
    """Everything the watcher keeps about one application; small, whatever the log's size."""

    def __init__(self, name: str, listing: Listing, now: float) -> None:
        self.name = name
        self.listing = listing
        self.identity: LoggedApp | None = None
        self.tail: FileTail | None = None
        self.status = "running"
        self.status_since = now
        self.last_growth = now
        # seconds its log was silent before this watcher first read it (dates a loss; never judges one)
        self.dead_for = 0.0
        self.growth_sig: tuple[Any, ...] = ()
        self.dir_mtime = -1
        self.polls_since_listing = 0
        self.files: dict[int, str] = {}  # rolling: index -> file name
        self.marker_final = False
        self.end_seen = False
        self.streaming = False
        self.properties: dict[str, str] = {}
        self.spark_conf: dict[str, str] = {}
        self.spark_version: str | None = None
        self.runs: OrderedDict[tuple[str, str], int] = OrderedDict()
        self.held: list[RawEvent] = []
        self.out: AppEvents | None = None
        self.problems: Counter[str] = Counter()
        self.active_problems: set[str] = set()
        self.replay_until: tuple[int, int] | None = None  # (file index, line) delivered before a restart
        self.missing = 0  # consecutive listings without this log
        self.newest_event: float | None = None  # newest event time read in this poll
        self.last_event: float | None = None  # newest event time read at all (the driver's clock): a sign of life
        self.caught_up = False  # the last read reached the end of the file
        self.skew_samples: deque[float] = deque(maxlen=SKEW_SAMPLES)
        self.clock_skew = 0.0  # acted on: 0 unless measured beyond tolerance
        self.clock_known = False  # the skew is settled: enough samples, or quiet too long for one to come
        self.quiet_since: float | None = None  # the watcher's clock when the file was last read to its end without news
        self.clock_news = False  # the clock became known in this poll without events: reported all the same
        self.dropped = False  # forgotten during this poll (a replaced log): nothing more is done with it

    def report(self) -> AppEvents:
        if self.out is None:
            self.out = AppEvents(self.name, self.identity, clock_skew=self.clock_skew, clock_known=self.clock_known)
        return self.out


@dataclass
class FollowedApps:
    """The applications followed, the logs done with, the positions saved by an earlier run not yet found again, and
    those forgotten in this poll (their last report still goes out); ``dirty``: positions moved since the last save."""

    counts: WatchCounts
    apps: dict[str, FollowedApp] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)  # finished or forgotten logs still in the folders: not read again
    saved: dict[str, Any] = field(default_factory=dict)
    forgotten: list[FollowedApp] = field(default_factory=list)
    dirty: bool = False
    turn: int = 0  # which application reads first in the next poll

    def in_turn(self) -> list[FollowedApp]:
        """The followed applications, one further along at each call: when a poll's decode budget runs out, the
        applications left for the next poll are not always the same."""
        apps = list(self.apps.values())
        if apps:
            self.turn = (self.turn + 1) % len(apps)
            apps = apps[self.turn :] + apps[: self.turn]
        return apps

    def reports(self) -> list[AppEvents]:
        """What this poll found, per application with news (those forgotten in it too); each report is handed over once."""
        out = []
        for app in list(self.apps.values()) + self.forgotten:
            if app.out is not None and (app.out.events or app.out.status_changes or app.out.problems or app.clock_news):
                out.append(app.out)
            app.out, app.clock_news = None, False
        self.forgotten = []
        return out

    def drop(self, app: FollowedApp, status: str, message: str, done: bool = True) -> None:
        """Forget ``app``; ``done``: its log, if still there, is not read again (``False``: found again as a new log)."""
        report = app.report()
        report.identity = app.identity
        report.status_changes.append(StatusChange(status, message, time.time()))
        self.apps.pop(app.name, None)
        app.dropped = True
        if done and app.listing.path and os.path.lexists(app.listing.path):
            self.done.add(app.name)
        self.counts.apps_forgotten += 1
        self.forgotten.append(app)
        self.dirty = True
