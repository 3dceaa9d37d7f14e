"""The task-level events of Spark event logs, for per-partition placement (``spark_state_observer.placement.tracker``).

``spark_state_observer.offline.eventlog`` skips task, job and SQL events without parsing them (they are most of a log); this
reader keeps exactly the ones ``spark_state_observer.placement.tasks`` needs, with the same file handling (rolling folders,
every codec, bounded line length) and the same promise: problems are reported, never raised.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.model.bounded import loads
from spark_state_observer.offline.eventlog import DEFAULT_MAX_LINE_BYTES, EventLogError, bounded_lines, expand
from spark_state_observer.placement.task_lines import wanted_line
from spark_state_observer.placement.tasks import TaskEventReader
from spark_state_observer.placement.tracker import OperatorBatch, PlacementTracker


def read_events(paths: list[str], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[dict[str, Any] | EventLogError]:
    """Yield the wanted events of every file in order, as parsed JSON objects; problems as ``EventLogError`` items."""
    for item in _wanted_lines(paths, max_line_bytes):
        if isinstance(item, EventLogError):
            yield item
            continue
        obj = _parsed(*item)
        if obj is not None:
            yield obj


def _parsed(where: str, line: bytes) -> dict[str, Any] | EventLogError | None:
    """A wanted line as its JSON object (None: not an object)."""
    try:
        obj = loads(line)  # bounded: an item bomb is refused before parsing
    except (ValueError, RecursionError) as exc:
        return EventLogError(f"{where}: not valid JSON ({str(exc)[:80]})")
    return obj if isinstance(obj, dict) else None


def _wanted_lines(paths: list[str], max_line_bytes: int) -> Iterator[tuple[str, bytes] | EventLogError]:
    """The lines ``wanted_line`` keeps, each with its ``path:line``, in order; problems as ``EventLogError`` items."""
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
                for line_no, line in bounded_lines(stream, max_line_bytes, path):
                    if isinstance(line, EventLogError):  # an over-long line: reported, the rest of the file is read
                        yield line
                    elif wanted_line(line):
                        yield f"{path}:{line_no}", line
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

    for item in _wanted_lines(paths, DEFAULT_MAX_LINE_BYTES):
        if isinstance(item, EventLogError):
            errors.append(str(item))
            continue
        done = reader.feed_line(item[1])  # the typed decode of the fields placement reads; else the whole line
        if done is not None:
            apply(done)
            continue
        event = _parsed(*item)
        if isinstance(event, EventLogError):
            errors.append(str(event))
        elif event is not None:
            apply(reader.feed(event))
    apply(reader.close())
    errors.extend(f"{what}: {n}" for what, n in sorted(reader.problems.items()))
    return tracker, batches, errors
