"""Snapshot health of every store instance (issue 30) on recorded real runs.

``tests/fixtures/snapshot_health`` (``scripts/record_snapshot_health.py``, PySpark 4.3, 8 state partitions per
operator, Spark's top-5 instance report): ``never_uploaded`` (changelog checkpointing, a huge
``minDeltasForSnapshot``, ``forceSnapshotUploadOnLag`` off; then a restart), ``normal`` (a snapshot every 5
deltas, maintenance every 5 s). Each has the checkpoint its first run left and ``truth.json``, written by the
script from that checkpoint's listing.
"""

from __future__ import annotations

import glob
import json
import os
import shutil

import pytest

from checks import samples
from conftest import FIXTURES, eventlog_dir, progress_lines
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.metrics import catalog
from spark_state_observer.model.checkpoint_listing import list_snapshots
from spark_state_observer.model.plan_checkpoint import PlanCheckpoints
from spark_state_observer.model.signal_kinds import SNAPSHOT_LAGGING, SignalEvent
from spark_state_observer.offline.replay import ReplayResult, replay
from spark_state_observer.settings import Settings

HERE = os.path.join(FIXTURES, "snapshot_health")
NEVER, NORMAL = os.path.join(HERE, "never_uploaded"), os.path.join(HERE, "normal")


def _truth(scenario: str) -> dict:
    with open(os.path.join(scenario, "truth.json")) as f:
        return json.load(f)


def _replay(run: str, checkpoint: str | None = None, evaluate_seconds: float = 5.0) -> tuple[ReplayResult, list[SignalEvent]]:
    got: list[SignalEvent] = []
    locate = (lambda _query_id, _run_id: checkpoint) if checkpoint else None
    result = replay(
        [eventlog_dir(run)], Settings(http_enabled=False, evaluate_seconds=evaluate_seconds), on_signal=got.append, checkpoint=locate
    )
    return result, got


def _operator_gauges(result: ReplayResult, spec: catalog.MetricSpec) -> dict[str, float]:
    (record,) = result.observer.tracker.snapshot()
    return {dict(labels)["operator_index"]: v for (s, labels), v in record.signal_gauges.items() if s is spec}


def _instance_lags(result: ReplayResult) -> dict[tuple[str, str], float]:
    (record,) = result.observer.tracker.snapshot()
    return {
        (dict(labels)["operator_index"], dict(labels)["partition"]): v
        for (s, labels), v in record.signal_gauges.items()
        if s is catalog.SNAPSHOT_LAG_BATCHES
    }


def test_never_uploaded_from_the_progress_alone_is_exact_where_it_can_be_and_says_what_it_cannot_know() -> None:
    truth = _truth(NEVER)
    result, signals = _replay(os.path.join(NEVER, "run1"), evaluate_seconds=0.0)  # judged at every batch: the first beyond normal
    for op, parts in truth["operators"].items():
        # the most lagging instance is always reported: the largest lag is exact
        assert _operator_gauges(result, catalog.SNAPSHOT_MAX_LAG_BATCHES)[op] == max(p["last_version"] for p in parts.values())
        never, unknown = (
            _operator_gauges(result, s)[op] for s in (catalog.SNAPSHOT_INSTANCES_NEVER_UPLOADED, catalog.SNAPSHOT_INSTANCES_UNKNOWN)
        )
        really_never = sum(1 for p in parts.values() if p["newest_snapshot"] is None)
        assert never < really_never and never + unknown == really_never  # Spark told 5 of 8; the other 3 are said to be unknown
        assert _operator_gauges(result, catalog.SNAPSHOT_RESTORE_REPLAY_FILES).get(op) is None  # no listing, no figure
    # a never-uploaded instance has a lag series (counted from the first version), so the alert can see it
    lags = _instance_lags(result)
    assert lags and all(v == truth["last_committed_batch"] + 1 for v in lags.values())
    lagging = [s for s in signals if s.kind == SNAPSHOT_LAGGING]
    assert sorted(s.attributes["operator_id"] for s in lagging) == sorted(int(op) for op in truth["operators"])  # once per operator
    for s in lagging:
        a = s.attributes
        assert a["max_lag_batches"] > a["allowed_lag_batches"] >= a["max_lag_batches"] - 1  # at the first batch beyond normal
        assert a["max_lag_batches"] == a["batch_id"] + 1 and a["source"] == "progress"
        assert all(p["never_uploaded"] for p in a["partitions"]) and a["instances_unknown"] == 3


def test_never_uploaded_with_the_checkpoint_listed_counts_every_instance_and_the_files_a_restore_replays() -> None:
    truth = _truth(NEVER)
    result, signals = _replay(os.path.join(NEVER, "run1"), os.path.join(NEVER, "checkpoint"))
    for op, parts in truth["operators"].items():
        assert _operator_gauges(result, catalog.SNAPSHOT_INSTANCES_NEVER_UPLOADED)[op] == sum(
            1 for p in parts.values() if p["newest_snapshot"] is None
        )
        assert _operator_gauges(result, catalog.SNAPSHOT_INSTANCES_UNKNOWN)[op] == 0
        assert _operator_gauges(result, catalog.SNAPSHOT_RESTORE_REPLAY_FILES)[op] == sum(p["changelogs"] for p in parts.values())
    lagging = [s for s in signals if s.kind == SNAPSHOT_LAGGING]
    assert len(lagging) == len(truth["operators"]) and all(s.attributes["source"] == "checkpoint" for s in lagging)
    assert all(s.attributes["instances_never_uploaded"] == truth["partitions"] for s in lagging)


def test_the_files_a_restore_would_replay_are_what_spark_replayed_at_the_restart() -> None:
    """The dedup operator reports its replay on restart (the aggregation reloads twice and reads 0)."""
    listing, problems = list_snapshots(os.path.join(NEVER, "checkpoint"))
    assert not problems
    first = progress_lines(os.path.join(NEVER, "run2"))[0]
    dedupe = next(i for i, op in enumerate(first["stateOperators"]) if op["operatorName"] == "dedupe")
    replayed = first["stateOperators"][dedupe]["customMetrics"]["rocksdbNumReplayChangelogFiles"]
    assert replayed > 0 and sum(s.replay_files for (op, _, _), s in listing.items() if op == dedupe) == replayed


def test_a_restart_seen_from_the_progress_alone_counts_from_what_its_restore_replayed() -> None:
    """-1 after a restart says nothing of the run before; the restore does, where the operator reports it: the
    dedup replayed one changelog per version since batch 0 (no snapshot was ever uploaded), so its lag from the
    progress alone is the listing's. The aggregation loads twice and reports no files: counted from the run's
    first batch, a lower bound."""
    run2 = os.path.join(NEVER, "run2")
    alone, signals = _replay(run2)
    listed, _ = _replay(run2, os.path.join(NEVER, "checkpoint"))
    batches = progress_lines(run2)
    first, last = batches[0]["batchId"], batches[-1]["batchId"]
    replayed = {str(i): op["customMetrics"]["rocksdbNumReplayChangelogFiles"] for i, op in enumerate(batches[0]["stateOperators"])}
    assert sorted(replayed.values())[0] == 0 < sorted(replayed.values())[1]  # one operator reports its replay, one cannot
    from_progress = _operator_gauges(alone, catalog.SNAPSHOT_MAX_LAG_BATCHES)
    assert set(_operator_gauges(listed, catalog.SNAPSHOT_MAX_LAG_BATCHES).values()) == {last + 1}
    for op, files in replayed.items():
        assert from_progress[op] == (last + 1 if files else last + 1 - first)
    # beyond normal from the restart's first batch on: said once, for the operator whose restore told it
    lagging = [s for s in signals if s.kind == SNAPSHOT_LAGGING]
    (restored,) = [op for op, files in replayed.items() if files]
    assert [(str(s.attributes["operator_id"]), s.attributes["batch_id"], s.attributes["max_lag_batches"]) for s in lagging] == [
        (restored, first, first + 1)
    ]


@pytest.mark.parametrize("with_checkpoint", [False, True])
def test_a_normal_run_gives_no_signal(with_checkpoint: bool) -> None:
    truth = _truth(NORMAL)
    result, signals = _replay(os.path.join(NORMAL, "run1"), os.path.join(NORMAL, "checkpoint") if with_checkpoint else None)
    assert [s for s in signals if s.kind == SNAPSHOT_LAGGING] == []
    assert all(p["newest_snapshot"] is not None for parts in truth["operators"].values() for p in parts.values())
    assert set(_operator_gauges(result, catalog.SNAPSHOT_INSTANCES_LAGGING).values()) == {0}
    if with_checkpoint:
        assert set(_operator_gauges(result, catalog.SNAPSHOT_INSTANCES_NEVER_UPLOADED).values()) == {0}


def test_the_maintenance_interval_is_read_as_spark_reads_a_time_conf() -> None:
    from spark_state_observer.signals.snapshots import DEFAULT_MAINTENANCE_SECONDS, maintenance_seconds

    key = "spark.sql.streaming.stateStore.maintenanceInterval"
    assert [maintenance_seconds({key: v}) for v in ("5s", "500ms", "2m", "1500")] == [5.0, 0.5, 120.0, 1.5]
    assert maintenance_seconds({key: "soon"}) == maintenance_seconds({}) == DEFAULT_MAINTENANCE_SECONDS


def test_an_unreadable_checkpoint_costs_only_the_exact_view() -> None:
    def broken(_query_id: str, _run_id: str | None) -> str:
        raise RuntimeError("the JVM went away")

    got: list[SignalEvent] = []
    result = replay([eventlog_dir(os.path.join(NEVER, "run1"))], Settings(http_enabled=False), on_signal=got.append, checkpoint=broken)
    assert not result.errors
    assert {s.attributes["source"] for s in got if s.kind == SNAPSHOT_LAGGING} == {"progress"}
    remote, _ = _replay(os.path.join(NEVER, "run1"), "s3a://bucket/checkpoint")
    assert set(_operator_gauges(remote, catalog.SNAPSHOT_INSTANCES_UNKNOWN).values()) == {3}


def _log_lines(run: str) -> list[bytes]:
    import glob

    import zstandard

    (path,) = glob.glob(os.path.join(eventlog_dir(run), "*", "events_*"))
    with open(path, "rb") as f:
        return zstandard.ZstdDecompressor().stream_reader(f).read().splitlines(keepends=True)


def _recorded_root(run: str, lines: list[bytes]) -> str | None:
    plans = PlanCheckpoints()
    for line in lines:
        plans.feed_line(line)
    first = progress_lines(run)[0]
    return plans(first["id"], first["runId"])


def test_the_plans_name_each_runs_checkpoint() -> None:
    """Both runs of the never-uploaded scenario ran on one checkpoint: their plans say so, by run id."""
    runs = [os.path.join(NEVER, r) for r in ("run1", "run2")]
    roots = {_recorded_root(run, _log_lines(run)) for run in runs}
    (root,) = roots
    assert root is not None and root.startswith("file:/") and root.endswith("/checkpoint")
    assert PlanCheckpoints()(progress_lines(runs[0])[0]["id"], None) is None


def test_the_watcher_lists_the_checkpoint_its_plans_name(tmp_path) -> None:
    """The recorded log, its checkpoint copied beside it (the plans' path rewritten to the copy), followed by the
    watcher: every instance is known, from the listing."""
    run = os.path.join(NEVER, "run1")
    lines = _log_lines(run)
    recorded = _recorded_root(run, lines)
    assert recorded is not None
    copy = tmp_path / "checkpoint"
    shutil.copytree(os.path.join(NEVER, "checkpoint"), copy)
    logs = tmp_path / "logs"
    logs.mkdir()
    app_id = os.path.basename(glob.glob(os.path.join(eventlog_dir(run), "*"))[0]).removeprefix("eventlog_v2_")
    (logs / app_id).write_bytes(b"".join(lines).replace(recorded.encode(), f"file:{copy}".encode()))
    fleet = FleetObserver(
        [str(logs)], Settings(http_enabled=False, snapshot_scan_seconds=0), WatchOptions(read_finished_at_start=True), serve=False
    )
    try:
        fleet.poll_once()
        fleet.poll_once()
        got = samples(fleet.exposition().decode())
    finally:
        fleet.stop()

    def per_operator(name: str) -> dict[str, float]:
        return {dict(labels)["operator_index"]: v for (n, labels), v in got.items() if n == name}

    truth = _truth(NEVER)
    assert per_operator("spark_state_snapshot_instances_never_uploaded") == {op: len(parts) for op, parts in truth["operators"].items()}
    assert set(per_operator("spark_state_snapshot_instances_unknown").values()) == {0}
    assert per_operator("spark_state_snapshot_restore_replay_files") == {
        op: sum(p["changelogs"] for p in parts.values()) for op, parts in truth["operators"].items()
    }


@pytest.mark.parametrize(
    "scenario, snapshots, loads",
    [("dedup_agg_restart_40", False, False), ("dedup_agg_restart_41", True, False), ("dedup_agg_restart_43", True, True)],
)
def test_a_version_without_a_fact_shows_no_series_rather_than_zeros(scenario: str, snapshots: bool, loads: bool) -> None:
    """Recorded restarts on Spark 4.0, 4.1 and 4.3: instance metrics came in 4.1, loads from the DFS in 4.2."""
    runs = sorted(glob.glob(os.path.join(FIXTURES, "incidents", scenario, "run*")))
    text = replay([eventlog_dir(r) for r in runs], Settings(http_enabled=False)).exposition()
    names = {name for name, _ in samples(text)}
    health = {
        catalog.SNAPSHOT_MAX_LAG_BATCHES.name,
        catalog.SNAPSHOT_INSTANCES_NEVER_UPLOADED.name,
        catalog.SNAPSHOT_INSTANCES_UNKNOWN.name,
    }
    assert (health <= names) is snapshots and (not health & names) is (not snapshots)
    repair = {catalog.by_key("rocksdbNumLoadedFromDfs").prometheus_name, catalog.by_key("rocksdbNumSnapshotsAutoRepaired").prometheus_name}
    assert (repair <= names) is loads and (not repair & names) is (not loads)


def test_an_offline_repartition_is_shown_as_one() -> None:
    """4 state partitions, stopped, repartitioned offline to 8 (Spark 4.3's StreamingCheckpointManager), restarted:
    a partition change across the restart, with the restore a restart brings, and no reload or migration."""
    scenario = os.path.join(HERE, "repartition")
    truth = _truth(scenario)
    runs = sorted(glob.glob(os.path.join(scenario, "run*")))
    got: list[SignalEvent] = []
    replay([eventlog_dir(r) for r in runs], Settings(http_enabled=False), on_signal=got.append)
    first = progress_lines(runs[1])[0]
    (before,) = {op["numShufflePartitions"] for op in progress_lines(runs[0])[-1]["stateOperators"]}
    changed = [s.attributes for s in got if s.kind == "partitions_changed"]
    assert sorted(a["operator"] for a in changed) == sorted(op["operatorName"] for op in first["stateOperators"])
    expected = (before, truth["repartitioned_to"], "offline_repartition", first["batchId"])
    assert all((a["before"], a["after"], a["cause"], a["batch_id"]) == expected for a in changed)
    assert first["batchId"] > truth["repartition_after_batch"] + 1  # the repartition is a batch of its own
    kinds = {s.kind for s in got}
    assert "restore" in kinds and not kinds & {"store_reload", "partition_migrated", "state_task_retry"}


def test_an_offline_repartition_is_found_by_an_observer_that_never_saw_the_run_before() -> None:
    """Only the restarted application's event log, with the checkpoint's offset log as that run left it: the
    partitions before the repartition come from the checkpoint (its batches before the run's first)."""
    scenario = os.path.join(HERE, "repartition")
    truth = _truth(scenario)
    runs = sorted(glob.glob(os.path.join(scenario, "run*")))
    got: list[SignalEvent] = []
    logs = os.path.join(scenario, "checkpoint_logs")
    replay([eventlog_dir(runs[1])], Settings(http_enabled=False), on_signal=got.append, checkpoint=lambda _q, _r: logs)
    first = progress_lines(runs[1])[0]
    (before,) = {op["numShufflePartitions"] for op in progress_lines(runs[0])[-1]["stateOperators"]}
    changed = [s.attributes for s in got if s.kind == "partitions_changed"]
    assert sorted(a["operator"] for a in changed) == sorted(op["operatorName"] for op in first["stateOperators"])
    expected = (before, truth["repartitioned_to"], "offline_repartition", first["batchId"], "checkpoint")
    assert all((a["before"], a["after"], a["cause"], a["batch_id"], a["source"]) == expected for a in changed)
    assert all(truth["repartition_after_batch"] <= a["batch_before"] < first["batchId"] for a in changed)


def test_a_restart_without_repartition_seen_only_by_the_new_application_changes_no_partitions() -> None:
    """The real-time restart (same partitions), its checkpoint as the restarted run left it: nothing to report."""
    scenario = os.path.join(FIXTURES, "realtime", "restart")
    checkpoint = os.path.join(scenario, "checkpoint")
    got: list[SignalEvent] = []
    replay(
        [eventlog_dir(os.path.join(scenario, "run2"))],
        Settings(http_enabled=False),
        on_signal=got.append,
        checkpoint=lambda _q, _r: checkpoint,
    )
    assert "query_restarted" in {s.kind for s in got}
    assert not [s for s in got if s.kind == "partitions_changed"]


def test_a_checksum_mismatch_spark_reports_is_a_checkpoint_corruption_named_by_its_error_class() -> None:
    """Format v2 writes a checksum file beside each state file; the checksum of the newest changelog of every
    store altered between the runs: Spark's own verification (4.3) refuses the restore, under its load error
    class, and the termination is classed as a corrupt checkpoint naming the checksum class."""
    scenario = os.path.join(HERE, "checksum_mismatch")
    truth = _truth(scenario)
    got: list[SignalEvent] = []
    replay([eventlog_dir(os.path.join(scenario, "run2"))], Settings(http_enabled=False), on_signal=got.append)
    (terminated,) = [s.attributes for s in got if s.kind == "query_terminated"]
    assert terminated["outcome"] == "exception" and terminated["exception_class"] == "checkpoint_corruption"
    assert terminated["cause_error_class"] == "CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED"
    assert terminated["error_class"] != terminated["cause_error_class"]  # Spark reports the load failure on top
    assert "CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED" in terminated["root_cause"]
    # the file Spark names is one whose checksum the script altered
    named = terminated["root_cause"].split("File: ", 1)[1].split()[0]
    assert any(named.endswith(path[: -len(".crc")]) for path in truth["altered"])
    with open(os.path.join(scenario, "run2", "signals.jsonl")) as f:
        live = [json.loads(line) for line in f]
    (live_terminated,) = [s["attributes"] for s in live if s["kind"] == "query_terminated"]
    assert live_terminated["exception_class"] == "checkpoint_corruption"  # the listener said so too
