"""Read recorded listener events: Spark event logs and JSON-lines files of progress objects.

Spark writes event logs as JSON lines, whole-file compressed with the codec named in the file's
extension (``.zstd``, ``.lz4``, ``.snappy``; none for plain; decoded by ``spark_state_observer.capture.codecs``) and, by default since 4.0, rolled into
``eventlog_v2_<appId>/events_<n>_<appId>[.codec]`` folders. Everything is streamed: memory stays bounded
by ``max_line_bytes`` however large (or hostile) the file: a compressed chunk may not declare (or a zstd
frame need) more than that before anything is allocated, and a line is counted before it is parsed
(``spark_state_observer.model.bounded.loads``). A bad line (too long, not JSON, odd values) is one problem and the
next line is read; a truncated or corrupt file yields the events before the damage and then one
``EventLogError`` that says where it broke. In folders, what cannot be read (dangling symlinks, symlink
loops, unreadable folders, FIFOs and other non-regular files, which are never opened) is a problem, not
the end of the replay.
"""

from __future__ import annotations

import io
import os
import re
import stat
from collections import deque
from dataclasses import dataclass, replace
from typing import IO, Any, Callable, Iterator

from spark_state_observer.capture.codecs import DEFAULT_MAX_LINE_BYTES as DEFAULT_MAX_LINE_BYTES  # re-exported: the readers' default
from spark_state_observer.capture.codecs import MAX_BLOCK_BYTES, open_decompressed
from spark_state_observer.capture.codecs import EventLogError as EventLogError  # re-exported: what every reader of event logs catches
from spark_state_observer.model import decode, kinds, spark_events
from spark_state_observer.model.bounded import MAX_JSON_ITEMS, JsonTooLarge, loads
from spark_state_observer.model.events import assemble
from spark_state_observer.model.log_time import LINES_FOR_TIME
from spark_state_observer.model.log_time import time_before as time_before  # re-exported: the offline readers' name for it

# executor changes, replayed as the executor list a live observer polls
EXECUTOR_PREFIX = "executor_"
RECORD_EXECUTOR_ADDED = EXECUTOR_PREFIX + "added"
RECORD_EXECUTOR_REMOVED = EXECUTOR_PREFIX + "removed"
_ROLLING_FILE = re.compile(r"^events_(\d+)_")
# Spark writes 32 KiB snappy and lz4 blocks; a chunk may declare up to the line limit, at least this
_MIN_CHUNK_LIMIT = 1 << 20


@dataclass(frozen=True)
class Record:
    """One replayable item: a listener event (kind + payload) or an executor change."""

    kind: str  # started, progress, idle, terminated, executor_added, executor_removed
    payload: Any
    source: str  # file:line, for error messages
    timestamp: float | None = None


MAX_DEPTH = 8  # folders within folders


def expand(paths: list[str], problems: list[EventLogError] | None = None) -> list[str]:
    """Files to read, in order: rolling folders by their index, other folders by name.

    A path given that does not exist is an ``EventLogError``; what cannot be read inside a folder (or a
    given path that is not a regular file) is added to ``problems`` and skipped.
    """
    files: list[str] = []
    problems = [] if problems is None else problems
    visited: set[tuple[int, int]] = set()
    for path in paths:
        before = (len(files), len(problems))
        _expand([path], files, problems, visited, 0)
        if (len(files), len(problems)) == before and os.path.isdir(path):  # a typo'd folder, a log that is a folder: said
            problems.append(EventLogError(f"{path}: a folder holding no event log"))
    return files


def _expand(
    paths: list[str], files: list[str], problems: list[EventLogError], visited: set[tuple[int, int]], depth: int, parts: bool = False
) -> None:
    """``parts``: ``paths`` are the parts of one rolling log (a folder among them is where a part should be)."""
    for path in paths:
        try:
            info = os.stat(path)  # follows symlinks: a dangling one or a loop raises here
        except OSError as exc:
            if depth == 0 and not os.path.lexists(path):
                raise EventLogError(f"{path}: no such file or directory") from None
            problems.append(EventLogError(f"{path}: skipped, cannot be read: {exc.strerror or exc}"))
            continue
        if stat.S_ISREG(info.st_mode):
            files.append(path)
        elif not stat.S_ISDIR(info.st_mode):
            problems.append(EventLogError(f"{path}: skipped, not a regular file (a FIFO, socket or device is never opened)"))
        elif parts:
            problems.append(EventLogError(f"{path}: skipped, a folder where a part of the rolling log should be"))
        elif (info.st_dev, info.st_ino) in visited or depth >= MAX_DEPTH:
            problems.append(EventLogError(f"{path}: skipped, a folder already read (symlink loop) or nested deeper than {MAX_DEPTH}"))
        else:
            visited.add((info.st_dev, info.st_ino))
            try:
                names = [n for n in os.listdir(path) if not n.startswith(".") and not n.startswith("appstatus")]
            except OSError as exc:
                problems.append(EventLogError(f"{path}: skipped, folder cannot be listed: {exc.strerror or exc}"))
                continue
            rolling = sorted((int(m.group(1)), n) for n in names if (m := _ROLLING_FILE.match(n)))
            chosen = [n for _, n in rolling] if rolling else sorted(names)
            _expand([os.path.join(path, n) for n in chosen], files, problems, visited, depth + 1, parts=bool(rolling))


def read_records(
    paths: list[str],
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    tap: Callable[[bytes], None] | None = None,
    progress_as_bytes: bool = False,
) -> Iterator[Record | EventLogError]:
    """Yield the replayable records of every file in order; problems come as ``EventLogError`` items.

    ``tap`` sees every line before its record is yielded (placement reads the task events this skips).
    With ``progress_as_bytes`` an event log's progress payload is its ``progress`` object's JSON text (bytes),
    cut out of the line without building dicts, for ``spark_state_observer.model.decode``'s fast path; else a dict.

    A bad line is reported and skipped; a file that cannot be decompressed further is reported and the
    next file is read; what cannot be read in a folder is reported first. Nothing read before a problem
    is lost.
    """
    problems: list[EventLogError] = []
    files = expand(paths, problems)
    yield from problems
    for path in files:
        try:
            stream = open_decompressed(path, chunk_limit(max_line_bytes))
        except (OSError, EventLogError) as exc:
            yield exc if isinstance(exc, EventLogError) else EventLogError(f"{path}: cannot open: {exc.strerror or exc}")
            continue
        with stream:
            line_no = 0
            before: deque[bytes] = deque(maxlen=LINES_FOR_TIME)  # the lines just read, kept by reference only
            try:
                for line_no, line in bounded_lines(stream, max_line_bytes, path):
                    if isinstance(line, EventLogError):
                        yield line
                        continue
                    if tap is not None:
                        tap(line)
                    where = f"{path}:{line_no}"
                    try:
                        item = _record(line, where, progress_as_bytes)
                    except Exception as exc:  # a value no rule foresaw: this line only
                        item = EventLogError(f"{where}: unusable ({type(exc).__name__}: {str(exc)[:80]})")
                    if item is not None:
                        if isinstance(item, Record) and item.kind == kinds.TERMINATED and item.timestamp is None:
                            item = replace(item, timestamp=time_before(before))
                        yield item
                    before.append(line)
            except EventLogError as exc:
                yield exc
            except Exception as exc:  # decompression errors of every codec library
                yield EventLogError(f"{path}: unreadable after line {line_no}: {type(exc).__name__}: {str(exc)[:200]}")


def chunk_limit(max_line_bytes: int) -> int:
    """The largest decompressed chunk a reader of lines at most ``max_line_bytes`` long lets a codec declare."""
    return min(MAX_BLOCK_BYTES, max(max_line_bytes, _MIN_CHUNK_LIMIT))


def bounded_lines(stream: io.RawIOBase | IO[bytes], max_line_bytes: int, path: str) -> Iterator[tuple[int, bytes | EventLogError]]:
    """Each non-blank line; a line longer than ``max_line_bytes`` is skipped unheld and reported, and reading goes on.

    Every reader of a whole event log goes through this: a plain iteration of the stream would hold a
    hostile line (a zstd stream of one 1 GB line) whole before anything could look at it.
    """
    buffered = stream if isinstance(stream, io.BufferedReader) else io.BufferedReader(stream, 1 << 16)  # type: ignore[type-var]  # any readinto() stream
    line_no = 0
    while True:
        line = buffered.readline(max_line_bytes + 1)
        if not line:
            return
        line_no += 1
        if len(line) > max_line_bytes and not line.endswith(b"\n"):
            del line
            while True:  # skip the rest of this monster line without holding it
                rest = buffered.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            yield line_no, EventLogError(f"{path}:{line_no}: line longer than {max_line_bytes} bytes; skipped")
        elif not line.isspace():  # blank lines are skipped; isspace() does not copy the (long) line as strip() would
            yield line_no, line


_PROGRESS_PREFIX = spark_events.line_prefix(spark_events.QUERY_PROGRESS)
_WANTED_PREFIXES = (
    b'{"Event":"' + spark_events.STREAMING_PREFIX.encode(),
    spark_events.line_prefix(spark_events.EXECUTOR_ADDED),
    spark_events.line_prefix(spark_events.EXECUTOR_REMOVED),
    spark_events.line_prefix(spark_events.APP_END),
)


def _record(line: bytes, where: str, progress_as_bytes: bool = False) -> Record | EventLogError | None:
    # Spark writes "Event" first: skip the (large, numerous) task, stage and SQL events without parsing
    # them; a last line without its newline is parsed anyway, so a truncated log is reported
    if line.startswith(b'{"Event":"') and not line.startswith(_WANTED_PREFIXES) and line.endswith(b"\n"):
        return None
    # (a line longer than the JSON item bound may hold more items than loads() accepts: it counts them)
    if progress_as_bytes and len(line) <= MAX_JSON_ITEMS and line.startswith(_PROGRESS_PREFIX):
        progress = decode.event_progress(line)
        if progress is not None:  # the hot path: assembled, not through the frozen __init__ (~1.5 µs a line)
            return assemble(Record, {"kind": kinds.PROGRESS, "payload": progress, "source": where, "timestamp": None})
    try:
        obj = loads(line)
    except JsonTooLarge as exc:
        return EventLogError(f"{where}: skipped, {exc}")
    except (ValueError, RecursionError) as exc:
        return EventLogError(f"{where}: not valid JSON ({str(exc)[:80]}); a truncated last line means the log was still being written")
    if not isinstance(obj, dict):
        return EventLogError(f"{where}: a JSON {type(obj).__name__}, not an event object")
    event = obj.get("Event")
    if event is None:
        if "progress" in obj and isinstance(obj["progress"], dict):
            return Record(kinds.PROGRESS, obj["progress"], where)
        if "batchId" in obj and "id" in obj:  # a progress object, as dumped from query.recentProgress
            return Record(kinds.PROGRESS, obj, where)
        return EventLogError(f"{where}: neither a Spark event nor a progress object")
    kind = spark_events.STREAMING_KINDS.get(event)
    if kind == kinds.PROGRESS:
        return Record(kind, obj.get("progress"), where)
    if kind is not None:
        return Record(kind, obj, where)
    if event == spark_events.APP_END:  # the runs still open end with their application (``kinds.APPLICATION_END``)
        return Record(kinds.APPLICATION_END, obj, where, spark_events.application_end(obj)[0])
    if event in (spark_events.EXECUTOR_ADDED, spark_events.EXECUTOR_REMOVED):
        change = RECORD_EXECUTOR_ADDED if event == spark_events.EXECUTOR_ADDED else RECORD_EXECUTOR_REMOVED
        executor, at = spark_events.executor_change(obj)
        return Record(change, executor, where, at)
    return None
