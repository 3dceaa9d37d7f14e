"""The watcher's progress lines as bytes (issue 32, ``progress_as_bytes``) against parsing them with ``json.loads``.

Every progress line of every recorded event log, and hostile variants of recorded ones (``NaN``, lone surrogates,
bytes that are not UTF-8, a second ``progress`` key, a ``progress`` that is not an object, numbers out of range,
deep nesting, ids of other types), read both ways: where the fast path takes a line, its object's bytes parse to the
very object ``json.loads`` gives, and the guard's fields and the event's time are the same; a line it declines
goes the ``json.loads`` way. Then each recorded log (its first ``HEAD_LINES``), written a piece at a time with a batch logged twice, are
followed by two watchers, one each way: the same events, in the same order, with the same times, duplicates and problems.
"""

from __future__ import annotations

import glob
import json
import os
import re

import pytest

from bench.eventlog_writer import ProgressiveLog, recorded_lines
from conftest import FIXTURES
from spark_state_observer.fleet.app_events import AppEvents
from spark_state_observer.fleet.clock_skew import event_time
from spark_state_observer.fleet.event_lines import progress_fields
from spark_state_observer.fleet.eventlog_watch import EventLogWatcher
from spark_state_observer.model.spark_events import QUERY_PROGRESS, line_prefix

LOGS = sorted(glob.glob(os.path.join(FIXTURES, "**", "eventlog_v2_*", "events_*"), recursive=True))
PREFIX = line_prefix(QUERY_PROGRESS)
HEAD_LINES = 1_000  # lines of each log followed (start-up, batches, tasks, plans): all logs within the CI budget


def _progress_lines() -> list[bytes]:
    return [line for path in LOGS for line in recorded_lines(path) if line.startswith(PREFIX)]


def _variants(line: bytes) -> list[bytes]:
    """Hostile versions of one recorded progress line."""
    obj = json.loads(line)
    p = obj["progress"]
    body = json.dumps(p, separators=(",", ":")).encode()
    head = PREFIX + b',"progress":'
    swaps = [
        (b'"batchId":', b'"batchId":NaN,"x":'),
        (b'"batchId":', b'"batchId":1e400,"x":'),
        (b'"batchId":', b'"batchId":123456789012345678901234567890,"x":'),
        (b'"batchId":', b'"batchId":"7","x":'),
        (b'"batchId":', b'"batchId":7.0,"x":'),
        (b'"id":', b'"id":["a"],"x":'),
        (b'"id":', b'"id":"\\ud800\\u0000x","x":'),
        (b'"id":', '"id":"q-名前","x":'.encode()),
        (b'"id":', b'"id":"\xff\xfe","x":'),
        (b'"timestamp":', b'"timestamp":17,"x":'),
        (b'"batchDuration":', b'"batchDuration":-5,"x":'),
        (b'"batchDuration":', b'"batchDuration":true,"x":'),
        (b'"name":', b'"name":' + b"[" * 900 + b"]" * 900 + b',"y":'),
        (b'"name":', b'"name":' + b"[" * 5000 + b"]" * 5000 + b',"y":'),
    ]
    out = [line.replace(old, new, 1) for old, new in swaps if old in line]
    out += [
        head + b"5}\n",
        head + b"null}\n",
        head + b'{"id":"a","batchId":1},"progress":' + body + b"}\n",  # a second key: the last one counts
        head + body + b',"progress":{"id":"a","batchId":1}}\n',
        head + body + b',"Event":"SparkListenerJobStart"}\n',  # a second "Event" key
        head + body + b"}  \n",
        head + body + b"} x\n",
        head + b"{}}\n",
        line[:-2] + b"\n",  # cut short
        line.replace(b"\n", b"\r\n"),
    ]
    return out


def _loads_way(line: bytes) -> tuple[object, ...] | None:
    """What the ``json.loads`` path reads of a line: its progress object and the guard's fields, or None if not an object."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    p = obj.get("progress") if isinstance(obj, dict) else None
    if not isinstance(p, dict):
        return None
    return repr(p), p.get("id"), p.get("runId"), p.get("batchId"), event_time(QUERY_PROGRESS, obj)


def _bytes_way(line: bytes) -> tuple[object, ...] | None:
    fields = progress_fields(line)
    if fields is None:
        return None
    raw, guard = fields
    at = event_time(QUERY_PROGRESS, {"progress": {"timestamp": guard.timestamp, "batchDuration": guard.batchDuration}})
    return repr(json.loads(raw)), guard.id, guard.runId, guard.batchId, at


def without_clock_gap(problems: list[str]) -> list[str]:
    """Problems with the seconds a log's times lag the wall clock masked: the two watchers read the clock a
    moment apart, so that figure may differ by a second between them (its wording and place may not)."""
    return [re.sub(r"are \d+ s behind", "are N s behind", p) for p in problems]


def test_every_progress_line_and_its_hostile_variants_read_alike() -> None:
    lines = _progress_lines()
    assert len(lines) >= 500
    declined = 0
    for line in lines:
        expected = _loads_way(line)
        assert expected is not None
        assert _bytes_way(line) == expected, line[:200]
    for line in _variants(lines[0]) + _variants(lines[-1]):
        got = _bytes_way(line)
        if got is None:
            declined += 1  # the json.loads path reads (or reports) it, as before
        else:
            assert repr(got) == repr(_loads_way(line)), line[:200]
    assert declined >= 10


class _Seen:
    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []
        self.problems: list[str] = []

    def take(self, found: list[AppEvents]) -> None:
        for app in found:
            self.problems.extend(app.problems)
            for e in app.events:
                if e.event_type != QUERY_PROGRESS:
                    self.events.append((e.event_type, e.source, e.replayed, repr(e.data)))
                    continue
                at = e.logged_at if e.progress is not None else event_time(e.event_type, e.data)
                self.events.append((e.event_type, e.source, e.replayed, repr(e.progress_object()), at))


@pytest.mark.parametrize("path", LOGS, ids=lambda p: os.path.relpath(p, FIXTURES).split(os.sep)[0])
def test_watchers_deliver_the_same_events_either_way(tmp_path, path: str) -> None:
    lines = recorded_lines(path)[:HEAD_LINES]
    progress = [i for i, line in enumerate(lines) if line.startswith(PREFIX)]
    if progress:  # a batch logged twice: the guard drops it the same way
        lines.insert(progress[len(progress) // 2] + 1, lines[progress[len(progress) // 2]])
    log = ProgressiveLog(str(tmp_path), "app-ref", "zstd", max_file_bytes=200_000)
    watchers = [EventLogWatcher([str(tmp_path)], grace_seconds=3600, progress_as_bytes=fast) for fast in (True, False)]
    seen = [_Seen(), _Seen()]
    for step, _ in enumerate(log.steps(lines, split=True)):
        if step % 97 == 0:
            for w, s in zip(watchers, seen, strict=True):
                s.take(w.poll())
    log.finish()
    for w, s in zip(watchers, seen, strict=True):
        s.take(w.poll())
    fast, slow = seen
    assert fast.events == slow.events
    assert without_clock_gap(fast.problems) == without_clock_gap(slow.problems)
    assert sum(1 for e in fast.events if e[0] == QUERY_PROGRESS) == len(progress)
    counts = [(w.counts.events_parsed, w.counts.events_delivered, w.counts.events_duplicate, dict(w.counts.problems)) for w in watchers]
    assert counts[0] == counts[1]
    assert watchers[0].counts.events_duplicate == (1 if progress else 0)
