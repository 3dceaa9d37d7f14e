"""A hostile corpus through the event-log watcher (issue 23): generated cases, real recorded Spark events.

Every case is hostile input placed next to good applications in the folders the real watcher follows
(``EventLogWatcher``, and ``FleetObserver`` where a scrape or an age is judged): file names that are not
UTF-8, application-start fields with lone surrogates, NUL, escapes and 5 MB names, rolling folders written
faster than they are listed, logs replaced or truncated under the watcher, drivers whose clocks are off,
item and decompression bombs in every codec, symbolic links out of the folders and hostile state files.
Each asserts: no traceback (nothing logged with one, ``poll`` never raises), the good applications
followed with the right batches, the bad input counted, and memory bounded where a case could take much
(peak of Python allocations, measured in-process). The good events are a real recorded run's
(``tests/fixtures/rocksdb_restart``); hostile variants are derived from them, never typed by hand.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import random
import shutil
import socket
import stat
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
import zstandard
from prometheus_client.parser import text_string_to_metric_families

from bench.eventlog_writer import StreamEncoder, recorded_lines, renamed
from conftest import FIXTURES
from spark_state_observer.fleet.app_events import AppEvents
from spark_state_observer.fleet.clock_skew import event_time
from spark_state_observer.fleet.eventlog_watch import EventLogWatcher
from spark_state_observer.fleet.log_names import in_shard
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.model.spark_events import QUERY_PROGRESS
from spark_state_observer.settings import Settings

CASES: Counter[str] = Counter()  # cases run per group; the module's teardown prints and checks the total
PEAKS: dict[str, int] = {}  # peak of Python allocations while the watcher read a group's cases (tracemalloc)
GROUPS = ("names", "shards", "app_start", "lines", "rolling", "replaced", "skew", "bombs", "symlinks", "state")
MIN_CASES = 2500
_STREAMING = b"org.apache.spark.sql.streaming.StreamingQueryListener$"
_KEEP = (
    b"SparkListenerLogStart",
    b"SparkListenerApplicationStart",
    b"SparkListenerApplicationEnd",
    b"SparkListenerExecutorAdded",
    _STREAMING,
)


def _recorded() -> list[bytes]:
    """The events of a real recorded run the watcher parses (task and stage lines left out: they cost time here only)."""
    path = glob.glob(os.path.join(FIXTURES, "rocksdb_restart", "run1", "eventlog", "*", "events_*"))[0]
    return [line for line in recorded_lines(path) if any(k in line[:120] for k in _KEEP)]


BASE = _recorded()
PROGRESS = [line for line in BASE if line.startswith(b'{"Event":"' + _STREAMING + b"QueryProgressEvent")]
GOOD_QUERY = json.loads(PROGRESS[0])["progress"]["id"]
EXPECTED = [json.loads(line)["progress"]["batchId"] for line in PROGRESS]
_HEADER = BASE[: BASE.index(PROGRESS[0])]
_END = [line for line in BASE if line.startswith(b'{"Event":"SparkListenerApplicationEnd"')]
# the newest event time of the recording: written now, it is a driver whose clock is behind by at least its age
RECORDED_AT = max(t for t in (event_time(e.get("Event", ""), e) for e in map(json.loads, BASE)) if t is not None)


# the same run cut to its first two batches: the many-application groups pay for fewer pipeline events
SMALL = _HEADER + PROGRESS[:2] + _END
EXPECTED_SMALL = EXPECTED[:2]


def app_lines(name: str, app_id: str, finished: bool = True, small: bool = False) -> list[bytes]:
    """A recorded application under another name and id (its end event only when ``finished``)."""
    lines = renamed(SMALL if small else BASE, name, app_id)
    return lines if finished else [line for line in lines if not line.startswith(b'{"Event":"SparkListenerApplicationEnd"')]


def encode(lines: list[bytes], codec: str | None) -> bytes:
    """The lines as Spark writes them with ``codec``: one flushed unit per line, the stream closed."""
    enc = StreamEncoder(codec)
    return b"".join(enc.flush([line]) for line in lines) + enc.close()


def suffix(codec: str | None) -> str:
    return "." + codec if codec else ""


def write(path: str | bytes, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def with_start(lines: list[bytes], **fields: Any) -> list[bytes]:
    """The lines with the application-start event's fields replaced (``None`` values drop the field)."""
    out = []
    for line in lines:
        if line.startswith(b'{"Event":"SparkListenerApplicationStart"'):
            event = json.loads(line)
            for key, value in fields.items():
                key = key.replace("_", " ")
                if value is _DROP:
                    event.pop(key, None)
                else:
                    event[key] = value
            line = json.dumps(event, separators=(",", ":")).encode() + b"\n"  # ensure_ascii: surrogates stay escapes
        out.append(line)
    return out


_DROP = object()


class Seen:
    """What a watcher delivered, per log: the good query's batch ids, names, problems, statuses."""

    def __init__(self) -> None:
        self.batches: dict[str, list[int]] = {}
        self.names: dict[str, str] = {}
        self.problems: dict[str, list[str]] = {}
        self.statuses: dict[str, list[str]] = {}
        self.skew: dict[str, float] = {}

    def take(self, found: list[AppEvents]) -> list[AppEvents]:
        for app in found:
            if app.identity is not None:
                self.names[app.log_name] = app.identity.name
            for e in app.events:
                progress = e.progress_object() if e.event_type == QUERY_PROGRESS else None
                if isinstance(progress, dict) and progress.get("id") == GOOD_QUERY and not e.replayed:
                    self.batches.setdefault(app.log_name, []).append(progress["batchId"])
            self.problems.setdefault(app.log_name, []).extend(app.problems)
            self.statuses.setdefault(app.log_name, []).extend(s.status for s in app.status_changes)
            self.skew[app.log_name] = app.clock_skew
        return found

    def poll(self, watcher: EventLogWatcher, times: int = 1) -> None:
        for _ in range(times):
            self.take(watcher.poll())


class Tracebacks(logging.Handler):
    """Every log record that carries a traceback, or says a poll or a pipeline failed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info or "poll failed" in text or "pipeline failed" in text:
            self.records.append(f"{record.name}: {text[:300]}")


@pytest.fixture(autouse=True)
def no_tracebacks() -> Iterator[Tracebacks]:
    handler = Tracebacks()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
    assert not handler.records, handler.records[:5]


@pytest.fixture(scope="module", autouse=True)
def corpus_size() -> Iterator[None]:
    yield
    total = sum(CASES.values())
    print(f"\nhostile watch corpus: {total} cases ({', '.join(f'{g} {CASES[g]}' for g in GROUPS)})")
    print("peak allocations while reading: " + ", ".join(f"{g} {p / (1 << 20):.0f} MB" for g, p in PEAKS.items()))
    if all(CASES[g] for g in GROUPS):
        assert total >= MIN_CASES, f"only {total} cases"


CHECKED = (
    "spark_streaming_application_info",
    "spark_streaming_batches_total",
    "spark_streaming_query_seconds_since_progress",
    "spark_streaming_query_stalled",
    "spark_state_observer_watch",
)


def check_exposition(fleet: FleetObserver) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The fleet's whole exposition (rendering it is what a scrape does), its identity-bearing series parsed back
    as Prometheus would, with every label value checked clean."""
    raw = fleet.exposition()
    text = raw.decode("utf-8")  # strict: a lone surrogate could not even have been encoded
    assert not any(c in text for c in "\x00\x1b\x7f\r"), "a control character reached the exposition"
    # lines end at "\n" only, as Prometheus reads them (str.splitlines would also cut at U+2028 in a label value)
    wanted = "\n".join(line for line in text.split("\n") if line.startswith(CHECKED)) + "\n"
    series = {}
    for family in text_string_to_metric_families(wanted):
        for sample in family.samples:
            for value in sample.labels.values():
                assert len(value) <= 200 and not any((ord(c) < 0x20 and c not in "\t\n") or c == "\x7f" for c in value), value[:80]
                assert not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
            series[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return series


def values(series: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> list[float]:
    return [v for (n, ls), v in series.items() if n == name and all((k, labels[k]) in ls for k in labels)]


# --- file names (and shards over them) -----------------------------------------------------------------


def hostile_names(n: int) -> list[bytes]:
    """Log names (application id and attempt) as bytes: not UTF-8, control characters, markup, the longest a file may have."""
    fixed = [
        b"app-\xff\xfe",
        b"\x80",
        b"app-\xed\xa0\x80-surrogate-as-utf8",
        b"app-\xc3",
        b"app\nnewline",
        b"app\x1b[31mred",
        b"app\ttab",
        b"app\x7fdel",
        b'app"quote',
        b"app\\back",
        b"app{brace}",
        b"app%s%n",
        b"app=label,x=y",
        "app-名前".encode(),
        "app-😀".encode(),
        "app-\u202eevil".encode(),
        b"a" * 240,
        b"\xff" * 200,
        b" ",
        b"app-<script>",
    ]
    rng = random.Random(23)
    out = list(fixed)
    while len(out) < n:
        size = rng.randint(1, 120)
        raw = bytes(rng.choice([rng.randint(1, 255), rng.randint(0x80, 0xFF)]) for _ in range(size))
        raw = raw.replace(b"/", b"_").lstrip(b".")
        if raw:
            out.append(b"h%d-" % len(out) + raw)
    return out[:n]


def test_file_names_that_are_not_utf8_are_followed_labelled_clean_and_sharded(tmp_path) -> None:
    names = hostile_names(320)
    folder = tmp_path / "logs"
    folder.mkdir()
    done = set()
    for i, raw in enumerate(names):
        codec = (None, "zstd")[i % 2]
        path = os.fsencode(str(folder)) + b"/" + raw + suffix(codec).encode()
        write(path, encode(app_lines(f"named-{i}", f"app-named-{i}", small=True), codec))
        done.add(os.fsdecode(raw))
    fleet = FleetObserver([str(folder)], Settings.from_env(labels="cluster=a"), WatchOptions(read_finished_at_start=True), serve=False)
    seen = Seen()
    for _ in range(3):
        fleet.poll_once(on_found=seen.take)
    assert set(seen.batches) == done
    assert all(b == EXPECTED_SMALL for b in seen.batches.values())
    series = check_exposition(fleet)
    assert len(values(series, "spark_streaming_application_info")) == len(names)
    assert sum(values(series, "spark_streaming_batches_total")) == len(names) * len(EXPECTED_SMALL)
    CASES["names"] += len(names)

    # shards: every name in exactly one shard of N, none raising on any poll
    for n in (2, 3, 5):
        owners: Counter[str] = Counter()
        for k in range(n):
            watcher = EventLogWatcher([str(folder)], shard=(k, n), read_finished_at_start=True)
            shard_seen = Seen()
            shard_seen.poll(watcher, 2)
            assert not watcher.counts.problems, watcher.counts.problems
            assert all(in_shard(name, (k, n)) for name in shard_seen.batches)
            owners.update(list(shard_seen.batches))
        assert set(owners) == done and set(owners.values()) == {1}
        CASES["shards"] += len(names)


# --- application-start fields ----------------------------------------------------------------------------

HOSTILE_VALUES: list[Any] = [
    "\ud800",
    "a\udfffb",
    "\udc80\udc81",
    "\x00",
    "nul\x00name",
    "\x1b[31mred\x1b[0m",
    "\n",
    "line\nbreak",
    "tab\t",
    "\x7f",
    "\u202eevil",
    'quote"',
    "back\\slash",
    "}{",
    'label="x",y="z"',
    "<script>alert(1)</script>",
    "x" * 300,
    "é" * 1000,
    "",
    " ",
    "\ufffd",
    "\U0001f600",
    123,
    -1,
    1.5,
    1e308,
    True,
    False,
    None,
    [],
    {},
    ["a"],
    {"a": "b"},
    10**30,
    _DROP,
]
START_FIELDS = ("App_Name", "App_ID", "App_Attempt_ID", "Timestamp", "User")


def test_application_start_fields_are_cleaned_and_bounded_where_identity_is_taken(tmp_path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    logs = []
    for f, field_name in enumerate(START_FIELDS):
        for v, value in enumerate(HOSTILE_VALUES):
            for codec in (None, "zstd"):
                log = f"app-start-{f}-{v}-{codec}"
                write(
                    str(folder / (log + suffix(codec))),
                    encode(with_start(app_lines("field", log, small=True), **{field_name: value}), codec),
                )
                logs.append(log)
    # a 5 MB name, in both places identity comes from: the event and (bounded by the file system) the log name
    big = "n" * (5 << 20)
    write(str(folder / "app-big-name"), encode(with_start(app_lines("x", "x", small=True), App_Name=big, App_ID=big + "\ud800"), None))
    logs.append("app-big-name")
    fleet = FleetObserver([str(folder)], Settings.from_env(labels="cluster=a"), WatchOptions(read_finished_at_start=True), serve=False)
    seen = Seen()
    tracemalloc.start()
    try:
        for _ in range(2):
            fleet.poll_once(on_found=seen.take)
        series = check_exposition(fleet)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    PEAKS["app_start"] = max(PEAKS.get("app_start", 0), peak)
    assert peak < 400 << 20, f"peak {peak >> 20} MB"
    assert set(seen.batches) == set(logs) and all(b == EXPECTED_SMALL for b in seen.batches.values())
    assert all(len(name) <= 200 and "\x00" not in name for name in seen.names.values())
    assert seen.names["app-big-name"] == "n" * 200
    assert len(values(series, "spark_streaming_application_info")) == len(logs)
    CASES["app_start"] += len(logs)


# --- event lines: whitespace variants, item bombs, nesting, bad JSON, in every codec ---------------------


def _progress_obj(k: int = 0) -> dict[str, Any]:
    return json.loads(PROGRESS[k])


def hostile_lines() -> list[tuple[str, bytes, bool]]:
    """(what, line, counted as a good batch): lines derived from a recorded progress event."""
    event = _progress_obj(0)
    other = json.loads(json.dumps(event))
    other["progress"]["id"] = "hostile-query"
    out: list[tuple[str, bytes, bool]] = []
    for sep in ((", ", " : "), (",", " :"), (",", ": "), (",\t", ":\t")):  # JSON whitespace Spark does not write
        out.append((f"spaced {sep!r}", json.dumps(event, separators=sep).encode() + b"\n", True))
    compact = json.dumps(event, separators=(",", ":")).encode()
    out.append(("space after brace", b"{ " + compact[1:] + b"\n", True))
    out.append(("leading blank", b"  " + compact + b"\n", True))
    out.append(("tab after brace", b"{\t" + compact[1:] + b"\n", True))
    head = b'{"Event":"' + _STREAMING + b'QueryProgressEvent","progress":'
    out += [
        ("item bomb", head + b"[" + b"{}," * 600_000 + b"{}]}\n", False),
        ("deep nesting", head + b"[" * 200_000 + b"]" * 200_000 + b"}\n", False),
        ("dict nesting", head + b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"}\n", False),
        ("not json", head + b"{not json}\n", False),
        ("cut line", compact[: len(compact) // 2] + b"\n", False),
        ("nul bytes", compact.replace(b'"batchId"', b'"batch\x00Id"') + b"\n", False),
        ("invalid utf8", compact.replace(b'"name"', b'"n\xff\xfeame"', 1) + b"\n", False),
        ("lone surrogate escapes", json.dumps(other).replace("hostile-query", "\\ud800q").encode() + b"\n", False),
        ("huge batch id", json.dumps({**other, "progress": {**other["progress"], "batchId": 10**40}}).encode() + b"\n", False),
        ("batch id as text", json.dumps({**other, "progress": {**other["progress"], "batchId": "7"}}).encode() + b"\n", False),
        ("progress null", head + b"null}\n", False),
        ("progress list", head + b"[1,2,3]}\n", False),
        ("bad timestamp", json.dumps({**other, "progress": {**other["progress"], "timestamp": "9999-99-99"}}).encode() + b"\n", False),
        (
            "timestamp year 1",
            json.dumps({**other, "progress": {**other["progress"], "timestamp": "0001-01-01T00:00:00Z"}}).encode() + b"\n",
            False,
        ),
        ("huge event type", b'{"Event":"' + b"X" * 100_000 + b'"}\n', False),
        ("loose unknown type", b'{ "Event" : "NotAnEvent", "x": 1}\n', False),
        ("blank", b"\n", False),
        ("only brace", b"{\n", False),
        ("json array line", b"[1,2]\n", False),
        ("number", b"12345\n", False),
    ]
    return out


@pytest.mark.parametrize("codec", [None, "zstd", "lz4", "snappy"])
def test_hostile_event_lines_in_every_codec_are_skipped_and_counted_and_spacing_is_read(tmp_path, codec: str | None) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    variants = hostile_lines()
    logs = []
    for v, (_, line, _) in enumerate(variants):
        for position in range(4):  # before the first progress, after the first, after the third, before the end
            log = f"app-line-{v}-{position}"
            lines = app_lines("lines", log)
            first = next(i for i, x in enumerate(lines) if x.startswith(PROGRESS[0][:90]))
            at = (first, first + 1, first + 3, len(lines) - 1)[position]
            write(str(folder / (log + suffix(codec))), encode(lines[:at] + [line] + lines[at:], codec))
            logs.append(log)
    watcher = EventLogWatcher([str(folder)], read_finished_at_start=True)
    seen = Seen()
    tracemalloc.start()
    try:
        seen.poll(watcher, 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    PEAKS["lines"] = max(PEAKS.get("lines", 0), peak)
    assert peak < 300 << 20, f"peak {peak >> 20} MB"
    # every application's batches, once each: a spaced copy of batch 0 is read, and one of the two is a duplicate
    assert set(seen.batches) == set(logs) and all(seen.batches[log] == EXPECTED for log in logs)
    spaced = sum(1 for _, _, counted in variants if counted)
    assert watcher.counts.events_duplicate == 4 * spaced
    broken = ("item bomb", "deep nesting", "dict nesting", "not json", "cut line", "nul bytes", "invalid utf8")
    assert watcher.counts.problems["bad_json"] + watcher.counts.problems["line_too_long"] == 4 * len(broken)
    assert set(watcher.counts.problems) <= {"bad_json", "line_too_long", "duplicate_name"}
    CASES["lines"] += len(logs)


def test_spaced_event_lines_are_read_as_replay_reads_them(tmp_path) -> None:
    """Every progress event written with JSON spacing (``{"Event" : ...``): watch delivers each batch, as replay does."""
    from spark_state_observer.offline.eventlog import read_records

    folder = tmp_path / "logs"
    folder.mkdir()
    for s, sep in enumerate(((", ", " : "), (",", ": "), (",\t", "\t:\t"))):
        lines = [json.dumps(json.loads(line), separators=sep).encode() + b"\n" for line in app_lines("spaced", f"app-spaced-{s}")]
        for codec in (None, "zstd", "lz4", "snappy"):
            write(str(folder / f"app-spaced-{s}-{codec}{suffix(codec)}"), encode(lines, codec))
            path = str(folder / f"app-spaced-{s}-{codec}{suffix(codec)}")
            replayed = [r.payload["batchId"] for r in read_records([path]) if not isinstance(r, Exception) and r.kind == "progress"]
            assert replayed == EXPECTED
    watcher = EventLogWatcher([str(folder)], read_finished_at_start=True)
    seen = Seen()
    seen.poll(watcher, 2)
    assert len(seen.batches) == 12 and all(b == EXPECTED for b in seen.batches.values())
    assert all(n == "spaced" for n in seen.names.values())
    CASES["lines"] += 12


# --- rolling folders ------------------------------------------------------------------------------------


def rolling_parts(folder: str, app_id: str, lines: list[bytes], per_part: int, codec: str | None) -> list[str]:
    """A rolling log's parts as Spark names them, ``per_part`` lines each (not written yet: path, data)."""
    parts = []
    for i in range(0, len(lines), per_part):
        parts.append((os.path.join(folder, f"events_{i // per_part + 1}_{app_id}{suffix(codec)}"), encode(lines[i : i + per_part], codec)))
    return parts  # type: ignore[return-value]


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_rolling_parts_written_faster_than_listed_are_read_in_order_none_skipped(tmp_path, codec: str | None, monkeypatch) -> None:
    root = tmp_path / "logs"
    root.mkdir()
    apps = []
    for a in range(40):
        app_id = f"app-roll-{a}"
        folder = root / f"eventlog_v2_{app_id}"
        folder.mkdir()
        write(str(folder / f"appstatus_{app_id}.inprogress"), b"")
        apps.append((app_id, str(folder), rolling_parts(str(folder), app_id, app_lines(f"roll-{a}", app_id), 1 + a % 3, codec)))
    watcher = EventLogWatcher([str(root)])
    seen = Seen()
    started = time.time()
    seen.poll(watcher)  # the first listing: what comes after it is new

    # a listing taken while Spark creates parts may hold a later part and not yet the one before it
    real_listdir = os.listdir
    hide: dict[str, str] = {}

    def racing_listdir(path: str) -> list[str]:
        names = real_listdir(path)
        hidden = hide.pop(path, None)
        return [n for n in names if n != hidden]

    monkeypatch.setattr(os, "listdir", racing_listdir)
    step = 0
    while any(parts for _, _, parts in apps):
        for a, (_, folder, parts) in enumerate(apps):
            burst = 1 + (a + step) % 4  # parts created between two polls
            for path, data in parts[:burst]:
                write(path, data)
            if len(parts) > 2 and burst > 1:
                hide[folder] = os.path.basename(parts[burst - 2][0])
            del parts[:burst]
        seen.poll(watcher)
        step += 1
    for app_id, folder, _ in apps:
        os.rename(os.path.join(folder, f"appstatus_{app_id}.inprogress"), os.path.join(folder, f"appstatus_{app_id}"))
    seen.poll(watcher, 2)
    assert {a for a, _, _ in apps} == set(seen.batches)
    assert all(seen.batches[a] == EXPECTED for a, _, _ in apps), {a: b for a, b in seen.batches.items() if b != EXPECTED}
    # the recording's age is each application's skew, counted once each; nothing else is a problem
    age = started - RECORDED_AT
    assert dict(watcher.counts.problems) == ({"clock_skew": len(apps)} if age > 31.0 else {}), watcher.counts.problems
    assert all(seen.skew[a] >= age for a, _, _ in apps) if age > 31.0 else not any(seen.skew.values())
    CASES["rolling"] += len(apps) * step


def test_rolling_folder_names_and_parts_that_are_hostile(tmp_path) -> None:
    root = tmp_path / "logs"
    root.mkdir()
    odd_parts = ["events_0x1_a", "events_-1_a", "events__a", "events_99999999999999999999999_a", "events_1", "events_1_", "events_01_a"]
    good = []
    for i, part in enumerate(odd_parts * 6):
        app_id = f"app-odd-{i}"
        folder = root / f"eventlog_v2_{app_id}"
        folder.mkdir()
        write(str(folder / f"events_1_{app_id}.zstd"), encode(app_lines("odd", app_id, finished=False), "zstd"))
        if i % 3 == 0:
            os.mkdir(folder / part)  # a folder where a part would be
        elif i % 3 == 1:
            write(str(folder / part), b"\x00\xff garbage")
        else:
            os.mkfifo(folder / part)
        write(str(folder / f"appstatus_{app_id}.inprogress"), b"")
        good.append(app_id)
    (root / "eventlog_v2_").mkdir()
    (root / "eventlog_v2_empty").mkdir()
    write(str(root / "eventlog_v2_file"), b"not a folder")
    watcher = EventLogWatcher([str(root)])
    seen = Seen()
    done = []

    def polls() -> None:
        seen.poll(watcher, 3)
        done.append(True)

    import threading

    t = threading.Thread(target=polls, daemon=True)
    t.start()
    t.join(120)
    assert done, "a poll blocked"
    for app_id in good:
        assert seen.batches.get(app_id, []) == EXPECTED[: len(seen.batches.get(app_id, []))]
    assert sum(1 for a in good if seen.batches.get(a) == EXPECTED) >= len(good) * 2 // 3
    CASES["rolling"] += len(good) + 3


# --- replaced and truncated logs ------------------------------------------------------------------------


def _replace(how: str, path: str, data: bytes, tmp: str) -> None:
    if how == "renamed over":
        write(tmp, data)
        os.replace(tmp, path)
    elif how == "copied in place":
        with open(path, "r+b") as f:
            f.write(data)
    elif how == "truncated and rewritten":
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(data)
    elif how == "truncated to nothing":
        with open(path, "r+b") as f:
            f.truncate(0)
    elif how == "truncated to half":
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)


REPLACE_WAYS = ("renamed over", "copied in place", "truncated and rewritten", "truncated to nothing", "truncated to half")


@pytest.mark.parametrize("codec", [None, "zstd", "lz4", "snappy"])
def test_replaced_and_truncated_logs_are_read_again_from_their_start(tmp_path, codec: str | None) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    cases = []
    for w, how in enumerate(REPLACE_WAYS):
        for cut in (3, 5, 6, 8):  # lines of the first application read before the replacement
            for rolling in (False, True):
                log = f"app-repl-{w}-{cut}-{int(rolling)}"
                first = app_lines("first", log, finished=False)[:cut]
                if rolling:
                    parent = folder / f"eventlog_v2_{log}"
                    parent.mkdir()
                    write(str(parent / f"appstatus_{log}.inprogress"), b"")
                    path = str(parent / f"events_1_{log}{suffix(codec)}")
                else:
                    path = str(folder / f"{log}{suffix(codec)}.inprogress")
                write(path, encode(first, codec))  # closed: lz4 writes nothing before a full block otherwise
                cases.append((log, how, path, sum(1 for line in first if line.startswith(PROGRESS[0][:90]))))
    watcher = EventLogWatcher([str(folder)])
    seen = Seen()
    seen.poll(watcher)
    first_seen = {log: list(seen.batches.get(log, [])) for log, _, _, _ in cases}
    for log, how, path, progress in cases:
        assert first_seen[log] == EXPECTED[:progress]
        _replace(how, path, encode(app_lines("second", log + "-b"), codec), str(folder / ".tmp"))
    seen.poll(watcher, 3)
    for log, how, _, _ in cases:
        if how.startswith("truncated to"):
            assert any("replaced or truncated" in p for p in seen.problems[log]), (log, seen.problems[log])
            continue
        # another application's batches, credited to it (its name), never to the first after its old offset
        assert seen.names[log] == "second", (log, how)
        assert seen.batches[log] == first_seen[log] + EXPECTED, (log, how, seen.batches[log])
        assert "forgotten" in seen.statuses[log]
    assert watcher.counts.problems["replaced"] == len(cases)  # each replacement counted once
    CASES["replaced"] += len(cases)


# --- clock skew -------------------------------------------------------------------------------------------


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def retimed(line: bytes, skew: float) -> bytes:
    """A recorded streaming event as a driver whose clock is ``skew`` seconds behind would log it now."""
    event = json.loads(line)
    progress = event.get("progress")
    if isinstance(progress, dict):
        progress["timestamp"] = _iso(time.time() - skew - progress.get("batchDuration", 0) / 1000.0)
    elif "timestamp" in event:
        event["timestamp"] = _iso(time.time() - skew)
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


SKEW_CODECS = (None, "zstd", "snappy")  # lz4 logs show nothing before a full 32 KiB block: no live age to judge
SKEWS = (-3600.0, -600.0, -120.0, 0.0, 10.0, -10.0, 120.0, 600.0, 3600.0, 7200.0)


def test_clock_skew_is_measured_counted_and_ages_are_judged_on_the_drivers_clock(tmp_path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    fleet = FleetObserver([str(folder)], Settings.from_env(), WatchOptions(poll_interval=1.0), serve=False)
    seen = Seen()
    fleet.poll_once(on_found=seen.take)
    logs = []
    for s, skew in enumerate(SKEWS):
        for codec in SKEW_CODECS:
            log = f"app-skew-{s}-{codec}"
            path = str(folder / f"{log}{suffix(codec)}.inprogress")
            enc = StreamEncoder(codec)
            header = renamed(_HEADER, f"skew-{s}-{codec}", log)
            write(path, b"".join(enc.flush([retimed(line, skew) if _STREAMING in line[:80] else line]) for line in header))
            logs.append((log, path, enc, skew))
    fleet.poll_once(on_found=seen.take)
    for k in range(len(PROGRESS)):  # a batch a poll on every driver
        for _, path, enc, skew in logs:
            with open(path, "ab") as f:
                f.write(enc.flush([retimed(PROGRESS[k], skew)]))
        fleet.poll_once(on_found=seen.take)
    series = check_exposition(fleet)
    tolerance = 30.0 + 1.0
    for log, _, _, skew in logs:
        assert seen.batches[log] == EXPECTED
        measured = seen.skew[log]
        if abs(skew) > tolerance:
            assert abs(measured - skew) < 15, (log, measured, skew)  # the smallest delay of a poll on a loaded machine
        else:
            assert measured == 0.0, (log, measured)
    for s in range(len(SKEWS)):
        for codec in SKEW_CODECS:
            app = f"skew-{s}-{codec}"
            since = values(series, "spark_streaming_query_seconds_since_progress", app=app)
            stalled = values(series, "spark_streaming_query_stalled", app=app)
            assert since and max(since) < 60, (app, since)  # 120 s to 2 h uncorrected
            assert stalled and max(stalled) == 0, (app, stalled)
    assert (
        values(series, "spark_state_observer_watch_clock_skew_seconds")
        and abs(values(series, "spark_state_observer_watch_clock_skew_seconds")[0] - 7200) < 5
    )
    assert fleet.watcher.counts.problems["clock_skew"] == len(SKEW_CODECS) * sum(1 for s in SKEWS if abs(s) > tolerance)
    fleet.stop()
    CASES["skew"] += len(logs)


# --- item and decompression bombs ----------------------------------------------------------------------


@pytest.mark.slow
def test_bombs_in_every_codec_stay_bounded_and_are_counted(tmp_path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    head = b'{"Event":"' + _STREAMING + b'QueryProgressEvent","progress":'
    # (what, start, filler, times, end): the bomb line is start + filler * times + end
    bombs = [
        ("item bomb 25 MB", head + b"[", b"{}," * 1024, (25 << 20) // 3072, b"{}]}\n"),
        ("nesting 2 MB", head, b"[" * 1024, 1024, b"]" * (1 << 20) + b"}\n"),
        ("zeros 100 MB", b"", b"\x00" * (1 << 20), 100, b""),
        ("one long line 65 MB", head + b'"', b"a" * (1 << 20), 65, b'"}\n'),
    ]
    logs = {}
    for b, (what, start, filler, times, end) in enumerate(bombs):
        for codec in ("zstd", "lz4", "snappy", None, "lzf"):
            if codec != "zstd" and len(filler) * times > 30 << 20:
                continue  # the other codecs cannot hold a bomb: their units are bounded, a file as large as its content
            log = f"app-bomb-{b}-{codec}"
            lines = app_lines("bomb", log)
            path = str(folder / f"{log}{suffix(codec)}")
            if codec == "zstd":  # compressed as it is produced: the test never holds the decoded bomb either
                with open(path, "wb") as f:
                    f.write(encode(lines[:4], codec))
                    stream = zstandard.ZstdCompressor(level=1).compressobj()
                    f.write(stream.compress(start))
                    for _ in range(times):
                        f.write(stream.compress(filler))
                    f.write(stream.compress(end) + stream.flush())
                    f.write(encode(lines[4:], codec))
            else:
                write(path, encode([*lines[:4], start + filler * times + end, *lines[4:]], codec if codec != "lzf" else None))
            logs[log] = (what, codec)
    watcher = EventLogWatcher([str(folder)], read_finished_at_start=True)
    seen = Seen()
    tracemalloc.start()
    try:
        for _ in range(200):
            seen.poll(watcher)
            if not watcher.backlog:
                break
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    PEAKS["bombs"] = max(PEAKS.get("bombs", 0), peak)
    assert peak < 260 << 20, f"peak {peak >> 20} MB"
    for log, (what, codec) in logs.items():
        got = seen.batches.get(log, [])
        assert seen.problems[log], (log, what)  # every bomb counted
        if codec == "lzf":
            assert not got and any("lzf" in p for p in seen.problems[log])
        elif any("decompression bomb" in p for p in seen.problems[log]):  # the rest of that file is skipped
            assert codec == "zstd" and got == EXPECTED[: len(got)], (log, got)
        else:
            assert got == EXPECTED, (log, got)
    assert any("decompression bomb" in p for p in seen.problems["app-bomb-2-zstd"])
    counted = watcher.counts.problems
    assert counted["line_too_long"] + counted["bad_json"] >= 6 and counted["inflated"] >= 1
    CASES["bombs"] += len(logs)


# --- symbolic links -------------------------------------------------------------------------------------


def test_symbolic_links_are_followed_only_inside_the_watched_folders(tmp_path) -> None:
    watched, outside = tmp_path / "logs", tmp_path / "outside"
    watched.mkdir()
    outside.mkdir()
    inside_target = watched / "sub"
    inside_target.mkdir()
    cases: list[tuple[str, bool]] = []  # (log name, to be followed)
    for i in range(10):
        write(str(outside / f"app-out-{i}"), encode(app_lines("outside", f"app-out-{i}", small=True), None))
        os.symlink(outside / f"app-out-{i}", watched / f"app-link-out-{i}")
        cases.append((f"app-link-out-{i}", False))
        write(str(inside_target / f"app-in-{i}"), encode(app_lines("inside", f"app-in-{i}", small=True), None))
        os.symlink(inside_target / f"app-in-{i}", watched / f"app-link-in-{i}")
        cases.append((f"app-link-in-{i}", True))
        os.symlink("/etc/passwd", watched / f"app-passwd-{i}")
        cases.append((f"app-passwd-{i}", False))
        os.symlink("/dev/zero", watched / f"app-zero-{i}")
        cases.append((f"app-zero-{i}", False))
        rolling = outside / f"eventlog_v2_app-dir-{i}"
        rolling.mkdir()
        write(str(rolling / f"events_1_app-dir-{i}"), encode(app_lines("dir", f"app-dir-{i}", small=True), None))
        write(str(rolling / f"appstatus_app-dir-{i}"), b"")
        os.symlink(rolling, watched / f"eventlog_v2_app-dirlink-{i}")
        cases.append((f"app-dirlink-{i}", False))
        part_dir = watched / f"eventlog_v2_app-partlink-{i}"
        part_dir.mkdir()
        os.symlink(outside / f"app-out-{i}", part_dir / f"events_1_app-partlink-{i}")
        write(str(part_dir / f"appstatus_app-partlink-{i}"), b"")
        cases.append((f"app-partlink-{i}", False))
    for follow in (False, True):
        watcher = EventLogWatcher([str(watched)], read_finished_at_start=True, follow_symlinks=follow)
        seen = Seen()
        seen.poll(watcher, 2)
        for log, allowed in cases:
            if allowed or (follow and ("-out-" in log or "dirlink" in log or "partlink" in log)):
                assert seen.batches.get(log) == EXPECTED_SMALL, (follow, log, seen.batches.get(log))
            else:
                assert not seen.batches.get(log), (follow, log)
        if not follow:
            assert watcher.counts.problems["symlink"] >= 4 * 10
        CASES["symlinks"] += len(cases)


# --- hostile state files --------------------------------------------------------------------------------


def _state_cases(folder: str, good_state: bytes) -> Iterator[tuple[str, Callable[[str], None]]]:
    def data(blob: bytes) -> Callable[[str], None]:
        return lambda path: write(path, blob)

    yield "a million [", data(b"[" * 1_000_000)
    yield "a million {", data(b'{"a":' * 300_000)
    yield "items bomb", data(b"[" + b"{}," * 2_000_000 + b"{}]")
    yield "larger than the bound", data(b" " * (65 << 20))
    yield "empty", data(b"")
    yield "not utf8", data(b"\xff\xfe\x00garbage")
    yield "/dev/zero", lambda path: os.symlink("/dev/zero", path)
    yield "/dev/null", lambda path: os.symlink("/dev/null", path)
    yield "/dev/urandom", lambda path: os.symlink("/dev/urandom", path)
    yield "fifo", lambda path: os.mkfifo(path)
    yield "directory", lambda path: os.mkdir(path)
    yield "symlink loop", lambda path: os.symlink(path, path)
    yield "dangling", lambda path: os.symlink(path + ".nowhere", path)

    def sock(path: str) -> None:
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        s.close()

    if len(os.path.join(folder, "state-x")) < 100:
        yield "socket", sock
    for shape in (b"[]", b"1", b'"x"', b"null", b'{"version":1}', b'{"version":1,"apps":[]}', b'{"version":2,"apps":{}}'):
        yield f"shape {shape!r}", data(shape)
    yield "done not a list", data(b'{"version":1,"apps":{},"done":5}')
    yield "done of numbers", data(b'{"version":1,"apps":{},"done":[1,2,{}]}')
    rng = random.Random(7)
    for n in range(60):
        yield f"garbage {n}", data(bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 400))))
    for n in range(1, 80):
        yield f"truncated at {n}/80", data(good_state[: len(good_state) * n // 80])
    state = json.loads(good_state)
    leaves = list(_leaves(state))
    for path_keys in leaves:
        for value in (None, -1, 10**30, "x", [], {}, "../../../../etc/passwd", 1.5, True, "\ud800", "\x00", "n" * 100_000):
            mutated = json.loads(good_state)
            _set(mutated, path_keys, value)
            yield f"{'/'.join(map(str, path_keys))} = {str(value)[:20]!r}", data(json.dumps(mutated).encode())


def _leaves(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, prefix + (k,))
    elif isinstance(obj, list) and obj:
        for i, v in enumerate(obj[:2]):
            yield from _leaves(v, prefix + (i,))
    else:
        yield prefix


def _set(obj: Any, keys: tuple[Any, ...], value: Any) -> None:
    for k in keys[:-1]:
        obj = obj[k]
    obj[keys[-1]] = value


def test_hostile_state_files_never_hang_crash_or_lose_the_good_applications(tmp_path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for codec in (None, "zstd"):
        write(
            str(logs / f"app-state-{codec}{suffix(codec)}.inprogress"),
            encode(app_lines("state", f"app-state-{codec}", finished=False, small=True), codec),
        )
    rolling = logs / "eventlog_v2_app-state-roll"
    rolling.mkdir()
    write(str(rolling / "events_1_app-state-roll.zstd"), encode(app_lines("state", "app-state-roll", finished=False, small=True), "zstd"))
    write(str(rolling / "appstatus_app-state-roll.inprogress"), b"")
    good = {"app-state-None", "app-state-zstd", "app-state-roll"}
    state_dir = tmp_path / "st"
    state_dir.mkdir()
    first = EventLogWatcher([str(logs)], state_path=str(state_dir / "good"))
    first.poll()
    first.commit()
    good_state = (state_dir / "good").read_bytes()
    assert set(json.loads(good_state)["apps"]) == good
    n = 0
    tracemalloc.start()
    try:
        for what, make in _state_cases(str(state_dir), good_state):
            path = str(state_dir / f"state-{n}")
            make(path)
            started = time.monotonic()
            watcher = EventLogWatcher([str(logs)], state_path=path, replay_on_resume=True)
            seen = Seen()
            seen.poll(watcher, 2)
            assert time.monotonic() - started < 20, what
            for log in good:  # followed: read again from the start, or resumed where the (valid) state says
                got = seen.batches.get(log, [])
                assert got == EXPECTED_SMALL[len(EXPECTED_SMALL) - len(got) :] or got == EXPECTED_SMALL[: len(got)], (what, log, got)
            if what.startswith(("a million", "items", "larger", "empty", "not utf8", "/dev", "fifo", "directory", "socket", "garbage")):
                assert watcher.counts.problems["state_file"] >= 1, what
                assert all(seen.batches.get(log) == EXPECTED_SMALL for log in good), what
            n += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    PEAKS["state"] = max(PEAKS.get("state", 0), peak)
    assert peak < 300 << 20, f"peak {peak >> 20} MB"
    CASES["state"] += n


def test_a_state_path_that_is_not_a_file_is_reported_on_save(tmp_path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    write(str(logs / "app-save.inprogress"), encode(app_lines("save", "app-save", finished=False, small=True), None))
    (tmp_path / "state").mkdir()
    watcher = EventLogWatcher([str(logs)], state_path=str(tmp_path / "state"))
    seen = Seen()
    seen.poll(watcher, 2)
    watcher.commit()
    assert seen.batches["app-save"] == EXPECTED_SMALL
    assert watcher.counts.problems["state_file"] >= 2 and stat.S_ISDIR(os.stat(tmp_path / "state").st_mode)
    shutil.rmtree(tmp_path / "state")
    CASES["state"] += 1
