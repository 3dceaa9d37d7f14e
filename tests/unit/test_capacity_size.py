"""``spark-state-observer size``: the what-if from flags, from a recorded event log, and from a history."""

from __future__ import annotations

import json
import os

import pytest

from spark_state_observer.cli.main import main
from spark_state_observer.model.capacity import MIB

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")
EXECUTOR_LOSS = os.path.join(FIXTURES, "incidents", "executor_loss", "run1")


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["size", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def newest_progress(path: str) -> dict:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()][-1]


def test_what_if_from_flags(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(
        capsys,
        "--partitions",
        "16",
        "--operators",
        "2",
        "--stores-per-operator",
        "4",
        "--executors",
        "3",
        "--rows",
        "1000000",
        "--bytes-per-row",
        "100",
        "--conf",
        "spark.executor.memoryOverhead=2g",
    )
    assert doc["instances"] == 128 and doc["instances_per_executor"] == 43
    assert doc["memory_bytes_per_executor"] == 43 * doc["instance_ceiling_bytes"] == doc["memory_bound_bytes_per_executor"]
    assert doc["dfs_bytes"] == 100_000_000 and doc["budget_bytes"] == 2048 * MIB and not doc["assumed"]
    assert doc["restore_seconds"] > doc["restore_seconds_executor_loss"] > 0
    bounded = run_json(
        capsys,
        "--partitions",
        "16",
        "--conf",
        "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage=true",
        "--conf",
        "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB=300",
    )
    assert bounded["memory_bound_bytes_per_executor"] == 300 * MIB < bounded["memory_bytes_per_executor"]


def test_changelog_replay_adds_restore_time(capsys: pytest.CaptureFixture[str]) -> None:
    plain = run_json(capsys, "--partitions", "8")
    changelog = run_json(
        capsys, "--partitions", "8", "--conf", "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=true"
    )
    assert changelog["restore_seconds"] > plain["restore_seconds"]


def test_odd_input_is_marked_not_fatal(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "--partitions", "4", "--conf", "spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB=lots")
    assert doc["assumed"] and "blockCacheSizeMB" in doc["notes"][0]
    with pytest.raises(SystemExit) as refused:  # a flag that is not KEY=VALUE is the user's typo: refused (issue 51)
        main(["size", "--partitions", "4", "--conf", "nonsense"])
    assert refused.value.code == 2 and "'nonsense' is not KEY=VALUE" in capsys.readouterr().err
    assert main(["size", "--partitions", "4", "--conf", "spark.executor.memory=2x"]) == 0
    out = capsys.readouterr().out
    assert "ESTIMATE MARKED AS ASSUMED" in out and "spark.executor.memory" in out
    with pytest.raises(SystemExit) as refused:
        main(["size", "--partitions", "-1"])
    assert refused.value.code == 2


def test_from_a_recorded_event_log(capsys: pytest.CaptureFixture[str]) -> None:
    """A local-cluster run with two executors (one killed and replaced): shape, size and executors from its log."""
    doc = run_json(capsys, "--from-log", os.path.join(EXECUTOR_LOSS, "eventlog"))
    ops = newest_progress(os.path.join(EXECUTOR_LOSS, "progress.jsonl"))["stateOperators"]
    instances = sum(op["numStateStoreInstances"] for op in ops)
    assert doc["instances"] == instances and doc["instances_per_executor"] == -(-instances // 2)
    assert doc["measured"]["memory_bytes"] == sum(op["memoryUsedBytes"] for op in ops)
    assert doc["sst_bytes"] == doc["measured"]["sst_bytes"] == sum(op["customMetrics"]["rocksdbSstFileSize"] for op in ops)
    assert doc["measured"]["rows"] == sum(op["numRowsTotal"] for op in ops)
    # the flags override what the log says
    wider = run_json(capsys, "--from-log", os.path.join(EXECUTOR_LOSS, "eventlog"), "--executors", "4")
    assert wider["instances_per_executor"] == -(-instances // 4)


def test_a_missing_log_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", "--from-log", "/nonexistent/log"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_from_a_history(tmp_path: os.PathLike, capsys: pytest.CaptureFixture[str]) -> None:
    """The same run replayed into a history: the newest batch's state and the executors placement saw."""
    db = os.path.join(str(tmp_path), "h.sqlite")
    assert main(["replay", os.path.join(EXECUTOR_LOSS, "eventlog"), "--history", db]) == 0
    capsys.readouterr()
    from_log = run_json(capsys, "--from-log", os.path.join(EXECUTOR_LOSS, "eventlog"))
    doc = run_json(capsys, "--from-history", db)
    assert doc["instances"] == from_log["instances"] and doc["sst_bytes"] == from_log["sst_bytes"]
    assert doc["instances_per_executor"] == from_log["instances_per_executor"]
    assert doc["measured"] == from_log["measured"]
    with pytest.raises(SystemExit) as refused:  # an unknown query no longer falls back to defaults (issue 51)
        main(["size", "--from-history", db, "--query", "no-such-query"])
    assert refused.value.code == 2 and "holds no batch of query no-such-query" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--bytes-per-row", "1e308"),
        ("--bytes-per-row", "inf"),
        ("--bytes-per-row", "nan"),
        ("--bytes-per-row", "-1"),
        ("--bytes-per-row", "lots"),
        ("--rows", "1e9"),
        ("--rows", "9" * 30),
        ("--rows", "-5"),
        ("--partitions", "10000001"),
        ("--operators", "-1"),
        ("--stores-per-operator", "2.5"),
        ("--executors", "0"),
        ("--executors", "9" * 5000),
    ],
)
def test_every_numeric_flag_is_checked_before_the_estimate(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 48: ``--bytes-per-row 1e308`` ended in an OverflowError traceback; each flag out of its range is a
    usage error naming the flag (exit 2), and the largest values in range still give an estimate."""
    with pytest.raises(SystemExit) as refused:
        main(["size", "--rows", "10", flag, value])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and f"argument {flag}:" in err and "Traceback" not in err, err


def test_the_largest_values_in_range_still_give_an_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    from spark_state_observer.cli import size

    top = str(size.MAX_COUNT)
    doc = run_json(
        capsys,
        *("--partitions", top, "--operators", top, "--stores-per-operator", top, "--executors", "1"),
        *("--rows", str(size.MAX_ROWS), "--bytes-per-row", f"{size.MAX_BYTES_PER_ROW:.0f}"),
    )
    assert doc["instances"] == size.MAX_COUNT**3 and doc["sst_bytes"] > 0
