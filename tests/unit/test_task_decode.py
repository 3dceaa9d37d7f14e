"""The typed decode of task-level lines (``spark_state_observer.placement.task_decode`` through ``TaskEventReader.feed_line``) gives
exactly what the reference (``json.loads`` then ``TaskEventReader.feed``) gives: the same closed batches, executor
changes and problems, on every recorded event log with task events and on hostile variants of recorded lines."""

from __future__ import annotations

import copy
import glob
import json
import os
from collections.abc import Callable
from typing import Any

import pytest

from conftest import FIXTURES
from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.model.spark_events import SQL_ADAPTIVE, SQL_START
from spark_state_observer.offline.eventlog import expand
from spark_state_observer.placement.task_lines import wanted_line
from spark_state_observer.placement.task_log import EventLogSource
from spark_state_observer.placement.tasks import TaskEventReader

EVENTLOGS = sorted(glob.glob(os.path.join(FIXTURES, "**", "eventlog"), recursive=True))
TYPED = (b'{"Event":"SparkListenerTaskEnd"', b'{"Event":"SparkListenerJobStart"', b'{"Event":"org.apache.spark.sql.execution.ui.')


def log_lines(eventlog: str) -> list[bytes]:
    lines: list[bytes] = []
    for path in expand([eventlog]):
        with open_decompressed(path) as f:
            lines.extend(line for line in f.read().splitlines() if line.strip())
    return lines


def read(lines: list[bytes], fast: bool) -> tuple[list[Any], dict[str, int], int]:
    """Everything a reader gets out of ``lines`` (as ``EventLogSource.feed_line`` reads them), its problems, and how
    many typed lines the fast path declined."""
    reader = TaskEventReader()
    out: list[Any] = []
    declined = 0
    for line in lines:
        if not wanted_line(line):
            continue
        done = reader.feed_line(line) if fast else None
        if done is not None:
            out.extend(done)
            continue
        declined += fast and line.startswith(TYPED)
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            out.append("bad json")
            continue
        out.extend(reader.feed(obj))
    out.extend(reader.close())
    return out, reader.problems, declined


def test_fixtures_found() -> None:
    with_tasks = [e for e in EVENTLOGS if any(line.startswith(TYPED[0]) for line in log_lines(e))]
    assert len(with_tasks) >= 20, with_tasks  # the placement runs and the incidents


@pytest.mark.parametrize("eventlog", EVENTLOGS, ids=lambda p: os.path.relpath(p, FIXTURES))
def test_recorded_logs_read_alike(eventlog: str) -> None:
    lines = log_lines(eventlog)
    fast, fast_problems, declined = read(lines, fast=True)
    reference, problems, _ = read(lines, fast=False)
    assert fast == reference
    assert fast_problems == problems
    assert declined == 0  # recorded lines are all plain: the typed decode took every one


@pytest.mark.parametrize("eventlog", EVENTLOGS, ids=lambda p: os.path.relpath(p, FIXTURES))
def test_the_source_reads_every_line_as_the_reference_reads_it(eventlog: str) -> None:
    """``EventLogSource.feed_line`` (a progress line's ids from its typed decode, the typed task lines) gives what the
    reference gives from ``json.loads`` of every wanted line: the same closed batches, executor changes and problems."""
    lines = log_lines(eventlog)
    source = EventLogSource(max_pending=1_000_000)
    for line in lines:
        source.feed_line(line)
    reader = source._readers.get("")
    out = list(source._pending) + (reader.close() if reader is not None else [])
    reference, problems, _ = read(lines, fast=False)
    assert out == [item for item in reference if item != "bad json"]
    assert source.bad_lines == reference.count("bad json")
    assert (reader.problems if reader is not None else {}) == problems


def test_recorded_logs_have_placement() -> None:
    """The comparison is not between two empty results: the placement runs give partition runs."""
    for name in ("clean", "kill", "locality"):
        out, _, _ = read(log_lines(os.path.join(FIXTURES, "placement", name, "eventlog")), fast=True)
        runs = [run for item in out if hasattr(item, "runs") for run in item.runs]
        assert len(runs) > 50 and {run.load_ms is not None for run in runs} == {True}


def test_source_gives_what_the_reference_gives() -> None:
    """``EventLogSource.feed_line`` (replay's tap, the watcher's path) with and without the typed decode."""
    lines = log_lines(os.path.join(FIXTURES, "placement", "kill", "eventlog"))
    results = []
    for fast in (True, False):
        source = EventLogSource(max_pending=100_000)
        if not fast:
            source._reader("").feed_line = lambda line: None  # type: ignore[method-assign]
        for line in lines:
            source.feed_line(line)
        results.append((list(source._pending), source.problems()))
    assert results[0] == results[1] and len(results[0][0]) > 10


def test_lines_kept_by_the_watcher_are_not_filtered_again() -> None:
    """``feed_line(..., wanted=True)`` (the watcher's lines, kept by its ``raw_keep = wanted_line``) gives what the
    source gives filtering every line itself."""
    lines = log_lines(os.path.join(FIXTURES, "placement", "kill", "eventlog"))
    results = []
    for kept in (True, False):
        source = EventLogSource(max_pending=100_000)
        for line in lines:
            if not kept:
                source.feed_line(line)
            elif wanted_line(line):
                source.feed_line(line, wanted=True)
        results.append((list(source._pending), source.problems()))
    assert results[0] == results[1] and len(results[0][0]) > 10


# --- hostile variants of recorded lines ------------------------------------------------------------------------
CLEAN = os.path.join(FIXTURES, "placement", "clean", "eventlog")


def _first(lines: list[bytes], prefix: bytes, where: Callable[[dict[str, Any]], bool]) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(prefix) and wanted_line(line) and where(json.loads(line)))


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Any], Any]:
    def change(obj: Any) -> Any:
        target = obj
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return obj

    return change


def _drop(path: tuple[Any, ...]) -> Callable[[Any], Any]:
    def change(obj: Any) -> Any:
        target = obj
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
        return obj

    return change


def _state_acc(obj: Any) -> int:
    from spark_state_observer.placement.task_lines import STATE_METRICS

    return next(i for i, a in enumerate(obj["Task Info"]["Accumulables"]) if a.get("Name") in STATE_METRICS)


def _acc(field: str, value: Any) -> Callable[[Any], Any]:
    def change(obj: Any) -> Any:
        obj["Task Info"]["Accumulables"][_state_acc(obj)][field] = value
        return obj

    return change


def _metric(field: str, value: Any) -> Callable[[Any], Any]:
    """Change ``field`` of the first state metric of the plan's first node that has one."""

    def change(obj: Any) -> Any:
        stack = [obj["sparkPlanInfo"]]
        while stack:
            node = stack.pop()
            for m in node.get("metrics", []):
                if m.get("name") == "number of total state rows":
                    m[field] = value
                    return obj
            stack.extend(node.get("children", []))
        raise AssertionError("no state metric in the plan")

    return change


_DROP = object()


def _node(field: str, value: Any) -> Callable[[Any], Any]:
    def change(obj: Any) -> Any:
        stack = [obj["sparkPlanInfo"]]
        while stack:
            node = stack.pop()
            if any(m.get("name") == "number of total state rows" for m in node.get("metrics", [])):
                if value is _DROP:
                    del node[field]
                else:
                    node[field] = value
                return obj
            stack.extend(node.get("children", []))
        raise AssertionError("no stateful node")

    return change


TASK_CHANGES: dict[str, Callable[[Any], Any]] = {
    "stage id a string": _set(("Stage ID",), "STAGE"),
    "stage id a float": lambda o: _set(("Stage ID",), float(o["Stage ID"]))(o),
    "stage id true": _set(("Stage ID",), True),
    "stage id missing": _drop(("Stage ID",)),
    "stage attempt a string": _set(("Stage Attempt ID",), "1"),
    "task info missing": _drop(("Task Info",)),
    "task info null": _set(("Task Info",), None),
    "task info a list": _set(("Task Info",), []),
    "executor a number": _set(("Task Info", "Executor ID"), 7),
    "executor missing": _drop(("Task Info", "Executor ID")),
    "host a number": _set(("Task Info", "Host"), 7),
    "host null": _set(("Task Info", "Host"), None),
    "partition -1": _set(("Task Info", "Partition ID"), -1),
    "partition null": _set(("Task Info", "Partition ID"), None),
    "partition missing": _drop(("Task Info", "Partition ID")),
    "partition a string": _set(("Task Info", "Partition ID"), "3"),
    "index and partition missing": lambda o: _drop(("Task Info", "Index"))(_drop(("Task Info", "Partition ID"))(o)),
    "attempt a string": _set(("Task Info", "Attempt"), "2"),
    "speculative a string": _set(("Task Info", "Speculative"), "true"),
    "speculative true": _set(("Task Info", "Speculative"), True),
    "launch a float": _set(("Task Info", "Launch Time"), 1.5e12),
    "finish null": _set(("Task Info", "Finish Time"), None),
    "finish before launch": _set(("Task Info", "Finish Time"), 0),
    "accumulables an object": _set(("Task Info", "Accumulables"), {}),
    "accumulables missing": _drop(("Task Info", "Accumulables")),
    "accumulable a number": lambda o: (o["Task Info"]["Accumulables"].insert(0, 5), o)[1],
    "accumulable name a number": lambda o: (o["Task Info"]["Accumulables"].append({"ID": 1, "Name": 5, "Update": "1"}), o)[1],
    "accumulable id a string": _acc("ID", "ID"),
    "accumulable id missing": _acc("ID", None),
    "update NaN string": _acc("Update", "NaN"),
    "update a long string": _acc("Update", "1" * 60),
    "update an object": _acc("Update", {"a": 1}),
    "update true": _acc("Update", True),
    "update a float": _acc("Update", 12.5),
    "duplicate state accumulable": lambda o: (
        o["Task Info"]["Accumulables"].append(dict(o["Task Info"]["Accumulables"][_state_acc(o)])),
        o,
    )[1],
    "reason a string": _set(("Task End Reason",), "Success"),
    "reason missing": _drop(("Task End Reason",)),
    "reason failed": _set(("Task End Reason",), {"Reason": "ExecutorLostFailure", "Executor ID": "1"}),
    "reason resubmitted": _set(("Task End Reason",), {"Reason": "Resubmitted"}),
    "reason a number": _set(("Task End Reason", "Reason"), 3),
}
PLAN_CHANGES: dict[str, Callable[[Any], Any]] = {
    "execution id a string": _set(("executionId",), "EXECUTION"),
    "execution id missing": _drop(("executionId",)),
    "plan null": _set(("sparkPlanInfo",), None),
    "node name null": _node("nodeName", None),
    "node name missing": _node("nodeName", _DROP),
    "metrics an object": _node("metrics", {}),
    "children with a number": _node("children", [1]),
    "accumulator id a string": _metric("accumulatorId", "7"),
    "accumulator id missing": _metric("accumulatorId", None),
    "metric name a number": _metric("name", 5),
}
JOB_CHANGES: dict[str, Callable[[Any], Any]] = {
    "properties a list": _set(("Properties",), []),
    "properties missing": _drop(("Properties",)),
    "batch id a string": _set(("Properties", "streaming.sql.batchId"), "BATCH"),
    "query id a number": _set(("Properties", "sql.streaming.queryId"), 5),
    "execution id a number": _set(("Properties", "spark.sql.execution.id"), 3),
    "job group a number": _set(("Properties", "spark.jobGroup.id"), 3),
    "stage ids a string": _set(("Stage IDs",), "1"),
    "stage ids with junk": lambda o: (o["Stage IDs"].extend(["x", None, 2.0, True]), o)[1],
}
# what json.loads reads and msgspec does not (or reads otherwise), at the byte level of a dumped line
BYTE_CHANGES: dict[str, Callable[[bytes], bytes]] = {
    "NaN literal": lambda b: b.replace(b'"Stage Attempt ID":0', b'"Stage Attempt ID":NaN', 1),
    "infinite number": lambda b: b.replace(b'"Stage Attempt ID":0', b'"Stage Attempt ID":1e999', 1),
    "huge integer": lambda b: b.replace(b'"Stage Attempt ID":0', b'"Stage Attempt ID":' + b"9" * 40, 1),
    "lone surrogate": lambda b: b.replace(b'"Executor ID":"', b'"Executor ID":"\\ud800', 1),
    "second Event key": lambda b: b[:-1] + b',"Event":"SparkListenerStageCompleted"}',
    "second Task Info": lambda b: b[:-1] + b',"Task Info":null}',
    "truncated": lambda b: b[: len(b) // 2],
    "deeply nested": lambda b: b[:-1] + b',"x":' + b"[" * 5000 + b"]" * 5000 + b"}",
    "trailing garbage": lambda b: b + b"x",
    "not an object": lambda b: b"[" + b + b"]",
}


def _variants() -> list[tuple[str, str, Callable[[Any], Any] | Callable[[bytes], bytes]]]:
    out: list[tuple[str, str, Any]] = [(f"task: {n}", "task", c) for n, c in TASK_CHANGES.items()]
    out += [(f"plan: {n}", "plan", c) for n, c in PLAN_CHANGES.items()]
    out += [(f"job: {n}", "job", c) for n, c in JOB_CHANGES.items()]
    out += [(f"{kind} bytes: {n}", f"{kind} bytes", c) for kind in ("task", "plan", "job") for n, c in BYTE_CHANGES.items()]
    return out


@pytest.fixture(scope="module")
def clean_lines() -> list[bytes]:
    return [line for line in log_lines(CLEAN) if wanted_line(line)]


@pytest.mark.parametrize(("name", "kind", "change"), _variants(), ids=[v[0] for v in _variants()])
def test_hostile_lines_read_alike(clean_lines: list[bytes], name: str, kind: str, change: Any) -> None:
    lines = list(clean_lines)
    streaming = lambda o: "sql.streaming.queryId" in (o.get("Properties") or {})  # noqa: E731
    at = {
        "task": lambda: _first(lines, TYPED[0], lambda o: True),
        "plan": lambda: _first(lines, b'{"Event":"' + SQL_START.encode(), lambda o: True),
        "job": lambda: _first(lines, TYPED[1], streaming),
    }[kind.split()[0]]()
    if kind.endswith("bytes"):
        lines[at] = change(_dumps(json.loads(lines[at])))
    else:
        lines[at] = _dumps(change(copy.deepcopy(json.loads(lines[at]))))
    fast, fast_problems, _ = read(lines, fast=True)
    reference, problems, _ = read(lines, fast=False)
    assert fast == reference
    assert fast_problems == problems


def test_adaptive_plans_read_alike(clean_lines: list[bytes]) -> None:
    """A plan update (adaptive execution) read through the typed decode replaces the execution's plan as the reference does."""
    lines = list(clean_lines)
    at = _first(lines, b'{"Event":"' + SQL_START.encode(), lambda o: True)
    obj = json.loads(lines[at])
    obj["Event"] = SQL_ADAPTIVE
    lines.insert(at + 1, _dumps(obj))
    assert read(lines, fast=True)[:2] == read(lines, fast=False)[:2]
