"""A hostile corpus, built by code, through every entry point: the live worker, replay, inspect, history, HTTP.

Issue 12's attack, each defect a test here: numbers and types that broke parsing (and killed the
worker), lone surrogates that broke every scrape and history flush, names that grew the exposition
without limit, checkpoint and event-log files that hung, exploded or gave tracebacks, and a history that
deleted what it had just written, lost flushes silently and opened the wrong file. Every input is made
by the code below from the recorded real runs (bombs included, nothing binary is committed).

The default run takes a few hundred cases; ``-m slow`` runs the corpus of more than 10,000 cases and the
peak-memory figures per input class (each in its own process: ``resource.getrusage``), printed with
``-s``: ``python -m pytest tests/unit/test_hostile.py -m slow -s``.
"""

from __future__ import annotations

import copy
import io
import json
import os
import random
import shutil
import socket
import sqlite3
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterator

import lz4.block
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from recorded_progress import recorded_at
from test_inspector import ROCKSDB, checkpoint, operator_metadata, rocksdb_zip, write

from conftest import REQUIRE_REAL, ROOT, eventlog_dir, fixture_runs, free_port, progress_lines
from spark_state_observer.capture.codecs import _snappy_chunks
from spark_state_observer.capture.listener import _JsonBridge
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.history.loaders import load_batches, load_queries
from spark_state_observer.history.sink import HistorySink
from spark_state_observer.history.store import HistoryStore, connect
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.labels import DEFAULT_LIMITS
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.model.parse import MalformedEvent, parse_event
from spark_state_observer.offline.checkpoint import inspect_checkpoint
from spark_state_observer.offline.checkpoint.render import render_text
from spark_state_observer.offline.eventlog import EventLogError, Record, read_records
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

REAL: list[dict[str, Any]] = [p for run in fixture_runs("rocksdb_restart") for p in progress_lines(run)]
BASE = REAL[-1]
AT = recorded_at(BASE)  # "now" for the events played back live: the recording's time, not today's
PROGRESS_EVENT = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"
MiB = 1 << 20
LINE_LIMIT = 64 * MiB  # the configured line limit (the default) for the memory figures
SLOW = pytest.mark.slow


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


# values that broke (or could break) the model: numbers beyond a double, wrong types, non-finite, odd text
HOSTILE_VALUES: list[Any] = [
    10**400,
    -(10**400),
    2**63,
    2**64,
    -1,
    0,
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    float("-inf"),
    True,
    False,
    None,
    "",
    "5",
    "NaN",
    "\ud800",
    "x\ud800y",
    "\udfff\ud800",
    "a\x00b\x1b[31m",
    "é" * 1000,
    "x" * 100_000,
    [],
    {},
    [1, 2],
    {"a": {"b": [None]}},
    5,
    "9999-12-31T23:59:59.999Z",
    "0001-01-01T00:00:00+23:59",
    "+275760-09-13T00:00:00Z",
    "2026-13-45T99:99:99Z",
    "2026-11-21T22:19:17.166Z" * 10,
]


def event_paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path of a (progress) object: where a hostile value can go."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield prefix + (key,)
            yield from event_paths(value, prefix + (key,))
    elif isinstance(obj, list):
        for index, value in enumerate(obj[:3]):
            yield prefix + (index,)
            yield from event_paths(value, prefix + (index,))


PATHS = sorted(set(event_paths(BASE)), key=repr)


def mutate(event: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(event)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def as_text(obj: Any, raw_unicode: bool = False) -> str:
    """JSON text; with ``raw_unicode`` a lone surrogate is written as itself, as py4j can hand it over."""
    return json.dumps(obj, ensure_ascii=not raw_unicode)


def special_payloads() -> list[str]:
    """Texts no mutation of a dict makes: deep nesting, 400-digit literals, bombs of items, raw surrogates."""
    head = json.dumps(BASE)[:-1]
    return [
        head + ', "x": ' + deep(100_000) + "}",
        head.replace(f'"batchId": {BASE["batchId"]}', '"batchId": ' + "9" * 400) + "}",
        head + ', "numInputRows": ' + "9" * 4000 + "}",
        head + ', "numInputRows": ' + "9" * 5000 + "}",  # beyond Python's int-string limit
        head + ', "x": [' + "{}," * 1_500_000 + "{}]}",  # ~4.5 MB of items: refused before parsing
        '{"id": "\ud800", "runId": "\udfff", "name": "\ud800\x00", "timestamp": "2026-11-21T22:19:17.166Z", "jobTags": 5}',
        json.dumps({**BASE, "name": "q\ud800"}, ensure_ascii=False),
        "",
        "null",
        "[" * 10,
    ]


def all_mutations() -> list[tuple[tuple[Any, ...], Any]]:
    return [(path, value) for path in PATHS for value in HOSTILE_VALUES]


def sample_mutations(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    cases = all_mutations()
    out = []
    for _ in range(n):
        event = REAL[rng.randrange(len(REAL))]
        for _ in range(rng.randint(1, 3)):
            path, value = cases[rng.randrange(len(cases))]
            try:
                event = mutate(event, path, value)
            except (KeyError, IndexError, TypeError):  # the path left the (already mutated) structure
                pass
        out.append(as_text(event, raw_unicode=rng.random() < 0.3))
    return out


def strings_of(obj: Any, depth: int = 0) -> Iterator[str]:
    """Every string the model handed on (dataclass fields, maps, tuples), to check each is encodable."""
    if depth > 6:
        return
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from strings_of(k, depth + 1)
            yield from strings_of(v, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from strings_of(v, depth + 1)
    elif hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            if name not in ("raw",):  # raw is Spark's object as received; history stores raw_text or its JSON escape
                yield from strings_of(getattr(obj, name), depth + 1)


def quiet_observer(**kw: Any) -> PrometheusObserver:
    return PrometheusObserver(Settings(http_enabled=False, queue_size=100_000, poll_executors=False), serve=False, live=False, **kw)


def sentinel(batch: int, name: str = "sentinel") -> dict[str, Any]:
    """A valid recorded event under a query id of its own: what must survive every hostile input."""
    return {**copy.deepcopy(BASE), "id": "00000000-0000-4000-8000-00000000feed", "name": name, "batchId": batch}


# --- the model and the live worker ------------------------------------------------------------------------


def test_every_hostile_value_in_every_field_is_parsed_or_cleanly_rejected() -> None:
    """400-digit integers (OverflowError), wrong types (TypeError), NaN/inf, huge times, deep nesting:
    parse_event returns an event whose strings all encode, or raises MalformedEvent; nothing else."""
    rejected = parsed = 0
    for text in [as_text(mutate(BASE, p, v), raw) for p, v in all_mutations() for raw in (False, True)][::7] + special_payloads():
        for kind in ("progress", "started", "idle", "terminated"):
            try:
                event = parse_event(kind, text)
            except MalformedEvent:
                rejected += 1
                continue
            parsed += 1
            for s in strings_of(event):
                s.encode("utf-8")  # raises on a lone surrogate
            if isinstance(event, QueryProgress):
                assert 0 <= event.batch_id < 2**63
                for value in [event.batch_duration_ms, event.input_rows, event.timestamp, *event.duration_ms.values()]:
                    assert value is None or (value == value and abs(value) != float("inf"))
    assert parsed > 1000 and rejected > 50


def test_job_tags_of_the_wrong_type_are_no_tags() -> None:
    started = {"id": "q", "runId": "r", "name": "n", "timestamp": "2026-11-21T22:19:17.166Z"}
    for tags in (5, {"a": 1}, "abc", [[1], {"x": 2}, "ok", 7]):
        event = parse_event("started", json.dumps({**started, "jobTags": tags}))
        assert event.job_tags == (("ok", "7") if isinstance(tags, list) else ())


class JavaEvent:
    """What py4j hands the JSON bridge: an object whose ``json()`` returns the text."""

    def __init__(self, text: str) -> None:
        self._text = text

    def progress(self) -> JavaEvent:
        return self

    def json(self) -> str:
        return self._text


def run_live(payloads: list[str]) -> PrometheusObserver:
    """Everything through the real bridge, queue and worker thread; then a valid event that must be applied."""
    observer = PrometheusObserver(
        Settings(http_enabled=False, queue_size=4 * len(payloads) + 10, poll_executors=False), serve=False
    ).start()
    bridge = _JsonBridge(observer.submit)
    for text in payloads:
        for callback in (bridge.onQueryProgress, bridge.onQueryStarted, bridge.onQueryIdle, bridge.onQueryTerminated):
            callback(JavaEvent(text))
    bridge.onQueryProgress(JavaEvent(json.dumps(sentinel(7))))
    assert observer.flush(600)
    return observer


def check_live(observer: PrometheusObserver, n: int) -> None:
    try:
        assert observer._worker is not None and observer._worker.is_alive()  # no worker death
        record = observer.tracker.get(sentinel(0)["id"])
        assert record is not None and record.last_progress is not None and record.last_progress.batch_id == 7
        snap = observer.self_metrics.snapshot(0, 0)
        assert sum(snap.received.values()) == 4 * n + 1
        assert snap.failed == 0  # every hostile event was parsed or rejected, none crashed the processing
        check_exposition(observer)
    finally:
        observer.stop()


def check_exposition(observer: PrometheusObserver) -> None:
    text = observer.exposition().decode("utf-8")
    families = list(text_string_to_metric_families(text))
    assert families


def test_hostile_events_never_kill_the_live_worker() -> None:
    """Before: an OverflowError or TypeError in parsing killed the worker thread; later events queued forever."""
    payloads = special_payloads() + sample_mutations(150, seed=1)
    check_live(run_live(payloads), len(payloads))


def test_hostile_events_do_not_abort_replay(tmp_path: Path) -> None:
    """Before: the same events raised out of ``replay`` and lost everything after them."""
    path = tmp_path / "events.jsonl"
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        for text in special_payloads()[:4] + sample_mutations(100, seed=2):
            f.write(text.replace("\n", " ") + "\n")
        f.write(json.dumps(sentinel(9)) + "\n")
    result = replay([str(path)])
    record = result.observer.tracker.get(sentinel(0)["id"])
    assert record is not None and record.last_progress is not None and record.last_progress.batch_id == 9
    assert result.observer.self_metrics.failed == 0
    text = result.exposition()
    assert list(text_string_to_metric_families(text))


# --- strings: every label, every exporter -------------------------------------------------------------


def surrogate_event(batch: int) -> dict[str, Any]:
    """A recorded event with a lone surrogate (and control characters) in every string that becomes a label."""
    event = copy.deepcopy(BASE)
    event.update(name="q\ud800\x00", batchId=batch)
    event["durationMs"]["ph\ud800se"] = 5
    for source in event["sources"]:
        source["description"] = 'src\udfff\n"x"'
        source["metrics"] = {"m\ud800": 1}
    for op in event["stateOperators"]:
        op["operatorName"] = "op\ud800"
        op["customMetrics"]["custom\ud800"] = 3
        op["customMetrics"]["Odd.partition_1_st\ud800re"] = 4
    return event


@pytest.mark.parametrize("raw_unicode", [False, True], ids=["escaped", "raw"])
def test_lone_surrogates_keep_scrapes_otlp_and_history_whole(tmp_path: Path, raw_unicode: bool) -> None:
    """Before: one ``\\ud800`` in a query name made every scrape a 500 and lost whole history flushes."""
    from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import encode_metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from spark_state_observer.exporters.otel.metrics import TrackerInstruments

    observer = quiet_observer()
    db = str(tmp_path / "h.db")
    sink = HistorySink(db, observer.self_metrics, clock=lambda: AT)
    observer.add_sink(sink)
    good = sentinel(1)
    observer.process(CapturedEvent("progress", json.dumps(good), AT, 0.0))
    for batch in range(3):
        observer.process(CapturedEvent("progress", as_text(surrogate_event(batch), raw_unicode), AT, 0.0))
    observer.process(
        CapturedEvent("terminated", as_text({"id": BASE["id"], "runId": BASE["runId"], "exception": "E\ud800"}, raw_unicode), AT, 0.0)
    )
    observer.stop()
    text = observer.exposition().decode("utf-8")
    names = {s.labels.get("query") for f in text_string_to_metric_families(text) for s in f.samples}
    assert "q\ufffd\ufffd" in names and "sentinel" in names
    assert sink.dropped_rows == 0 and observer.self_metrics.export_failures == {}
    assert set(load_queries(db).name) == {"q\ufffd\ufffd", "sentinel"}
    assert len(load_batches(db, BASE["id"])) == 3
    reader = InMemoryMetricReader()
    TrackerInstruments(MeterProvider(metric_readers=[reader]).get_meter("t"), observer.view)
    assert len(encode_metrics(reader.get_metrics_data()).SerializeToString()) > 1000


# --- label cardinality ----------------------------------------------------------------------------------


def changing_names(batch: int) -> dict[str, Any]:
    event = copy.deepcopy(BASE)
    event["batchId"] = batch
    event["durationMs"] = {**event["durationMs"], **{f"phase{batch}_{i}": 1 for i in range(10)}}
    event["sources"] = [dict(event["sources"][0], description=f"src{batch}_{i}", metrics={f"m{batch}_{i}": 1}) for i in range(5)]
    event["stateOperators"] = [
        dict(op, operatorName=f"{op['operatorName']}{batch}", customMetrics={**op["customMetrics"], f"c{batch}": 1})
        for op in event["stateOperators"]
    ]
    return event


def series(observer: PrometheusObserver) -> int:
    return sum(1 for line in observer.exposition().splitlines() if not line.startswith(b"#"))


def test_label_sets_stay_bounded_over_1000_batches_of_changing_names() -> None:
    """Before: a query whose phase, source and operator names change each batch grew without limit."""
    observer = quiet_observer()
    counts = {}
    for batch in range(1000):
        observer.process(CapturedEvent("progress", json.dumps(changing_names(batch)), 1.8e9 + batch, 0.0))
        if batch in (100, 500, 999):
            counts[batch] = series(observer)
    assert counts[999] == counts[500] == counts[100]  # full at batch 100, and no further growth
    record = observer.tracker.get(BASE["id"])
    assert record is not None
    assert record.labels.size("phase") == DEFAULT_LIMITS["phase"] and record.labels.size("source") == DEFAULT_LIMITS["source"]
    assert record.labels.size("operator") <= DEFAULT_LIMITS["operator"] and record.labels.size("metric") <= DEFAULT_LIMITS["metric"]
    assert observer.self_metrics.problems > 0  # the forgotten values are counted
    engine = observer.engine  # the signals' per-operator memory is bounded alike
    assert len(engine.growth._operators) <= DEFAULT_LIMITS["operator"] and len(engine.restores._operators) <= DEFAULT_LIMITS["operator"]
    span = engine.growth.s.growth_window_seconds  # and each operator's history holds one window (a batch a second here)
    assert all(len(state.window.points) <= span + 1 for state in engine.growth._operators.values())
    # the latest batch's names are the ones kept: its series are all there
    latest = changing_names(999)
    text = observer.exposition().decode()
    assert all(f'phase="{p}"' in text for p in latest["durationMs"])
    assert all(f'operator="{op["operatorName"]}"' in text for op in latest["stateOperators"])


def test_a_query_with_stable_names_keeps_every_series() -> None:
    """The budget never costs a real query anything: replayed real runs give the same series with and without it."""
    observer = quiet_observer()
    for p in REAL:
        observer.process(CapturedEvent("progress", json.dumps(p), time.time(), 0.0))
    assert observer.self_metrics.problems == 0
    record = observer.tracker.get(BASE["id"])
    assert record is not None and record.labels.size("phase") == len(BASE["durationMs"])


# --- event logs -----------------------------------------------------------------------------------------


def log_line(progress: dict[str, Any]) -> str:
    return json.dumps({"Event": PROGRESS_EVENT, "progress": progress}) + "\n"


def test_over_long_line_bad_timestamp_and_odd_values_do_not_stop_the_file(tmp_path: Path) -> None:
    """Before: an over-long line or a huge executor timestamp ended the file; later valid events were lost."""
    path = tmp_path / "events"
    with open(path, "w") as f:
        f.write(log_line(sentinel(1)))
        f.write('{"Event":"SparkListenerExecutorAdded","Timestamp":' + "9" * 400 + ',"Executor ID":"1"}\n')
        f.write('{"Event":"SparkListenerExecutorAdded","Timestamp":1e308,"Executor ID":{"a":"\\ud800"}}\n')
        f.write(log_line(sentinel(2))[:-1] + " " * (2 * MiB) + "\n")  # longer than the limit below
        f.write("[" + "{}," * 100_000 + "{}]\n")
        f.write(log_line(sentinel(3)))
    items = list(read_records([str(path)], max_line_bytes=MiB))
    records = [i for i in items if isinstance(i, Record)]
    errors = [str(i) for i in items if isinstance(i, EventLogError)]
    assert [r.payload["batchId"] for r in records if r.kind == "progress"] == [1, 3]
    assert [r.timestamp for r in records if r.kind == "executor_added"] == [None, None]
    assert any("longer than" in e for e in errors)
    result = replay([str(path)], max_line_bytes=MiB)
    assert result.observer.tracker.get(sentinel(0)["id"]).last_progress.batch_id == 3


def hostile_folder(root: Path) -> Path:
    """A folder of event logs with everything a folder can hold besides them."""
    folder = root / "logs"
    folder.mkdir()
    (folder / "a.jsonl").write_text(log_line(sentinel(1)))
    (folder / "z.jsonl").write_text(log_line(sentinel(2)))
    os.symlink(folder / "missing", folder / "dangling")
    os.symlink(folder / "loop1", folder / "loop2")
    os.symlink(folder / "loop2", folder / "loop1")
    os.symlink(folder, folder / "self")  # a directory loop
    os.mkfifo(folder / "fifo")
    unreadable = folder / "unreadable"
    unreadable.mkdir()
    (unreadable / "x.jsonl").write_text(log_line(sentinel(3)))
    unreadable.chmod(0)
    (folder / "secret.jsonl").write_text(log_line(sentinel(4)))
    (folder / "secret.jsonl").chmod(0)
    return folder


def unprivileged(args: list[str]) -> list[str]:
    """``args`` run without root's right to read anything: a user namespace drops the capability."""
    if os.geteuid() != 0:
        return args
    if shutil.which("unshare") is None:
        if REQUIRE_REAL:
            pytest.fail("unshare (util-linux) is needed to test unreadable files as root")
        pytest.skip("unshare is not installed; as root nothing is unreadable")
    return ["unshare", "--user", *args]


def cli(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run(
        unprivileged([sys.executable, "-m", "spark_state_observer.cli", *args]),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
        errors="replace",
    )


def test_replay_of_a_folder_with_links_loops_fifos_and_unreadable_parts(tmp_path: Path) -> None:
    """Before: a symlink loop or dangling link aborted the replay, an unreadable folder gave a traceback, a FIFO hung."""
    folder = hostile_folder(tmp_path)
    proc = cli(["replay", str(folder), "--format", "summary"], timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0 and "1 queries" in proc.stdout
    for what in ("dangling", "loop1", "self", "fifo", "unreadable", "secret.jsonl"):
        assert f"{what}: skipped" in proc.stderr or f"{what}: cannot open" in proc.stderr, (what, proc.stderr)
    assert "last batch 2" in proc.stdout  # z.jsonl, after every bad entry, was read


def snappy_bomb(path: Path, expands_to: int) -> None:
    """One snappy-java chunk whose raw block declares (and really expands to) ``expands_to`` bytes."""
    copies, rest = divmod(expands_to - 1, 64)
    length, varint = expands_to, bytearray()
    while True:
        byte = length & 0x7F
        length >>= 7
        varint.append(byte | (0x80 if length else 0))
        if not length:
            break
    block = bytes(varint) + b"\x00x" + b"\xfe\x01\x00" * copies + (bytes([((rest - 1) << 2) | 2, 1, 0]) if rest >= 4 else b"")
    with open(path, "wb") as f:
        f.write(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block)


def lz4_bomb(path: Path, declares: int) -> None:
    data = lz4.block.compress(b"\0" * MiB, store_size=False)
    with open(path, "wb") as f:
        f.write(b"LZ4Block" + bytes([0x20]) + struct.pack("<iii", len(data), declares, 0) + data)


def zstd_bomb(path: Path, size: int) -> None:
    with open(path, "wb") as f, zstandard.ZstdCompressor(level=1).stream_writer(f) as w:
        block = b"x" * MiB
        for _ in range(size // MiB):
            w.write(block)


def items_bomb(path: Path, size: int) -> None:
    """One line of ``[{},{},...]`` (then a valid event, which must still be read)."""
    with open(path, "w") as f:
        f.write("[" + "{}," * (size // 3) + "{}]\n")
        f.write(log_line(sentinel(5)))


def test_snappy_chunk_declaring_more_than_the_line_limit_is_refused_unallocated(tmp_path: Path) -> None:
    """Before: a snappy chunk that expands to 1 GB was decompressed (2.2 GB RSS) before its size was checked."""
    small = tmp_path / "events_1_small.snappy"
    snappy_bomb(small, 100_000)  # the generator makes real snappy: a small one reads back as 100,000 bytes of one line
    (item,) = list(read_records([str(small)], max_line_bytes=4 * MiB))
    assert isinstance(item, EventLogError) and "not valid JSON" in str(item)
    assert sum(len(c) for c in _snappy_chunks(open(small, "rb"), str(small))) == 100_000
    path = tmp_path / "events_1_x.snappy"
    snappy_bomb(path, 256 * MiB)
    (item,) = list(read_records([str(path)], max_line_bytes=16 * MiB))
    assert isinstance(item, EventLogError) and "declares 268435456 bytes" in str(item)


def test_lz4_block_declaring_more_than_the_line_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "events_1_x.lz4"
    lz4_bomb(path, 1 << 30)
    (item,) = list(read_records([str(path)], max_line_bytes=4 * MiB))
    assert isinstance(item, EventLogError) and "implausible lz4 block sizes" in str(item)


def test_a_line_of_millions_of_items_is_refused_before_parsing(tmp_path: Path) -> None:
    """Before: a 32 MB line of ``[{},{},...]`` took 900 MB in json.loads."""
    path = tmp_path / "items.jsonl"
    items_bomb(path, 8 * MiB)
    items = list(read_records([str(path)]))
    assert "refused before parsing" in str(items[0]) and isinstance(items[1], Record) and items[1].payload["batchId"] == 5


# --- the checkpoint inspector ---------------------------------------------------------------------------


def base_checkpoint(root: Path) -> Path:
    ck = checkpoint(root, ROCKSDB, committed=3, planned=4)
    operator_metadata(ck, 0, "dedupe", ["default"])
    part = ck / "state" / "0" / "0"
    write(part / "2.zip", rocksdb_zip([300, 700]))
    for v in range(1, 5):
        write(part / f"{v}.changelog", b"c" * 50)
    return ck


def zip_bomb(path: Path, size: int, lie: bool = False) -> None:
    """A snapshot zip whose ``metadata`` member expands to ``size`` bytes; with ``lie`` its directory says 100."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z, z.open("metadata", "w") as f:
        f.write(b'v1\n{"sstFiles":[' + b" " * 100)
        block = b" " * MiB
        for _ in range(size // MiB):
            f.write(block)
    if lie:
        data = bytearray(path.read_bytes())
        at = data.rfind(b"PK\x01\x02")
        data[at + 24 : at + 28] = struct.pack("<I", 100)
        path.write_bytes(bytes(data))


def encrypted_zip() -> bytes:
    """A snapshot zip whose member says it is encrypted (the flag in its local and central headers)."""
    data = bytearray(zipfile_with({"metadata": b'v1\n{"sstFiles":[]}'}))
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature) + offset
        data[at] |= 0x1
    return bytes(data)


def put(path: Path, data: bytes | str) -> None:
    """``write``, replacing whatever is there first: an earlier mutation may have left a FIFO (which
    opening for writing would wait on), a directory or a link."""
    if path.is_symlink() or (path.exists() and not path.is_file()) or (os.path.lexists(path) and stat.S_ISFIFO(os.lstat(path).st_mode)):
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    write(path, data)


# each mutation: (name, function of the checkpoint root); every one must become a problem line or be ignored
CHECKPOINT_MUTATIONS: list[tuple[str, Callable[[Path], None]]] = [
    ("metadata not json", lambda ck: put(ck / "metadata", b"\xff\xfe{{{")),
    ("metadata a list", lambda ck: put(ck / "metadata", "[1,2]")),
    ("metadata deep", lambda ck: put(ck / "metadata", deep(100_000))),
    ("metadata a directory", lambda ck: ((ck / "metadata").unlink(), (ck / "metadata").mkdir())),
    ("metadata a fifo", lambda ck: ((ck / "metadata").unlink(), os.mkfifo(ck / "metadata"))),
    ("metadata dangling", lambda ck: ((ck / "metadata").unlink(), os.symlink(ck / "nowhere", ck / "metadata"))),
    ("metadata loop", lambda ck: ((ck / "metadata").unlink(), os.symlink(ck / "metadata", ck / "metadata"))),
    ("metadata huge", lambda ck: put(ck / "metadata", b"{" + b" " * (5 * MiB) + b"}")),
    ("offsets garbage", lambda ck: put(ck / "offsets" / "4", b"v1\n\xff\x00[")),
    (
        "offsets types",
        lambda ck: put(
            ck / "offsets" / "4",
            'v1\n{"batchWatermarkMs":"x","conf":{"spark.sql.shuffle.partitions":"two","spark.sql.streaming.stateStore.providerClass":5}}\n',
        ),
    ),
    ("offsets conf list", lambda ck: put(ck / "offsets" / "4", 'v1\n{"conf":[1]}\n')),
    ("offsets one line", lambda ck: put(ck / "offsets" / "4", "v1")),
    ("offsets entry a directory", lambda ck: ((ck / "offsets" / "4").unlink(), (ck / "offsets" / "4").mkdir())),
    ("offsets entry a fifo", lambda ck: ((ck / "offsets" / "4").unlink(), os.mkfifo(ck / "offsets" / "4"))),
    ("offsets a file", lambda ck: (shutil.rmtree(ck / "offsets"), put(ck / "offsets", "x"))),
    ("commit 1e12", lambda ck: put(ck / "commits" / "1000000000000", "v1\n{}")),
    ("commit 10^30", lambda ck: put(ck / "commits" / ("9" * 30), "v1\n{}")),
    ("unicode digits", lambda ck: put(ck / "commits" / "\u00b2", "v1\n{}")),
    ("operator metadata garbage", lambda ck: put(ck / "state" / "0" / "_metadata" / "metadata", 'v1\n{"operatorInfo": 5}')),
    (
        "operator metadata types",
        lambda ck: put(
            ck / "state" / "0" / "_metadata" / "metadata",
            'v1\n{"operatorInfo":{"operatorName":[1]},"stateStoreInfo":[5,{"storeName":7,"numPartitions":"x"}]}',
        ),
    ),
    ("operator a file", lambda ck: (shutil.rmtree(ck / "state" / "0"), put(ck / "state" / "0", "x"))),
    ("partition a file", lambda ck: (shutil.rmtree(ck / "state" / "0" / "0"), put(ck / "state" / "0" / "0", "x"))),
    (
        "state file a directory",
        lambda ck: ((ck / "state" / "0" / "0" / "3.changelog").unlink(), (ck / "state" / "0" / "0" / "3.changelog").mkdir()),
    ),
    (
        "state file dangling",
        lambda ck: ((ck / "state" / "0" / "0" / "3.changelog").unlink(), os.symlink(ck / "gone", ck / "state" / "0" / "0" / "3.changelog")),
    ),
    ("state file a fifo", lambda ck: os.mkfifo(ck / "state" / "0" / "0" / "9.changelog")),
    ("zip corrupt", lambda ck: put(ck / "state" / "0" / "0" / "2.zip", b"PK\x03\x04garbage" * 100)),
    ("zip truncated", lambda ck: put(ck / "state" / "0" / "0" / "2.zip", rocksdb_zip([1, 2])[:-30])),
    ("zip encrypted", lambda ck: put(ck / "state" / "0" / "0" / "2.zip", encrypted_zip())),
    ("zip without metadata", lambda ck: put(ck / "state" / "0" / "0" / "2.zip", zipfile_with({"OPTIONS": b"x"}))),
    (
        "zip metadata types",
        lambda ck: put(ck / "state" / "0" / "0" / "2.zip", zipfile_with({"metadata": b'v1\n{"sstFiles":[5,{"sizeBytes":"x"}]}'})),
    ),
    ("zip a fifo", lambda ck: ((ck / "state" / "0" / "0" / "2.zip").unlink(), os.mkfifo(ck / "state" / "0" / "0" / "2.zip"))),
    ("zip bomb", lambda ck: zip_bomb(ck / "state" / "0" / "0" / "2.zip", 64 * MiB)),
    ("zip bomb lying", lambda ck: zip_bomb(ck / "state" / "0" / "0" / "2.zip", 64 * MiB, lie=True)),
    ("SSTs a file", lambda ck: put(ck / "state" / "0" / "0" / "SSTs", "x")),
    (
        "SSTs dangling",
        lambda ck: ((ck / "state" / "0" / "0" / "SSTs").mkdir(), os.symlink(ck / "x", ck / "state" / "0" / "0" / "SSTs" / "a.sst")),
    ),
    ("store loop", lambda ck: os.symlink(ck / "state" / "0" / "0", ck / "state" / "0" / "0" / "loop")),
    ("undecodable name", lambda ck: open(os.path.join(bytes(ck), b"state/0/0/\xff.tmp"), "wb").close()),
]


def zipfile_with(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


@pytest.mark.parametrize("name", [n for n, _ in CHECKPOINT_MUTATIONS])
def test_hostile_checkpoint_becomes_problem_lines(tmp_path: Path, name: str) -> None:
    """Before: these gave tracebacks (or hung: a FIFO, commits/1000000000000; or took 4.8 GB: the zip bomb)."""
    ck = base_checkpoint(tmp_path / "ck")
    dict(CHECKPOINT_MUTATIONS)[name](ck)
    report = inspect_checkpoint(str(ck))
    text = render_text(report)
    text.encode("utf-8")
    json.loads(report.to_json())
    if name not in ("store loop", "unicode digits", "commit 10^30", "SSTs a file"):
        assert report.problems, name
    if name == "commit 1e12":
        (op,) = report.operators
        assert op.partitions[0].restore.missing_files == 1_000_000_000_001 - 2 - 2


def test_inspect_cli_and_unreadable_files_give_problem_lines_not_tracebacks(tmp_path: Path) -> None:
    ck = base_checkpoint(tmp_path / "ck")
    (ck / "offsets" / "4").chmod(0)
    (ck / "state" / "0" / "0").chmod(0)
    os.mkfifo(ck / "state" / "0" / "_metadata" / "fifo")
    os.symlink(ck / "nowhere", ck / "commits" / "5")
    open(os.path.join(bytes(ck), b"state/0/\xff\xfe.tmp"), "wb").close()
    proc = cli(["inspect", str(ck)], timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "offsets/4 is partially written or unreadable" in proc.stdout and "cannot be listed" in proc.stdout, proc.stdout
    proc = cli(["inspect", "--json", str(ck)], timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout)["problems"]


# --- history --------------------------------------------------------------------------------------------


def test_replay_history_of_logs_older_than_the_retention_keeps_them(tmp_path: Path) -> None:
    """Before: retention counted back from the clock, so a replay of old logs deleted every row it wrote."""
    db = str(tmp_path / "h.db")
    runs = fixture_runs("rocksdb_restart")
    replay([eventlog_dir(r) for r in runs], settings=Settings(http_enabled=False, history_max_age_seconds=60.0), history=db)
    progress = [p for r in runs for p in progress_lines(r)]
    batches = load_batches(db, progress[0]["id"])
    assert len(batches) > 0  # the last minute of the replayed data, not nothing
    newest = batches.ts.max()
    assert batches.ts.min() >= newest - 60.0
    assert batches.batch_id.iloc[-1] == progress[-1]["batchId"]


def hold_lock(db: str, seconds: float) -> threading.Thread:
    conn = sqlite3.connect(db, check_same_thread=False)
    conn.execute("BEGIN EXCLUSIVE")
    ready = threading.Event()

    def release() -> None:
        ready.set()
        time.sleep(seconds)
        conn.rollback()
        conn.close()

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    ready.wait()
    return thread


def test_a_locked_history_is_retried_and_else_reported_with_a_non_zero_exit(tmp_path: Path) -> None:
    """Before: a locked database dropped a whole flush while replay said "0 problems" and exited 0."""
    run = fixture_runs("rocksdb_restart")[0]
    db = str(tmp_path / "h.db")
    HistoryStore(db).close()
    holder = hold_lock(db, 0.2)  # shorter than the retries: written after a wait
    result = replay([eventlog_dir(run)], history=db)
    holder.join()
    assert result.history_rows_dropped == 0 and not result.errors
    assert len(load_batches(db, progress_lines(run)[0]["id"])) == len(progress_lines(run))

    db2 = str(tmp_path / "h2.db")
    HistoryStore(db2).close()
    conn = sqlite3.connect(db2)
    conn.execute("BEGIN EXCLUSIVE")
    try:
        result = replay([eventlog_dir(run)], history=db2)
        assert result.history_rows_dropped > 0 and any("locked" in e for e in result.errors)
        proc = subprocess.run(
            [sys.executable, "-m", "spark_state_observer.cli", "replay", eventlog_dir(run), "--history", db2],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
    finally:
        conn.rollback()
        conn.close()
    assert proc.returncode == 3 and "history is incomplete" in proc.stderr and "0 problems" not in proc.stdout


@pytest.mark.parametrize("name", ["h?mode=rwc.db", "h#frag.db", "h%3F.db", "dir?x=1#y/h.db"])
def test_read_only_connection_opens_the_named_file_even_with_uri_characters(tmp_path: Path, name: str) -> None:
    """Before: ``file:<path>?mode=ro`` unescaped: a '?' or '#' in the path opened a different file read-write."""
    db = tmp_path / name
    store = HistoryStore(str(db))
    store.add_event(parse_event("progress", json.dumps(BASE)), time.time())
    store.flush()
    store.close()
    before = files_in(tmp_path)
    conn = connect(str(db), readonly=True)
    try:
        assert conn.execute("SELECT COUNT(*) FROM batches").fetchone()[0] == 1
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM batches")
    finally:
        conn.close()
    assert files_in(tmp_path) == before  # no other file was created (SQLite's -wal and -shm aside)


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if not p.name.endswith(("-wal", "-shm")))


# --- the HTTP endpoint ------------------------------------------------------------------------------------


def raw_get(port: int, request: bytes) -> int:
    """Send one raw request; the response's status code (0 if the server closed without one)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def hostile_requests(n: int, seed: int) -> Iterator[bytes]:
    rng = random.Random(seed)
    paths = [
        b"/metrics",
        b"/",
        b"/metrics?name[]=\xff",
        b"/metrics?name[]=%ED%A0%80",
        b"/%ED%A0%80",
        b"/" + b"a" * 70_000,
        b"/metrics?" + b"&".join(b"name[]=x%d" % i for i in range(2000)),
        b"//..//..//etc/passwd",
        b"/metrics#frag",
        b"*",
    ]
    headers = [
        b"Accept-Encoding: \xff\xfe",
        b"Accept-Encoding: gzip;q=\xff",
        b"Accept: " + b"x" * 60_000,
        b"X-\xff: \x00",
        b"Host: \xed\xa0\x80",
        b"Accept-Encoding: " + b"gzip," * 10_000,
        b"Content-Length: -1",
        b"Transfer-Encoding: chunked",
    ]
    for _ in range(n):
        path = (
            rng.choice(paths)
            if rng.random() < 0.6
            else b"/" + bytes(rng.choice(b"abc%/?&=[]\xff\x80\x00") for _ in range(rng.randint(1, 200)))
        )
        chosen = rng.sample(headers, rng.randint(0, 3)) + [
            b"X-%d: %s" % (i, b"v" * rng.randint(0, 50)) for i in range(rng.choice([0, 5, 150]))
        ]
        yield (
            b"GET "
            + path.replace(b" ", b"").replace(b"\r", b"").replace(b"\n", b"")
            + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + b"".join(h + b"\r\n" for h in chosen)
            + b"Connection: close\r\n\r\n"
        )


def run_http(n: int, seed: int) -> dict[int, int]:
    port = free_port()
    observer = PrometheusObserver(Settings(http_port=port, poll_executors=False), live=False).start()
    try:
        observer.process(CapturedEvent("progress", json.dumps(sentinel(3)), time.time(), 0.0))
        observer.process(CapturedEvent("progress", json.dumps(surrogate_event(1)), time.time(), 0.0))
        statuses: dict[int, int] = {}
        for request in hostile_requests(n, seed):
            status = raw_get(port, request)
            statuses[status] = statuses.get(status, 0) + 1
        ok = raw_get(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert ok == 200
        assert observer.self_metrics.snapshot(0, 0).failed == 0
    finally:
        observer.stop()
    return statuses


def test_hostile_gets_never_get_a_server_error(capfd: pytest.CaptureFixture[str]) -> None:
    statuses = run_http(200, seed=3)
    assert not any(500 <= s < 600 for s in statuses), statuses
    assert "Traceback" not in capfd.readouterr().err


# --- the corpus of 10,000+ cases and the memory figures -------------------------------------------------------

JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=8,
)
HOSTILE_VALUE_STRATEGY = (
    st.sampled_from(HOSTILE_VALUES) | st.integers(-(10**500), 10**500) | st.floats() | st.text(max_size=30) | JSON_VALUE
)


@st.composite
def hostile_event(draw: st.DrawFn) -> str:
    event = draw(st.sampled_from(REAL))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(PATHS))
        try:
            event = mutate(event, path, draw(HOSTILE_VALUE_STRATEGY))
        except (KeyError, IndexError, TypeError):
            pass
    return as_text(event, raw_unicode=draw(st.booleans()))


CORPUS: dict[str, int] = {}


def count(target: str, n: int) -> None:
    CORPUS[target] = CORPUS.get(target, 0) + n


LIVE = {"observer": None}


@SLOW
@settings(max_examples=4000, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(hostile_event())
def test_corpus_live_worker(text: str) -> None:
    """4,000 generated events through the bridge, queue and the worker thread of one observer."""
    observer = LIVE["observer"]
    if observer is None:
        observer = LIVE["observer"] = PrometheusObserver(
            Settings(http_enabled=False, queue_size=100_000, poll_executors=False), serve=False
        ).start()
        _JsonBridge(observer.submit).onQueryProgress(JavaEvent(json.dumps(sentinel(1))))
    _JsonBridge(observer.submit).onQueryProgress(JavaEvent(text))
    count("live worker", 1)


@SLOW
def test_corpus_live_worker_survived() -> None:
    observer = LIVE["observer"]
    assert observer is not None and observer.flush(600)
    assert observer._worker is not None and observer._worker.is_alive()
    record = observer.tracker.get(sentinel(0)["id"])
    assert record is not None and record.last_progress is not None and record.last_progress.batch_id == 1  # nothing recorded lost
    assert observer.self_metrics.failed == 0
    check_exposition(observer)
    observer.stop()


@SLOW
def test_corpus_replay(tmp_path: Path) -> None:
    """3,000 hostile lines across plain and compressed files, valid events between them: every valid one is read."""
    folder = tmp_path / "logs"
    folder.mkdir()
    rng = random.Random(4)
    texts = sample_mutations(2400, seed=5) + special_payloads() * 10
    rng.shuffle(texts)
    expected = []
    for index in range(6):
        chunk = texts[index::6]
        lines = []
        for j, text in enumerate(chunk):
            lines.append(json.dumps({"Event": PROGRESS_EVENT, "progress": "X"}).replace('"X"', text.replace("\n", " ") or "0") + "\n")
            if j % 50 == 0:
                batch = 1000 * index + j
                expected.append(batch)
                lines.append(log_line(sentinel(batch)))
        data = "".join(lines).encode("utf-8", "surrogatepass")
        name = f"{index}.jsonl"
        if index % 3 == 1:
            name, data = f"{index}.zstd", zstandard.ZstdCompressor().compress(data)
        (folder / name).write_bytes(data)
        count("replay", len(chunk))
    for extra in range(20):  # the folder's odd members
        os.symlink(folder / f"missing{extra}", folder / f"zz{extra}")
    count("replay", 20)
    result = replay([str(folder)], max_line_bytes=8 * MiB)
    assert result.observer.self_metrics.failed == 0
    record = result.observer.tracker.get(sentinel(0)["id"])
    assert record is not None and record.last_progress is not None
    assert record.counters  # every sentinel batch was applied:
    batches = sum(v for (spec, _), v in record.counters.items() if spec is catalog.BATCHES)
    assert batches == len(expected)


@SLOW
def test_corpus_inspect(tmp_path: Path) -> None:
    """1,500 checkpoints with one to three hostile mutations each (small bombs), scanned and rendered."""
    rng = random.Random(6)
    light = [(n, f) for n, f in CHECKPOINT_MUTATIONS if "bomb" not in n]
    for case in range(1500):
        ck = base_checkpoint(tmp_path / f"ck{case}")
        for _name, fn in rng.sample(light, rng.randint(1, 3)):
            try:
                fn(ck)
            except OSError:
                pass  # an earlier mutation removed (or turned into a loop) what this one changes
        report = inspect_checkpoint(str(ck))
        render_text(report).encode("utf-8")
        json.loads(report.to_json())
        shutil.rmtree(ck)
        count("inspect", 1)
    for case in range(10):  # and through the command, where a traceback would show
        ck = base_checkpoint(tmp_path / f"cli{case}")
        for _name, fn in rng.sample(light, 3):
            try:
                fn(ck)
            except OSError:
                pass
        proc = cli(["inspect", str(ck)], timeout=120)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        count("inspect", 1)


@SLOW
def test_corpus_history(tmp_path: Path) -> None:
    """1,000 hostile events into a history after a valid one: the valid rows stay, no flush is lost."""
    db = str(tmp_path / "h.db")
    observer = quiet_observer()
    sink = HistorySink(db, observer.self_metrics, clock=lambda: AT)
    observer.add_sink(sink)
    observer.process(CapturedEvent("progress", json.dumps(sentinel(1)), AT, 0.0))
    for text in sample_mutations(1000, seed=7):
        observer.process(CapturedEvent("progress", text, AT, 0.0))
        count("history", 1)
    observer.stop()
    assert sink.dropped_rows == 0 and observer.self_metrics.export_failures == {} and observer.self_metrics.failed == 0
    assert load_batches(db, sentinel(0)["id"]).batch_id.tolist() == [1]


@SLOW
def test_corpus_http(capfd: pytest.CaptureFixture[str]) -> None:
    statuses = run_http(2000, seed=8)
    count("http", 2000)
    assert not any(500 <= s < 600 for s in statuses), statuses
    assert "Traceback" not in capfd.readouterr().err


# VmHWM, the peak resident size of this process image: getrusage's ru_maxrss would carry over the peak of
# the (large) test process that forked it, since Linux keeps it across fork and exec
RSS_SCRIPT = r"""
import json, sys, time

def hwm():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

from spark_state_observer.offline.replay import replay
from spark_state_observer.offline.checkpoint import inspect_checkpoint
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.settings import Settings
from spark_state_observer.capture.queue import CapturedEvent
kind, path, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
baseline = hwm()
if kind == "replay":
    result = replay([path], max_line_bytes=limit)
    outcome = f"{result.events} events, {len(result.errors)} problems: {(result.errors or [''])[0][:100]}"
elif kind == "inspect":
    report = inspect_checkpoint(path)
    outcome = f"{len(report.problems)} problems: {(report.problems or [''])[0][:100]}"
else:
    observer = PrometheusObserver(Settings(http_enabled=False, poll_executors=False), serve=False, live=False)
    with open(path) as f:
        observer.process(CapturedEvent("progress", f.read(), time.time(), 0.0))
    outcome = f"dropped {dict(observer.self_metrics.dropped)}"
peak = hwm()
print(json.dumps({"baseline": baseline, "peak": peak, "outcome": outcome}))
"""


def peak_rss(kind: str, path: Path, limit: int = LINE_LIMIT) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT, kind, str(path), str(limit)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=600,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rss_inputs(root: Path, full: bool) -> list[tuple[str, str, Path]]:
    """(input class, entry point, path): the attack's inputs at the attack's sizes (``full``) or a quarter."""
    scale = 1 if full else 4
    out = []
    path = root / "events_1_snappy.snappy"
    snappy_bomb(path, (1 << 30) // scale)
    out.append((f"snappy chunk expanding to {1024 // scale} MB", "replay", path))
    path = root / "events_1_lz4.lz4"
    lz4_bomb(path, 1 << 30)
    out.append(("lz4 block declaring 1 GB", "replay", path))
    path = root / "events_1_zstd.zstd"
    zstd_bomb(path, (1 << 30) // scale)
    out.append((f"zstd stream of one {1024 // scale} MB line", "replay", path))
    path = root / "items.jsonl"
    items_bomb(path, 32 * MiB // scale)
    out.append((f"{32 // scale} MB line of [{{}},{{}},...]", "replay", path))
    out.append((f"{32 // scale} MB payload of [{{}},{{}},...]", "worker", path))
    ck = base_checkpoint(root / "ck")
    zip_bomb(ck / "state" / "0" / "0" / "2.zip", int(1.5 * (1 << 30)) // scale)
    out.append((f"N.zip whose metadata expands to {1536 // scale} MB", "inspect", ck))
    ck2 = base_checkpoint(root / "ck2")
    zip_bomb(ck2 / "state" / "0" / "0" / "2.zip", int(1.5 * (1 << 30)) // scale, lie=True)
    out.append((f"N.zip lying about its {1536 // scale} MB metadata", "inspect", ck2))
    ck3 = base_checkpoint(root / "ck3")
    write(ck3 / "commits" / "1000000000000", "v1\n{}")
    out.append(("commits/1000000000000", "inspect", ck3))
    return out


def measure(root: Path, full: bool) -> list[tuple[str, str, dict[str, Any]]]:
    figures = [(name, kind, peak_rss(kind, path)) for name, kind, path in rss_inputs(root, full)]
    bound = 4 * LINE_LIMIT + 100 * MiB
    print(f"\npeak RSS per input class (line limit {LINE_LIMIT // MiB} MiB, bound 4x + 100 MiB = {bound // MiB} MiB):")
    for name, kind, f in figures:
        print(
            f"  {name:45s} {kind:8s} peak {f['peak'] / MiB:7.1f} MiB "
            f"(interpreter and imports {f['baseline'] / MiB:5.1f} MiB) -> {f['outcome']}"
        )
    for name, _, f in figures:
        assert f["peak"] < bound, (name, f)
    return figures


def test_peak_memory_of_each_bomb_stays_bounded(tmp_path: Path) -> None:
    """The attack's inputs at a quarter of their size (the full sizes run under ``-m slow``)."""
    measure(tmp_path, full=False)


@SLOW
def test_peak_memory_at_the_attack_sizes() -> None:
    root = Path(tempfile.mkdtemp(prefix="sso-hostile-"))
    try:
        measure(root, full=True)
        count("memory classes", 8)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@SLOW
def test_corpus_size_report() -> None:
    """Runs last in this file under ``-m slow``: the corpus held more than 10,000 cases."""
    total = sum(CORPUS.values())
    print(f"\nhostile corpus: {total:,} cases: " + ", ".join(f"{k} {v:,}" for k, v in CORPUS.items()))
    assert total >= 10_000, CORPUS
