"""Every recorded run's progress (tests/fixtures/**/progress.jsonl) as the model has it: what the fast-path
tests hold each fast path equal to its reference on."""

from __future__ import annotations

import glob
import json
import os
from typing import Any

from spark_state_observer.model.events import QueryProgress
from spark_state_observer.model.parse import parse_progress

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def recorded_runs(marker: str | None = None) -> list[tuple[str, list[QueryProgress]]]:
    """Each recorded ``progress.jsonl`` (its path under tests/fixtures, its events), in path order; with
    ``marker``, only the runs one of whose lines contains it (e.g. a metric only some Spark versions report)."""
    out = []
    for path in sorted(glob.glob(os.path.join(FIXTURES, "**", "progress.jsonl"), recursive=True)):
        with open(path) as f:
            lines = [line for line in f if line.strip()]
        if marker is None or any(marker in line for line in lines):
            out.append((os.path.relpath(path, FIXTURES), [parse_progress(json.loads(line)) for line in lines]))
    assert len(out) >= (20 if marker is None else 1), "the recorded fixtures are missing"
    return out


def recorded_at(progress: dict[str, Any]) -> float:
    """The time Spark stamped on a recorded progress event (seconds since the epoch): the time a live
    listener received it, and "now" for a test that plays one back. Never ``time.time()``: the recording's
    rows stamped next to rows of today would be weeks apart, and the history's retention keeps one week."""
    stamp = parse_progress(progress).timestamp
    assert stamp is not None, "a recorded progress event carries its time"
    return stamp
