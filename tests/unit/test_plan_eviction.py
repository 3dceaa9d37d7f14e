"""Which stateful operators the watermark evicts by key, read from the plans recorded event logs hold.

Every line here is a line Spark wrote (``tests/fixtures/incidents``); where a case Spark was not recorded in is
needed (complete mode), a recorded line is changed in that one place and the test says so.
"""

from __future__ import annotations

import functools
import glob
import io
import json
import os
from typing import Any

import pytest

from bench import precision
from bench.eventlog_writer import ProgressiveLog, recorded_lines
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.history.loaders import load_events
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.plan_checkpoint import SQL_START_PREFIX, PlanCheckpoints
from spark_state_observer.model.plan_eviction import MAX_OPERATORS, MAX_RUNS, PlanEviction
from spark_state_observer.model.spark_events import QUERY_PROGRESS, line_prefix
from spark_state_observer.offline.eventlog import expand, open_decompressed
from spark_state_observer.settings import Settings

PROGRESS_PREFIX = line_prefix(QUERY_PROGRESS)


@functools.cache  # read once for every test of a recording
def logged(scenario: str) -> tuple[list[bytes], dict[str, list[tuple[int, str]]]]:
    """A recorded incident's stateful SQL execution starts, in order, and per run id (index, name) of every state
    operator as its progress reports them."""
    starts: list[bytes] = []
    runs: dict[str, list[tuple[int, str]]] = {}
    for path in expand(sorted(glob.glob(os.path.join(precision.INCIDENTS, scenario, "run*", "eventlog")))):
        with io.BufferedReader(open_decompressed(path)) as f:  # buffered: a raw stream reads a line a byte at a time
            for line in f:
                if line.startswith(SQL_START_PREFIX) and b"state info [ checkpoint = " in line:
                    starts.append(line)
                elif line.startswith(PROGRESS_PREFIX):
                    p = json.loads(line)["progress"]
                    runs.setdefault(p["runId"], [(i, op["operatorName"]) for i, op in enumerate(p.get("stateOperators", []))])
    assert starts and runs, scenario
    return starts, runs


def fed(scenario: str) -> tuple[PlanEviction, dict[str, list[tuple[int, str]]]]:
    starts, runs = logged(scenario)
    plans = PlanEviction()
    for line in starts:
        plans.feed_line(line)
    return plans, runs


@pytest.mark.parametrize(
    "scenario, evicted",
    [
        # a window count after a deduplication on (value, timestamp): both keys hold the watermarked time (3.5, 4.0, 4.3)
        ("dedup_agg_restart_35", {"stateStoreSave": True, "dedupe": True}),
        ("dedup_agg_restart_40", {"stateStoreSave": True, "dedupe": True}),
        ("dedup_agg_restart_43", {"stateStoreSave": True, "dedupe": True}),
        ("late_lagging_session", {"sessionWindowStateStoreSaveExec": True}),  # the session window in its input
        ("unbounded_growth", {"stateStoreSave": False}),  # a count per value: the key holds no event time
        ("growth_tumbling_long", {"stateStoreSave": True}),  # 30-minute windows: evicted once the watermark passes them
        ("growth_count_new_keys_watermark", {"stateStoreSave": False}),  # a watermark, but not in the key
        ("growth_session_long_gap", {"sessionWindowStateStoreSaveExec": True}),  # 30-minute sessions, append mode
        # a join cleaning both sides by the watermark through its time range (4.3), and one without a watermark (3.5)
        ("join_restart", {"symmetricHashJoin": True}),
        ("restore_join_35", {"symmetricHashJoin": False}),
        # evicted otherwise (a timeout, a TTL): not read, unknown
        ("restore_fmgws", {"flatMapGroupsWithState": None}),
        ("restore_tws", {"transformWithStateInPandasExec": None}),
    ],
)
def test_every_run_of_a_recording_reads_as_spark_evicts_it(scenario: str, evicted: dict[str, bool | None]) -> None:
    plans, runs = fed(scenario)
    for run_id, operators in runs.items():
        assert {name: plans("q", run_id, index, name) for index, name in operators} == evicted, run_id


def test_an_operator_the_plan_names_otherwise_is_unknown() -> None:
    """Progress and plan disagree on what operator ``index`` is (another Spark's numbering): no answer, not a wrong one."""
    plans, runs = fed("dedup_agg_restart_43")
    run_id = next(iter(runs))
    assert plans("q", run_id, 0, "stateStoreSave") is True
    assert plans("q", run_id, 0, "dedupe") is None and plans("q", run_id, 7, "stateStoreSave") is None
    assert plans("q", "not-a-run", 0, "stateStoreSave") is None and plans("q", None, 0, "stateStoreSave") is None


def test_complete_mode_evicts_nothing_whatever_its_key() -> None:
    """The recorded plan of a window count, its output mode changed to Complete (no recording runs one with a
    watermark): Spark keeps every group of a complete-mode aggregation."""
    starts, runs = logged("growth_tumbling_long")
    line, run_id = starts[-1], next(iter(runs))
    assert line.count(b", Update, ") == 2  # the plan's description and its tree
    plans = PlanEviction()
    plans.feed_line(line.replace(b", Update, ", b", Complete, "))
    assert plans("q", run_id, 0, "stateStoreSave") is False


def test_a_run_is_read_once_and_runs_are_bounded() -> None:
    starts, runs = logged("growth_tumbling_long")
    line, run_id = starts[-1], next(iter(runs))
    plans = PlanEviction()
    plans.feed_line(line)
    plans.feed_line(line.replace(b", Update, ", b", Complete, "))  # the same run again: its first plan stands
    assert plans("q", run_id, 0, "stateStoreSave") is True
    for n in range(MAX_RUNS + 5):
        plans.feed_line(line.replace(run_id.encode(), f"{n:08d}-0000-0000-0000-000000000000".encode()))
    assert plans("q", run_id, 0, "stateStoreSave") is None  # the oldest run forgotten first
    assert plans("q", f"{MAX_RUNS + 4:08d}-0000-0000-0000-000000000000", 0, "stateStoreSave") is True


def test_a_plan_of_endless_operators_is_kept_bounded() -> None:
    """A line repeating a recorded writer node under ever new operator ids: at most ``MAX_OPERATORS`` are kept."""
    starts, runs = logged("growth_tumbling_long")
    line, run_id = starts[-1], next(iter(runs))
    node = line[line.index(b'"simpleString":"StateStoreSave [') :]
    node = node[: node.index(b'",') + 1]
    flood = b"".join(node.replace(b"opId = 0,", f"opId = {n},".encode()) for n in range(MAX_OPERATORS * 4))
    plans = PlanEviction()
    plans.feed_line(line[: line.index(b'"sparkPlanInfo"')] + b'"sparkPlanInfo":' + flood)
    kept = [n for n in range(MAX_OPERATORS * 4) if plans("q", run_id, n, "stateStoreSave") is not None]
    assert kept == list(range(MAX_OPERATORS))


def test_torn_and_hostile_lines_are_ignored() -> None:
    line = logged("growth_tumbling_long")[0][-1]
    plans = PlanEviction()
    for cut in range(0, len(line), max(1, len(line) // 97)):
        plans.feed_line(line[:cut])  # a line cut anywhere: read as far as it goes or not at all, never raises
    plans.feed_line(SQL_START_PREFIX + b"state info [ checkpoint = " + b"\\n(1) StateStoreSave" * 10_000)
    plans.feed_line(b"\xff\xfe" + line)
    plans.feed_line(b"")


@pytest.mark.parametrize("scenario", ["dedup_agg_restart_35", "dedup_agg_restart_40", "dedup_agg_restart_43", "restore_session_35"])
def test_every_run_names_its_checkpoint_on_every_spark(scenario: str) -> None:
    """3.5 and 4.0 describe each plan with a run id of their own (``checkpoint = <unknown>``): the query's run and
    checkpoint are read from the plan's tree (before, no run of a 3.5 or 4.0 log had its checkpoint found)."""
    starts, runs = logged(scenario)
    checkpoints = PlanCheckpoints()
    for line in starts:
        checkpoints.feed_line(line)
    roots = {run_id: checkpoints("q", run_id) for run_id in runs}
    assert all(root is not None and root.startswith("file:/") and root.endswith("/checkpoint") for root in roots.values()), roots


def test_the_watcher_reads_the_plans_as_replay_does(tmp_path: Any) -> None:
    """``growth_tumbling_long``'s log written as Spark wrote it while ``watch`` follows it (placement on, the
    default): the 30-minute windows are bounded by their watermark live too, not unbounded as by the rows alone."""
    (folder,) = glob.glob(os.path.join(precision.INCIDENTS, "growth_tumbling_long", "run1", "eventlog", "eventlog_v2_*"))
    files = sorted(glob.glob(os.path.join(folder, "events_*")), key=lambda p: int(os.path.basename(p).split("_")[1]))
    lines = [line for path in files for line in recorded_lines(path)]
    app_id = next(json.loads(line)["App ID"] for line in lines if line.startswith(b'{"Event":"SparkListenerApplicationStart"'))
    (tmp_path / "logs").mkdir()
    settings = Settings(http_enabled=False, history_path=str(tmp_path / "history.db"))
    fleet = FleetObserver([str(tmp_path / "logs")], settings, WatchOptions(history=True), serve=False)
    log = ProgressiveLog(str(tmp_path / "logs"), app_id, "zstd", rolling=True)
    for _ in log.steps(lines):
        fleet.poll_once()
    log.finish()
    fleet.poll_once()
    fleet.stop()
    said = [(row.kind, row.attributes.get("evicted_by")) for row in load_events(str(tmp_path / "history.db")).itertuples()]
    assert [s for s in said if s[0] in (kinds.STATE_BOUNDED, kinds.STATE_UNBOUNDED)] == [(kinds.STATE_BOUNDED, "watermark")]
