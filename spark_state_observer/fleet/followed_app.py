"""What the watcher keeps about one followed application (``FollowedApp``), and a log as a folder listing
found it (``Listing``): small, whatever the log's size.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from dataclasses import dataclass
from typing import Any

from spark_state_observer.fleet.app_events import AppEvents, LoggedApp, RawEvent
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
