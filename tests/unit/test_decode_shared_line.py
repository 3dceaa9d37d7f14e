"""The shared reading of a progress line (``spark_state_observer.model.decode``'s one envelope and one typed pass per line) against
the reference readings, on every progress line of every recorded event log and on variants of the last one.

A replay hands each progress line to placement's ids (``event_progress_ids``), the record reader
(``event_progress``), the replay's clock (``stamp_fields``) and the decoder (``progress``), in that order, and
they now share one decode: each must answer what ``json.loads`` and the reference parser answer.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
from typing import Any

import msgspec
from test_decode import _placement_view
from test_hostile import PROGRESS_EVENT

from conftest import FIXTURES
from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.model import decode
from spark_state_observer.model.parse import _FAST_RULES, parse_progress


def _recorded_lines() -> list[bytes]:
    """Every progress line of every recorded event log, as Spark wrote it."""
    lines: list[bytes] = []
    prefix = b'{"Event":"' + PROGRESS_EVENT.encode() + b'"'
    for path in sorted(glob.glob(os.path.join(FIXTURES, "**", "eventlog", "**", "events_*"), recursive=True)):
        with open_decompressed(path) as f:
            lines.extend(line for line in f.read().splitlines(keepends=True) if line.startswith(prefix))
    return lines


LINES = _recorded_lines()


def _variants(line: bytes) -> list[bytes]:
    """The last recorded line with values the typed decode refuses (or reads otherwise) where the ids or the time do not."""
    text = line.decode()
    return [
        text.replace('"batchDuration":', '"batchDuration":true,"x":', 1).encode(),
        text.replace('"batchDuration":', '"batchDuration":"7","x":', 1).encode(),
        text.replace('"timestamp":', '"timestamp":17,"x":', 1).encode(),
        text.replace('"operatorName":"', '"operatorName":5,"x":"', 1).encode(),
        text.replace('"stateOperators":[', '"stateOperators":[7,', 1).encode(),
        text.replace('"numRowsTotal":', '"numRowsTotal":"many","x":', 1).encode(),
        text.rstrip()[:-1].encode() + b',"Event":"SparkListenerTaskEnd"}\n',
        text.rstrip()[:-1].encode() + b',"Event":5}\n',
        text.rstrip()[:-2].encode(),
        # the one source's rates, which the query's (omitted in event logs) are summed from: zeros of both signs
        # (the sum turns -0.0 into 0.0), one already on the 0.1 grid, one rounded half-up, one beyond rounding
        _rates(text, "-0.0", "0"),
        _rates(text, "0.0", "-0.0"),
        _rates(text, "12.3", "0.05"),
        _rates(text, "1e300", "-7.25"),
    ]


def _rates(text: str, inputs: str, processed: str) -> bytes:
    """``text`` with its (first, the source's) input and processed rates set to the JSON numbers given."""
    text = re.sub(r'"inputRowsPerSecond":[^,}]*', f'"inputRowsPerSecond":{inputs}', text, count=1)
    return re.sub(r'"processedRowsPerSecond":[^,}]*', f'"processedRowsPerSecond":{processed}', text, count=1).encode()


def _rates_of(p: Any) -> str:
    return repr([(x.input_rows_per_second, x.processed_rows_per_second) for x in (p, *p.sources)])


def _cut_variants(line: bytes) -> list[bytes]:
    """A recorded line as Spark writes it, changed where cutting its ``progress`` object out by position would go
    wrong: the cut must decode typed, or give way to the envelope's reading."""
    head, body = line[: line.index(b'"progress":') + 11], line[line.index(b'"progress":') + 11 :].rstrip(b"\n")
    obj = body[:-1]  # the ``progress`` object
    return [
        line.rstrip(b"\n"),  # the last line of a log still being written: no newline
        line.rstrip(b"\n") + b"\r\n",
        head + obj + b" }\n",
        head + b" " + obj + b"}\n",
        head + obj + b',"x":{}}\n',  # another key after the object: the cut is no one object
        head + obj + b',"Event":"SparkListenerTaskEnd"}\n',
        head + obj + b"}}\n",  # one brace too many: not JSON
        head + obj[:-1] + b"}\n",  # one too few
        head + b'{"id":"a","runId":"b","batchId":1},"p":{"x":1}}\n',  # two objects that together end in }}
        head + b"[" + obj + b"]}\n",
        line.replace(b'"Event":"', b'"Event" :"', 1),
    ]


def _fields(p: Any) -> dict[str, Any]:
    return {f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.compare}


def test_every_recorded_progress_line_reads_the_same_through_the_shared_decode() -> None:
    assert len(LINES) >= 300
    lines = LINES + _variants(LINES[-1])
    typed = 0
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        ids = decode.event_progress_ids(line)  # placement's tap reads the line first
        raw = decode.event_progress(line)
        if obj is None:
            assert ids is None and raw is None
            continue
        if ids is not None:
            assert _placement_view(ids) == _placement_view(obj)
        assert raw is not None and json.loads(raw) == obj["progress"]
        stamp, duration = decode.stamp_fields(raw)
        progress = obj["progress"]
        assert stamp == (progress.get("timestamp") if isinstance(progress.get("timestamp"), str) else None)
        expected = progress.get("batchDuration")  # a number may come as a float: the same time
        assert duration == expected and (type(duration) is bool) == (type(expected) is bool)
        model = decode.progress(raw, _FAST_RULES)
        again = decode.progress(raw, _FAST_RULES)  # the shared struct went to the first: the second decodes anew
        if model is None:
            assert again is None
            continue
        typed += 1
        reference = parse_progress(progress)
        assert _fields(model) == _fields(reference) == _fields(again)
        assert _rates_of(model) == _rates_of(reference)  # as text: -0.0 == 0.0, but they print apart
        assert model.raw_text == raw.decode() and dict(model.raw) == progress
        for mine, other in zip(model.operators, again.operators):  # no two models share a decoded dict
            assert mine.custom is not other.custom or not mine.custom
    assert typed >= len(LINES)


def test_the_watchers_own_copy_of_the_progress_bytes_shares_the_decode_of_its_line() -> None:
    """The watcher cuts its own copy of the ``progress`` object from the line placement read: equal bytes, the same model."""
    for line in LINES:
        assert decode.event_progress_ids(line) is not None
        raw = decode.event_progress(line)
        assert raw is not None
        copy = bytes(bytearray(raw))  # as the watcher's own cut: the same bytes, another object
        assert copy is not raw
        stamp, _ = decode.stamp_fields(copy)
        model = decode.progress(copy, _FAST_RULES)
        reference = parse_progress(json.loads(raw))
        assert model is not None and _fields(model) == _fields(reference) and stamp == json.loads(raw)["timestamp"]


def test_a_line_cut_by_position_reads_as_its_envelope_decode() -> None:
    """The cut of a line as Spark writes it (``_cut``, proven by its typed decode) against the envelope decode it
    spares, on every recorded progress line and on lines where cutting by position would go wrong."""
    cut = 0
    for line in LINES + _cut_variants(LINES[-1]) + _cut_variants(LINES[0]):
        shared = decode._split(bytes(line))  # a fresh object: never the line read last
        try:
            envelope = decode._LINE.decode(line)
            expected: tuple[Any, bytes | None] = (envelope.Event, bytes(envelope.progress))
        except Exception:
            expected = (msgspec.UNSET, None)
        assert (shared.event, shared.raw) == expected
        if shared.raw is None:
            continue
        try:
            typed: Any = decode._PROGRESS.decode(shared.raw)
        except Exception:
            typed = None
        doc = decode._typed(shared)
        assert doc == typed
        cut += decode._cut(line) == shared.raw and doc is not None
    assert cut >= len(LINES) + 2  # every recorded line was cut, and the variants without a newline too
