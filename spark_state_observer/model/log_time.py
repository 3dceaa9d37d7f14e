"""When a QueryTerminatedEvent happened, which Spark logs without a time: the latest time of the lines before it.

Replay (``spark_state_observer.offline.eventlog``) and the watcher (``spark_state_observer.fleet.line_filter``) both place a termination so,
from the same number of lines before it, so a restart's downtime (the termination to the next run's start) is the
same figure whichever of them reads the log.
"""

from __future__ import annotations

import re
from typing import Iterable

from spark_state_observer.model.parse import parse_timestamp

# Spark's QueryTerminatedEvent carries no time. The events written just before it (the failed task and
# job, the last progress) do, and it cannot have happened before them: its time is the latest of theirs.
LINES_FOR_TIME = 16
_EPOCH_MS = re.compile(rb'"(?:Timestamp|Completion Time|Finish Time|Submission Time|Launch Time|time)":(1\d{12})\b')
_PROGRESS_TIME = re.compile(rb'"timestamp":"([0-9T:.+-]+Z?)"')
_BATCH_MS = re.compile(rb'"batchDuration":(\d{1,12})\b')


def time_before(lines: Iterable[bytes]) -> float | None:
    """The latest time (epoch seconds) any of ``lines`` carries: Spark's millisecond fields, or a
    progress's trigger time plus its batch duration; ``None`` when none carries one."""
    latest: float | None = None
    for line in lines:
        found = [int(m) / 1000.0 for m in _EPOCH_MS.findall(line)]
        stamp = _PROGRESS_TIME.search(line)
        if stamp is not None:
            start = parse_timestamp(stamp.group(1).decode("ascii", "replace"))
            if start is not None:
                duration = _BATCH_MS.search(line)
                found.append(start + (int(duration.group(1)) / 1000.0 if duration else 0.0))
        for t in found:
            latest = t if latest is None else max(latest, t)
    return latest
