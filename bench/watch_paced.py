"""Follow recorded event logs with ``watch`` at the pace they were written, on a simulated clock (tests, precision).

The watcher's verdicts that need time to pass (a stall, a driver lost) are judged on its clock. Replaying a
recording through it at wall speed would take as long as the recording; here ``FleetObserver`` runs on a simulated
clock (its ``clock``) that starts at the recording's first event and moves on by ``step`` seconds between polls.
A recording's log reaches the watched folder as the driver wrote it:

- ``paced``: a finished log is written flush group by flush group (``bench.eventlog_writer``) when the clock reaches
  the group's time (the latest time its lines carry, ``spark_state_observer.model.log_time``), so a live idle query
  writes its idle events every 10 s as it did;
- ``as_left``: a killed driver's log is copied byte for byte as it was left (the rolling folder's
  ``appstatus_<appId>.inprogress`` marker put back, which the recording does not keep), when the clock reaches its
  last event: from then on it never grows. ``cut`` bytes less at its end: a driver killed while it wrote a zstd
  frame (the recorded kills fell between Spark's flushes: whole frames, the unflushed task ends lost).
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.eventlog_writer import ProgressiveLog, flush_groups, recorded_lines
from spark_state_observer.fleet.runtime import FleetObserver
from spark_state_observer.model.log_time import time_before


@dataclass
class Log:
    """One application's recorded log, as it reaches the watched folder."""

    folder: str  # the recording's eventlog folder (runN/eventlog)
    paced: bool  # written at its pace (a finished log); else copied as it was left (a killed driver's)
    groups: list[tuple[float, list[bytes]]] = field(default_factory=list)  # paced: (time, flush group)
    start: float = 0.0  # when it begins to be written
    end: float = 0.0  # its last event's time
    app_id: str = ""
    rolling: bool = True
    cut: int = 0  # as left: bytes taken off the end of its last file (half a frame)

    @classmethod
    def of(cls, folder: str, paced: bool) -> Log:
        rolling = glob.glob(os.path.join(folder, "eventlog_v2_*"))
        files = (
            sorted(glob.glob(os.path.join(rolling[0], "events_*")), key=lambda p: int(os.path.basename(p).split("_")[1]))
            if rolling
            else sorted(glob.glob(os.path.join(folder, "*")))
        )
        lines = [line for path in files for line in recorded_lines(path)]
        name = os.path.basename(rolling[0]) if rolling else os.path.basename(files[0])
        app_id = name.removeprefix("eventlog_v2_").split(".")[0]
        groups, latest = [], 0.0
        for group in flush_groups(lines):
            t = time_before(group)
            latest = max(latest, t or 0.0)
            groups.append((latest, group))
        first = next(t for t, _ in groups if t > 0)
        return cls(folder, paced, [(max(t, first), g) for t, g in groups], first, latest, app_id, bool(rolling))


class PacedWatch:
    """A ``FleetObserver`` on a simulated clock, fed recorded logs at their pace; ``run`` polls every ``step`` seconds."""

    def __init__(self, folder: str, make: Callable[[Callable[[], float]], FleetObserver], start: float, step: float = 2.0) -> None:
        self.folder, self.step = folder, step
        self.now = start
        self.fleet = make(lambda: self.now)
        self._writing: list[tuple[Log, ProgressiveLog | None, int]] = []

    def add(self, log: Log) -> None:
        self._writing.append((log, None, 0))

    def run(self, until: float, on_poll: Callable[[float], None] | None = None) -> None:
        """Poll from now to ``until`` (clock seconds), writing what each log had written by then."""
        while self.now <= until:
            self._write()
            self.fleet.poll_once()
            if on_poll is not None:
                on_poll(self.now)
            self.now += self.step

    def _write(self) -> None:
        kept = []
        for log, writer, done in self._writing:
            if not log.paced:
                if self.now < log.end:
                    kept.append((log, writer, done))
                    continue
                _copy_as_left(log, self.folder)
                continue
            if self.now < log.start:
                kept.append((log, writer, done))
                continue
            if writer is None:
                writer = ProgressiveLog(self.folder, log.app_id, "zstd", rolling=log.rolling)
            while done < len(log.groups) and log.groups[done][0] <= self.now:
                for _ in writer.write_group(log.groups[done][1]):
                    pass
                done += 1
            if done < len(log.groups):
                kept.append((log, writer, done))
            elif any(g[0].startswith(b'{"Event":"SparkListenerApplicationEnd"') for _, g in log.groups[-3:]):
                writer.finish()  # an application that ended: its marker, as Spark's stop() leaves it
        self._writing = kept


def _copy_as_left(log: Log, folder: str) -> None:
    """A killed driver's log, byte for byte, with the in-progress marker a rolling folder had (``cut`` bytes less)."""
    for name in os.listdir(log.folder):
        source = os.path.join(log.folder, name)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(folder, name))
            open(os.path.join(folder, name, f"appstatus_{log.app_id}.inprogress"), "wb").close()
            files = sorted(glob.glob(os.path.join(folder, name, "events_*")), key=lambda p: int(os.path.basename(p).split("_")[1]))
            last = files[-1]
        else:
            last = os.path.join(folder, name)
            shutil.copyfile(source, last)
    if log.cut:
        with open(last, "r+b") as f:
            f.truncate(max(0, os.path.getsize(last) - log.cut))
