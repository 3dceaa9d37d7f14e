"""Hostile input for the readers round 3 found unbounded (issue 48): the placement tap, the plan reader's
regexes, the driver's REST answers and the checkpoint readers.

Each bomb is built here, in ``tmp_path`` or in memory, never committed. Memory is asserted with
``tracemalloc`` peaks, CPU by inputs a quadratic reader could not finish: a subprocess with a generous
timeout (never a timed assertion on a fast path).
"""

from __future__ import annotations

import ast
import http.server
import json
import os
import pathlib
import socketserver
import struct
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
import zipfile
from collections.abc import Iterator

import pytest

import spark_state_observer
from spark_state_observer.model.bounded import MAX_JSON_ITEMS, Decoder, JsonTooLarge, json_items, loads
from spark_state_observer.offline.checkpoint.changelog_lineage import LZ4_MAGIC, NoLineage, changelog_lineage
from spark_state_observer.offline.checkpoint.layout import MAX_COMMIT_BYTES, scan
from spark_state_observer.placement.task_decode import plan, task_end
from spark_state_observer.placement.task_log import EventLogSource
from spark_state_observer.placement.task_poll import AnswerRefused, RestSource

PACKAGE = pathlib.Path(spark_state_observer.__file__).parent
MB = 1 << 20
# the item bomb: ~30 MB of ``[{},{},...]``, ten million objects once parsed
BOMB = b"[" + b"{}," * (10 * MB) + b"{}]"

# --- every JSON read goes through model.bounded ----------------------------------------------------------

# (module, call) allowed to parse JSON without the bound, each with why its text is not untrusted
ALLOWED = {
    ("model/bounded.py", "json.loads"): "the bounded parser itself, after counting",
    ("model/bounded.py", "msgspec.json.Decoder"): "the bounded typed decoder, which counts first",
    ("cli/inspect.py", "json.loads"): "the report's own JSON (report.to_json()), read back to add sections",
    ("mcp/checkpoint_answers.py", "json.loads"): "the inspector report's own JSON (report.to_json()), read back as structured data",
    ("mixin/dashboards/__init__.py", "json.loads"): "a dashboard this package built, round-tripped to plain types",
    ("offline/kafka_local.py", "json.load"): "manifests scripts/fetch_kafka.py wrote for the tests' local Kafka",
    ("offline/prometheus_server.py", "json.loads"): "the backtest's own Prometheus on 127.0.0.1, evaluating our rules",
}
_RAW_CALLS = {"json.loads", "json.load", "msgspec.json.decode", "msgspec.json.Decoder", "json.JSONDecoder", "orjson.loads"}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def raw_json_reads() -> set[tuple[str, str]]:
    """(module, call) of every JSON parse in the package that does not go through ``model.bounded``."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _dotted(node.func) in _RAW_CALLS:
                found.add((module, _dotted(node.func)))
            if isinstance(node, ast.ImportFrom) and node.module in ("json", "orjson", "msgspec.json", "ujson"):
                found |= {(module, f"from {node.module} import {a.name}") for a in node.names if "load" in a.name or "ecode" in a.name}
    return found


def test_every_json_read_goes_through_the_bounded_parser() -> None:
    found = raw_json_reads()
    assert found - set(ALLOWED) == set(), "parse with spark_state_observer.model.bounded.loads / Decoder instead"
    assert set(ALLOWED) <= found, "an allowed read is gone: drop it from ALLOWED"


# --- the item bomb through the placement reader ----------------------------------------------------------


def _peak(fn) -> int:  # type: ignore[no-untyped-def]
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "line",
    [
        b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart","executionId":9,'
        b'"description":"memory used by state","x":' + BOMB + b"}",
        b'{"Event":"SparkListenerTaskEnd","Stage ID":1,"Task Info":{"Accumulables":[{"Name":"memory used by state","Update":'
        + BOMB
        + b"}]}}",
        b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent","progress":{"id":"q","stateOperators":'
        + BOMB
        + b"}}",
    ],
    ids=["sql-start", "task-end", "progress"],
)
def test_an_item_bomb_on_a_placement_line_is_refused_and_counted(line: bytes) -> None:
    source = EventLogSource()
    peak = _peak(lambda: source.feed_line(line, app="a"))
    assert source.bad_lines == 1
    assert peak < len(line) + 8 * MB  # at most a copy of the line (a progress object cut out); parsed, it was 1-4 GB


def test_replay_reads_a_recorded_log_with_a_task_bomb_and_says_so(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The recorded placement run with a 30 MB task end inserted: the same batches, the bomb one counted line."""
    import glob

    import zstandard

    from conftest import FIXTURES
    from spark_state_observer.offline.replay import replay

    (part,) = glob.glob(os.path.join(FIXTURES, "placement", "clean", "eventlog", "*", "events_1_*.zstd"))
    with open(part, "rb") as f:
        lines = zstandard.ZstdDecompressor().stream_reader(f).read().split(b"\n")
    bomb = b'{"Event":"SparkListenerTaskEnd","Stage ID":1,"Task Info":{"Accumulables":[{"Name":"memory used by state","Update":'
    plain, bombed = tmp_path / "plain.log", tmp_path / "bombed.log"
    plain.write_bytes(b"\n".join(lines))
    bombed.write_bytes(b"\n".join([*lines[:40], bomb + BOMB + b"}]}}", *lines[40:]]))
    before, after = replay([str(plain)]), replay([str(bombed)])
    assert after.events == before.events
    assert [e for e in after.errors if e not in before.errors] == [
        "1 task, job or plan line(s) not readable JSON or too large: placement skipped them"
    ]


def test_typed_decoders_refuse_the_bomb_as_a_decode_error() -> None:
    assert (
        task_end(b'{"Event":"SparkListenerTaskEnd","Stage ID":1,"Task Info":{"Executor ID":"1","Accumulables":[{"Update":' + BOMB + b"}]}}")
        is None
    )
    assert plan(b'{"Event":"x","executionId":1,"sparkPlanInfo":{"children":' + BOMB + b"}}") is None
    with pytest.raises(JsonTooLarge):
        Decoder(list[int]).decode(BOMB)
    with pytest.raises(ValueError):
        loads(BOMB)
    assert loads(b"[" + b"1," * (MAX_JSON_ITEMS // 2) + b"1]")[-1] == 1  # large, but within the bound: read


# --- regexes over text from data are linear ---------------------------------------------------------------

# Measured (2-core shared machine): before, the tree-form writer case took 1.58 s of CPU for 0.4 MB, URL redaction
# 2.2 s for 40 KB, the browser's markdown escape 1.5 s for 20 KB, each growing with the square of the size (hours
# at 2 MB); after, the whole script takes ~2 s of CPU.
_PLAN_SCRIPT = textwrap.dedent(
    """
    import sys
    from spark_state_observer.model.plan_checkpoint import SQL_START_PREFIX, PlanCheckpoints
    from spark_state_observer.model.plan_eviction import PlanEviction

    N = 2 << 20
    uuid = b"00000000-0000-0000-0000-000000000000"
    info = b"state info [ checkpoint = /c/state, runId = " + uuid + b", opId = 0, ver = 1]"
    marker = b"state info [ checkpoint = " + b"a" * 100
    def line(body):
        return SQL_START_PREFIX + b',"sparkPlanInfo":{"simpleString":"x ' + info + b'","children":[' + body + b"]}}"
    json_cases = [
        b'{"simpleString":"StreamingSymmetricHashJoin ' + marker * (N // 126) + b'"}',
        (b'{"simpleString":"StreamingSymmetricHashJoin ' + marker * 500 + b'"},') * (N // 63_000),
        b'{"simpleString":"StreamingSymmetricHashJoin ' + (info + b" state cleanup [ " + b"b" * 50) * (N // 160) + b'"}',
        (b'{"simpleString":"StateStoreSave [k], ' + (b", state info [ checkpoint = " + b"a" * 20) * 20 + b'"},') * (N // 1000),
    ]
    tree_cases = [
        (b"StateStoreSave [" + b"a" * 10) * (N // 26),
        (b"StreamingSymmetricHashJoin " + marker * 500 + b"\\n") * (N // 63_000),
        b"StreamingSymmetricHashJoin " * (N // 27),
        (b"StateStoreSave [k], " + info + b", ") * (N // 120),
    ]
    for body in json_cases:
        PlanEviction().feed_line(line(body))
        PlanCheckpoints().feed_line(line(body))
    for body in tree_cases:
        PlanEviction().feed_tree(uuid.decode(), body.decode())

    # the redaction of URLs in messages and the browser's markdown escape: text from data reaches both
    from spark_state_observer.browser.fmt import md
    from spark_state_observer.capture.storage import redact
    from spark_state_observer.settings import redact_url

    for text in ("a" * N, "a://" + "b" * N, "a://b:" * (N // 6), ("x" * 40 + "s3://u:p@") * (N // 50)):
        redact_url(text)
        redact(text)
        md(text[: N // 16])
    print("done")
    """
)


def test_regexes_over_hostile_text_run_in_linear_time() -> None:
    """Eight 2 MB plans and four 2 MB messages built to make the old regexes backtrack: a quadratic reader needs
    minutes to hours, so the 60 s timeout (generous for a shared, loaded machine) only fails one that is far from linear
    (this run takes ~2 s of CPU)."""
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    done = subprocess.run([sys.executable, "-c", _PLAN_SCRIPT], env=env, capture_output=True, timeout=60, check=True)
    assert done.stdout.strip() == b"done"


def test_plan_reader_still_finds_real_nodes_after_hostile_ones() -> None:
    from spark_state_observer.model.plan_checkpoint import SQL_START_PREFIX
    from spark_state_observer.model.plan_eviction import PlanEviction

    run = "11111111-2222-3333-4444-555555555555"
    info = f"state info [ checkpoint = /c/state, runId = {run}, opId = 3, ver = 1, numPartitions = 2]".encode()
    hostile = b'{"simpleString":"StreamingSymmetricHashJoin ' + (b"state info [ checkpoint = " + b"a" * 50) * 200 + b'"},'
    join = b'{"simpleString":"StreamingSymmetricHashJoin [k], [k], Inner, condition = [ x ], ' + info
    join += b', state cleanup [ left value predicate: (t#1-T1000ms <= 5), right value predicate: (t#2-T1000ms <= 5) ], x"},'
    writer = b'{"simpleString":"StateStoreSave [window#8-T10000ms, key#2], ' + info.replace(b"opId = 3", b"opId = 1") + b', Append, 0, 2"}'
    line = SQL_START_PREFIX + b',"sparkPlanInfo":{"simpleString":"x ' + info + b'","children":[' + hostile + join + writer + b"]}}"
    eviction = PlanEviction()
    eviction.feed_line(line)
    assert eviction("q", run, 3, "symmetricHashJoin") is True
    assert eviction("q", run, 1, "stateStoreSave") is True


# --- REST answers: size and time caps, against real hostile servers -------------------------------------


class _Hostile(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "endless"

    def do_GET(self) -> None:  # http.server's name
        try:
            if self.mode in ("whole", "short"):
                body = b'[{"id": 1}]'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body) + (100 if self.mode == "short" else 0)))
                self.end_headers()
                self.wfile.write(body)
                if self.mode == "short":
                    self.close_connection = True
                return
            if self.mode == "drip-headers":
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                for _ in range(600):
                    self.wfile.write(b"X: y\r\n")
                    self.wfile.flush()
                    time.sleep(0.5)
                return
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"[" + b"{}," * 20_000
            for _ in range(100_000):  # endless for the reader: GBs, or a byte every half second
                body = chunk if self.mode == "endless" else b" "
                self.wfile.write(f"{len(body):x}\r\n".encode() + body + b"\r\n")
                self.wfile.flush()
                if self.mode == "drip":
                    time.sleep(0.5)
        except OSError:
            pass  # the reader gave up: what the test wants

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hostile_server() -> Iterator[tuple[str, type[_Hostile]]]:
    handler = type("Handler", (_Hostile,), {})
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_an_endless_rest_answer_is_cut_at_the_size_cap(hostile_server) -> None:  # type: ignore[no-untyped-def]
    url, handler = hostile_server
    handler.mode = "endless"
    source = RestSource(url, "app", max_bytes=8 * MB, deadline=30.0)
    tracemalloc.start()
    try:
        with pytest.raises(AnswerRefused, match="larger than"):
            source.get("/allexecutors")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * 8 * MB  # the parts and their join, no more


@pytest.mark.parametrize("mode", ["drip", "drip-headers"])
def test_a_dripping_rest_answer_ends_at_the_deadline(hostile_server, mode: str) -> None:  # type: ignore[no-untyped-def]
    """Each byte comes within the socket timeout (2 s); the drip would last 5 minutes: the deadline (1 s) ends it.
    The subprocess-free bound: the call returns at all (pytest's own run would otherwise hang for minutes)."""
    url, handler = hostile_server
    handler.mode = mode
    source = RestSource(url, "app", timeout=2.0, deadline=1.0)
    with pytest.raises(OSError):
        source.get_bytes("/jobs")
    assert source._conn is None  # closed: the next request starts afresh


def test_a_task_list_is_bounded_by_its_tasks_not_refused_for_its_metrics() -> None:
    from spark_state_observer.placement.task_poll import MAX_TASK_STRUCTS, _decode_tasks

    metrics = {"taskMetrics": {f"m{i}": {"a": [1, 2, {"b": 3}]} for i in range(30)}}  # ~150 items a task, skipped unbuilt
    tasks = [{"taskId": i, "index": i, "executorId": "1", "host": "h", "status": "SUCCESS", **metrics} for i in range(9000)]
    body = json.dumps(tasks).encode()
    assert json_items(body) > MAX_JSON_ITEMS  # an item bound would refuse this real-sized stage
    assert len(_decode_tasks(body)) == 9000
    bombs = [
        b"[" + b'{"taskId":1},' * MAX_TASK_STRUCTS + b'{"taskId":1}]',  # more tasks than asked for
        b'[{"taskId":1,"host":' + BOMB + b"}]",  # a structure where a scalar belongs
        BOMB,  # elements that are no tasks
    ]
    for bomb in bombs:
        peak = _peak(lambda bomb=bomb: _decode_tasks(bomb))
        assert peak < 8 * MB


def test_whole_rest_answers_keep_the_connection_and_short_ones_are_refused(hostile_server) -> None:  # type: ignore[no-untyped-def]
    url, handler = hostile_server
    handler.mode = "whole"
    source = RestSource(url, "app")
    assert source.get("/allexecutors") == [{"id": 1}]
    conn = source._conn
    assert source.get("/allexecutors") == [{"id": 1}]
    assert source._conn is conn and source.requests == 2  # kept alive: the body was read to its end
    handler.mode = "short"
    with pytest.raises(OSError, match="cut short"):
        source.get_bytes("/allexecutors")


# --- checkpoint readers -----------------------------------------------------------------------------------


def _checkpoint(root: pathlib.Path) -> pathlib.Path:
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text('{"id":"q"}\n')
    return root


def test_a_snapshot_zip_whose_metadata_expands_to_a_json_bomb_is_a_problem(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from spark_state_observer.offline.checkpoint.report import StateFile
    from spark_state_observer.offline.checkpoint.restore import _zip_sst_bytes

    path = tmp_path / "5.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("metadata", b"v1\n" + b"[" + b"{}," * (5 * MB) + b"{}]")  # 15 MB, deflated to ~15 KB
    assert path.stat().st_size < 64 << 10
    problems: list[str] = []
    snap = StateFile(version=5, kind="zip", size=path.stat().st_size)
    peak = _peak(lambda: _zip_sst_bytes(str(tmp_path), snap, problems))
    assert len(problems) == 1 and "refused" in problems[0]
    assert peak < 64 * MB  # the member's bytes, bounded; parsed it was 517 MB


def test_large_v2_commit_entries_are_bounded_per_entry_and_in_all(tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = _checkpoint(tmp_path / "cp")
    uid = "0123456789abcdef0123456789abcdef"
    entry = "v2\n" + json.dumps({"stateUniqueIds": {"0": [[uid]] * 100_000}}) + "\n"  # ~4 MB, 300,000 items
    bomb = "v2\n" + "[" + "{}," * 1_300_000 + "{}]\n"  # 3.9 MB, under the byte cap
    for batch in range(12):
        (root / "commits" / str(batch)).write_text(bomb if batch == 11 else entry)
    (root / "offsets" / "11").write_text("v1\n{}\n")
    report = _peak_report(root)
    assert any("commits/11 unreadable" in p and "refused" in p for p in report.problems)
    assert report.last_committed_batch == 11


def _peak_report(root: pathlib.Path):  # type: ignore[no-untyped-def]
    tracemalloc.start()
    try:
        report = scan(str(root))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 * MB  # 1.25 GB before
    return report


def test_commit_log_bytes_read_are_bounded_in_all(tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = _checkpoint(tmp_path / "cp")
    filler = "v1\n" + " " * (3 * MB) + "\n"
    count = MAX_COMMIT_BYTES // (3 * MB) + 3
    for batch in range(count):
        (root / "commits" / str(batch)).write_text(filler)
    report = scan(str(root))
    assert any(f"more than {MAX_COMMIT_BYTES >> 20} MB" in p for p in report.problems)
    assert report.checkpoint_format_version == 1  # the newest entries were read


def _lz4_block(data: bytes) -> bytes:
    """One lz4-java block holding ``data`` uncompressed (method 0x10: raw)."""
    return LZ4_MAGIC + bytes([0x10]) + struct.pack("<iii", len(data), len(data), 0) + data


def _write_utf(text: bytes) -> bytes:
    return struct.pack(">H", len(text)) + text


def test_a_deeply_nested_lineage_header_is_a_problem_of_that_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "3_abc.changelog"
    nested = b"[" * 30_000 + b"]" * 30_000
    path.write_bytes(_lz4_block(_write_utf(b"v4") + _write_utf(nested)))
    with pytest.raises(NoLineage, match=r"nested too deep|not JSON"):
        changelog_lineage(str(path))


def test_a_deeply_nested_lineage_header_leaves_its_operator_in_the_report(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Before, the RecursionError escaped to the operator's reader and operator 0 was dropped whole."""
    root = _checkpoint(tmp_path / "cp")
    (root / "offsets" / "2").write_text("v1\n{}\n")
    (root / "commits" / "2").write_text("v2\n{}\n")
    uid = "0123abcd-0000-0000-0000-000000000000"
    for op, lineage in ((0, b"[" * 30_000 + b"]" * 30_000), (1, b'[{"version":2,"checkpointUniqueId":"x"}]')):
        folder = root / "state" / str(op) / "0"
        folder.mkdir(parents=True)
        (folder / f"3_{uid}.changelog").write_bytes(_lz4_block(_write_utf(b"v4") + _write_utf(lineage)))
    report = scan(str(root))
    assert [o.operator_id for o in report.operators] == [0, 1]
    assert [p for p in report.problems if "lineage is" in p] == [
        f"{root}/state/0/0/3_{uid}.changelog: lineage is not JSON (or nested too deep)"
    ]
