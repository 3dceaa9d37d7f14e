"""The task-level events of Spark event logs, for per-partition placement (``observer.signals.placement``).

``observer.offline.eventlog`` skips task, job and SQL events without parsing them (they are most of a log); this
reader keeps exactly the ones ``observer.model.tasks`` needs, with the same file handling (rolling folders,
every codec, bounded line length) and the same promise: problems are reported, never raised.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from observer.capture.codecs import open_decompressed
from observer.model.tasks import TaskEventReader, wanted_line
from observer.offline.eventlog import DEFAULT_MAX_LINE_BYTES, EventLogError, _lines, expand
from observer.signals.placement import OperatorBatch, PlacementTracker


def read_events(paths: list[str], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[dict[str, Any] | EventLogError]:
    """Yield the wanted events of every file in order, as parsed JSON objects; problems as ``EventLogError`` items."""
    try:
        files = expand(paths)
    except EventLogError as exc:
        yield exc
        return
    for path in files:
        try:
            stream = open_decompressed(path)
        except (OSError, EventLogError) as exc:
            yield exc if isinstance(exc, EventLogError) else EventLogError(f"{path}: cannot open: {exc}")
            continue
        with stream:
            line_no = 0
            try:
                for line_no, line in _lines(stream, max_line_bytes, path):
                    if isinstance(line, EventLogError):  # an over-long line: reported, the rest of the file is read
                        yield line
                        continue
                    if not wanted_line(line):
                        continue
                    try:
                        obj = json.loads(line)
                    except (ValueError, RecursionError) as exc:
                        yield EventLogError(f"{path}:{line_no}: not valid JSON ({str(exc)[:80]})")
                        continue
                    if isinstance(obj, dict):
                        yield obj
            except EventLogError as exc:
                yield exc
            except Exception as exc:  # decompression errors of every codec library
                yield EventLogError(f"{path}: unreadable after line {line_no}: {type(exc).__name__}: {exc}")


def replay_placement(paths: list[str], top_k: int = 10) -> tuple[PlacementTracker, list[OperatorBatch], list[str]]:
    """Placement of recorded logs: the tracker (metrics, facts), every operator batch in order, problems met."""
    reader = TaskEventReader()
    tracker = PlacementTracker(top_k=top_k)
    batches: list[OperatorBatch] = []
    errors: list[str] = []

    def apply(items: list) -> None:  # type: ignore[type-arg]
        for item in items:
            if hasattr(item, "runs"):
                batches.extend(tracker.on_batch(item))
            else:
                tracker.on_executor(item)

    for event in read_events(paths):
        if isinstance(event, EventLogError):
            errors.append(str(event))
            continue
        apply(reader.feed(event))
    apply(reader.close())
    errors.extend(f"{what}: {n}" for what, n in sorted(reader.problems.items()))
    return tracker, batches, errors
