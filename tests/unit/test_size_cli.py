"""``spark-state-observer size`` says in words what to set, against the expected use; HDFS jobs get heap
figures; bad input is one line and exit 2 (issue 51). Through the CLI, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT

HDFS = os.path.join(FIXTURES, "hdfs", "run1")


def size(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_state_observer.cli", "size", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_an_oversized_rocksdb_state_is_told_what_to_set_against_its_expected_use() -> None:
    shape = ("--partitions", "200", "--rows", "10000000", "--bytes-per-row", "100")
    text, doc = size(*shape), json.loads(size(*shape, "--json").stdout)
    assert text.returncode == 0, text.stderr
    expected = doc["memory_expected_bytes_per_executor"] / doc["budget_bytes"]
    ceiling = doc["memory_bytes_per_executor"] / doc["budget_bytes"]
    assert expected < ceiling  # the advice's figure is the use the data fills, not the ceiling
    advice = "\n".join(doc["advice"])
    assert f"{expected:.0%} of its budget" in advice and f"({ceiling:.0%})" in advice and "'% held' is that share" in advice
    assert "boundedMemoryUsage=true" in advice and "maxMemoryUsageMB=268" in advice  # 70 % of the default 384 MiB overhead
    assert "executors" in advice and "spark.sql.shuffle.partitions" in advice and "new checkpoint" in advice
    assert "what to set:" in text.stdout and "maxMemoryUsageMB=268" in text.stdout


def test_a_small_state_needs_nothing_and_one_whose_ceiling_is_over_is_told_to_bound_it() -> None:
    done = size("--partitions", "4", "--rows", "1000", "--bytes-per-row", "50", "--executors", "4")
    assert done.returncode == 0 and "It fits even at the ceiling: nothing to set." in done.stdout
    done = size("--partitions", "4", "--rows", "1000", "--bytes-per-row", "50", "--executors", "2")
    assert "It fits as expected; should the state grow" in done.stdout and "maxMemoryUsageMB=268" in done.stdout


def test_an_hdfs_job_gets_the_heap_of_its_loaded_versions_not_rocksdb_figures() -> None:
    with open(os.path.join(HDFS, "progress.jsonl")) as f:
        newest = [json.loads(line) for line in f if line.strip()][-1]
    loaded = sum(op["memoryUsedBytes"] for op in newest["stateOperators"])
    current = sum(op["customMetrics"]["stateOnCurrentVersionSizeBytes"] for op in newest["stateOperators"])
    log = os.path.join(HDFS, "eventlog")
    text, doc = size("--from-log", log), json.loads(size("--from-log", log, "--json").stdout)
    assert text.returncode == 0, text.stderr
    assert doc["provider"] == "hdfs" and doc["heap"]["loaded_bytes"] == loaded and doc["heap"]["version_bytes"] == current
    assert doc["heap"]["budget_bytes"] == int((1024 - 300) * 1024 * 1024 * 0.4)  # a 1 GiB heap's user memory
    assert "JVM heap" in text.stdout and "memtable" not in text.stdout and "SST" not in text.stdout and "memoryOverhead" not in text.stdout
    assert "It fits: nothing to set." in text.stdout


@pytest.mark.parametrize(
    "args, says",
    [
        (("--partitions", "0"), "--partitions"),
        (("--operators", "0"), "--operators"),
        (("--rows", "-5"), "--rows"),
        (("--bytes-per-row", "-1"), "--bytes-per-row"),
        (("--executors", "x"), "--executors"),
        (("--query", "q1"), "--query needs --from-history"),
        (("--conf", "nonsense"), "is not KEY=VALUE"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(args: tuple[str, ...], says: str) -> None:
    done = size(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and says in done.stderr and "Traceback" not in done.stderr


def test_an_unknown_query_of_a_history_is_an_error(tmp_path) -> None:
    from spark_state_observer.offline.replay import replay

    db = str(tmp_path / "h.db")
    replay([os.path.join(HDFS, "eventlog")], history=db)
    assert size("--from-history", db).returncode == 0
    done = size("--from-history", db, "--query", "no-such-query")
    assert done.returncode == 2 and "no batch of query no-such-query" in done.stderr and done.stderr.count("\n") == 1
