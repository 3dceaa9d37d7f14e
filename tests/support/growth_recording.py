"""The recorded unbounded-growth log (tests/fixtures/incidents/unbounded_growth) that the watcher outage and
recovery tests write as Spark would, batch by batch: where it is, whose it is, and where each batch ends."""

from __future__ import annotations

import os

SCENARIO = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "incidents", "unbounded_growth", "run1", "eventlog"
)
APP, APP_ID = "growth", "app-growth-1"


def _progress_cuts(lines: list[bytes]) -> list[int]:
    """The index just after each progress event's line: where a slice of the log ends at a Spark flush."""
    return [
        i + 1
        for i, line in enumerate(lines)
        if line.startswith(b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"')
    ]
