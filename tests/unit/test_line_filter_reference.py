"""The watcher's line filter (one pass from line start to line start, issue 32) against splitting into lines.

Every recorded event log (its first 256 kB) is fed to ``LineFilter`` in pieces of many sizes (a piece ending mid-line, mid-type,
mid-newline) with the watcher's wanted types; the lines handed over, their numbers and types must equal a
plain reading: split into lines, take each line's ``"Event"`` with ``json.loads``, keep the wanted ones. A
copy of one log with JSON whitespace where Spark writes none (the loose lines the filter also reads) and a
stray non-event line is held to the same reading.
"""

from __future__ import annotations

import glob
import io
import json
import os
import random

import pytest

from conftest import FIXTURES
from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.fleet.app_events import DEFAULT_WANTED_EVENTS
from spark_state_observer.fleet.line_filter import LineFilter, line_pattern

PATTERNS = {line_pattern(kind): kind for kind in DEFAULT_WANTED_EVENTS}
HEAD = 1 << 18  # bytes of each log read (whole lines): start-up, batches, tasks, plans; all logs in a few seconds
LOGS = sorted(p for p in glob.glob(os.path.join(FIXTURES, "**", "eventlog_v2_*", "events_*"), recursive=True))


def _head(path: str) -> bytes:
    with io.BufferedReader(open_decompressed(path)) as f:
        data = f.read(HEAD)
    return data[: data.rfind(b"\n") + 1] if len(data) == HEAD else data


def _reference(data: bytes) -> list[tuple[int, str, bytes]]:
    out = []
    for n, line in enumerate(data.splitlines(keepends=True), 1):
        if not line.endswith(b"\n"):
            continue  # not complete: the filter holds it
        try:
            kind = json.loads(line).get("Event")
        except ValueError:
            continue
        if kind in DEFAULT_WANTED_EVENTS:
            out.append((n, kind, line))
    return out


def _filtered(data: bytes, piece: int) -> list[tuple[int, str, bytes]]:
    out: list[tuple[int, str, bytes]] = []
    f = LineFilter(PATTERNS, max_line_bytes=1 << 24)
    for at in range(0, len(data), piece):
        f.feed(data[at : at + piece], lambda n, kind, line: out.append((n, kind, line)) or False)
    return out


def _loose(data: bytes) -> bytes:
    """Every third line with JSON whitespace where Spark writes none, in turn at each place it can be; a non-event line."""
    lines = data.splitlines(keepends=True)
    spaced = (b' {"Event":"', b'{ "Event":"', b'{"Event" :"', b'{"Event": "', b'\t{ "Event" : "')
    for i in range(0, len(lines), 3):
        if lines[i].startswith(b'{"Event":"'):
            lines[i] = spaced[(i // 3) % len(spaced)] + lines[i][len(b'{"Event":"') :]
    lines.insert(len(lines) // 2, b'{"not an event":1}\n')
    return b"".join(lines)


def test_every_recorded_log_is_read() -> None:
    assert len(LOGS) >= 20


@pytest.mark.parametrize("path", LOGS, ids=lambda p: os.path.relpath(p, FIXTURES).split(os.sep)[0])
def test_filter_equals_splitting_into_lines(path: str) -> None:
    data = _head(path)
    expected = _reference(data)
    assert expected
    rng = random.Random(path)
    for piece in (1 << 16, rng.randrange(7, 4000)):
        assert _filtered(data, piece) == expected


def test_loose_lines_equal_splitting_into_lines() -> None:
    data = _loose(_head(LOGS[0]))
    expected = _reference(data)
    assert sum(not line.startswith(b'{"Event":"') for _, _, line in expected) > 3
    for piece in (1 << 16, 13):
        assert _filtered(data, piece) == expected
