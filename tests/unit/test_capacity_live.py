"""RocksDB capacity per executor on recorded local-cluster runs (scripts/record_capacity.py): replay, watch, attach."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import FIXTURES, eventlog_dir, fixture_runs
from spark_state_observer.fleet.eventlog_watch import EventLogWatcher
from spark_state_observer.metrics import catalog
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.capacity import CONF_PREFIXES, MIB, PROVIDER_CONF, ROCKSDB_PROVIDER
from spark_state_observer.offline.replay import replay

CAPACITY = os.path.join(FIXTURES, "capacity")
PER_EXECUTOR = (
    catalog.EXECUTOR_STORE_INSTANCES,
    catalog.EXECUTOR_ROCKSDB_MEMORY_ESTIMATE,
    catalog.EXECUTOR_ROCKSDB_MEMORY_CEILING,
    catalog.EXECUTOR_ROCKSDB_MEMORY_BUDGET,
    catalog.EXECUTOR_ROCKSDB_MEMORY_REPORTED,
    catalog.EXECUTOR_ROCKSDB_SST,
)


def run(name: str) -> tuple[dict, dict[tuple[str, str], float], object]:
    """Replay a recorded run: its newest progress, the capacity series by (metric, executor), the replay."""
    result = replay([os.path.join(CAPACITY, name, "eventlog")])
    assert not result.errors
    values = {
        (spec.prometheus_name, dict(labels)["executor"]): value
        for spec, labels, value in result.observer.tracker.app_values()
        if spec in PER_EXECUTOR
    }
    with open(os.path.join(CAPACITY, name, "progress.jsonl")) as f:
        newest = [json.loads(line) for line in f if line.strip()][-1]
    return newest, values, result


@pytest.mark.parametrize("name", ["e2_p4", "e2_p8", "e2_p16", "e3_p4", "e3_p8", "e3_p16"])
def test_per_executor_figures_add_up_to_what_spark_reported(name: str) -> None:
    newest, values, result = run(name)
    ops = newest["stateOperators"]
    executors = {ex for (_, ex) in values} - {"total"}
    assert executors == {str(i) for i in range(int(name[1]))}  # local-cluster[E,1,1024]
    instances = catalog.EXECUTOR_STORE_INSTANCES.prometheus_name
    assert values[(instances, "total")] == sum(op["numStateStoreInstances"] for op in ops)
    assert sum(values[(instances, ex)] for ex in executors) == values[(instances, "total")]
    # the tasks' memory, summed per executor, is what the progress summed over all tasks
    reported = catalog.EXECUTOR_ROCKSDB_MEMORY_REPORTED.prometheus_name
    assert values[(reported, "total")] == sum(op["memoryUsedBytes"] for op in ops)
    sst = catalog.EXECUTOR_ROCKSDB_SST.prometheus_name
    assert values[(sst, "total")] == pytest.approx(sum(op["customMetrics"]["rocksdbSstFileSize"] for op in ops))
    # the application's conf from the log: local-cluster's 1024 MB executors (Spark's default), so the 384 MiB minimum overhead
    budget = catalog.EXECUTOR_ROCKSDB_MEMORY_BUDGET.prometheus_name
    assert all(values[(budget, ex)] == 384 * MIB for ex in executors)
    conf = result.observer.capacity_conf
    assert (
        conf.provider == "rocksdb" and not conf.bounded and conf.shuffle_partitions == newest["stateOperators"][0]["numShufflePartitions"]
    )
    estimate, ceiling = catalog.EXECUTOR_ROCKSDB_MEMORY_ESTIMATE.prometheus_name, catalog.EXECUTOR_ROCKSDB_MEMORY_CEILING.prometheus_name
    for ex in executors:  # small state: far under its full write buffers, within a few times what Spark reported
        assert values[(reported, ex)] / 4 < values[(estimate, ex)] < values[(ceiling, ex)]
        n = values[(instances, ex)]  # 64 MiB x 2 write buffers + 8 MiB cache each, plus index and filters
        assert n * 136 * MIB <= values[(ceiling, ex)] < n * 137 * MIB
    assert not [s for s in result.observer.signals.recent if s.kind == kinds.ROCKSDB_MEMORY_IMPLAUSIBLE]


def test_the_watcher_reads_the_conf_from_the_log(tmp_path) -> None:
    src = os.path.join(CAPACITY, "e2_p4", "eventlog")
    for entry in os.listdir(src):
        shutil.copytree(os.path.join(src, entry), os.path.join(str(tmp_path), entry))
    watcher = EventLogWatcher([str(tmp_path)], grace_seconds=60)
    found = [app for app in watcher.poll() if app.identity is not None]
    conf = dict(found[0].identity.spark_conf)
    assert conf[PROVIDER_CONF] == ROCKSDB_PROVIDER and conf["spark.sql.streaming.stateStore.minDeltasForSnapshot"] == "5"
    assert all(k.startswith(CONF_PREFIXES) for k in conf) and "spark.executor.extraJavaOptions" not in conf  # nothing else


def test_bounded_memory_divides_the_shared_total_and_is_said_once_per_operator() -> None:
    """boundedMemoryUsage=true on 2 executors, 8 partitions: every instance on an executor reports the same share (SPARK-53002)."""
    _, values, result = run("bounded_e2_p8")
    assert result.observer.capacity_conf.bounded
    told = [s.attributes for s in result.observer.signals.recent if s.kind == kinds.ROCKSDB_MEMORY_IMPLAUSIBLE]
    assert sorted((a["operator_name"], a["reason"]) for a in told) == [
        ("dedupe", "bounded_division"),
        ("stateStoreSave", "bounded_division"),
    ]
    for batch in result.observer.placement.tracker.latest_batches():
        per_executor: dict[str, set[int | None]] = {}
        for r in batch.runs:
            per_executor.setdefault(r.executor_id, set()).add(r.memory_bytes)
        assert all(len(shares) == 1 for shares in per_executor.values())  # what the signal warns of, as recorded
    ceiling = catalog.EXECUTOR_ROCKSDB_MEMORY_CEILING.prometheus_name
    assert values[(ceiling, "0")] == values[(ceiling, "1")] == 500 * MIB  # capped by maxMemoryUsageMB


@pytest.mark.parametrize("name", ["e2_p16", "e3_p4", "e3_p8", "e3_p16"])
def test_before_the_first_flush_the_estimate_is_about_one_arena_block_per_store_as_spark_reports(name: str) -> None:
    """Runs stopped before any SST was written: each store holds one 1 MiB memtable arena block, by Spark's own report."""
    newest, values, _ = run(name)
    assert all(op["customMetrics"]["rocksdbSstFileSize"] == 0 for op in newest["stateOperators"])
    estimate, reported = catalog.EXECUTOR_ROCKSDB_MEMORY_ESTIMATE.prometheus_name, catalog.EXECUTOR_ROCKSDB_MEMORY_REPORTED.prometheus_name
    for ex in {ex for (_, ex) in values}:
        assert values[(estimate, ex)] == pytest.approx(values[(reported, ex)], rel=0.1)  # within 0.3% but for one e3_p16 executor
    total = values[(estimate, "total")] / values[(reported, "total")]
    assert 0.99 < total < 1.04


def test_an_hdfs_backed_state_gets_no_rocksdb_estimate() -> None:
    (run_dir,) = fixture_runs("hdfs")
    result = replay([eventlog_dir(run_dir)])
    assert result.observer.placement is not None and result.observer.placement.tracker.latest_batches()  # placement followed
    assert not [spec for spec, _, _ in result.observer.tracker.app_values() if spec in PER_EXECUTOR]
