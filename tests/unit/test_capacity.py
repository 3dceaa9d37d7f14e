"""The RocksDB capacity estimate (spark_state_observer.model.capacity): Spark's defaults, units, bad input, bounded mode."""

from __future__ import annotations

import pytest

from spark_state_observer.model.capacity import (
    MIB,
    PROVIDER_CONF,
    ROCKSDB_PREFIX,
    ROCKSDB_PROVIDER,
    Workload,
    estimate,
    parse_size,
    read_conf,
)

ROCKS = {PROVIDER_CONF: ROCKSDB_PROVIDER}


def test_defaults_follow_spark_and_rocksdb() -> None:
    conf = read_conf(ROCKS)
    assert (conf.write_buffer_bytes, conf.max_write_buffers, conf.block_cache_bytes) == (64 * MIB, 2, 8 * MIB)
    assert conf.overhead_bytes == 384 * MIB  # max(0.1 x 1g, 384m)
    assert not conf.bounded and conf.max_memory_bytes == 500 * MIB and not conf.assumed
    est = estimate(conf, Workload(partitions=4, operators=1, executors=2))
    assert est.instances == 4 and est.instances_per_executor == 2
    assert est.instance_ceiling_bytes == 136 * MIB
    assert est.memory_bytes_per_executor == 272 * MIB == est.memory_bound_bytes_per_executor
    assert est.budget_share == pytest.approx(272 / 384)


def test_joins_and_uneven_spread_round_up() -> None:
    est = estimate(read_conf(ROCKS), Workload(partitions=5, operators=1, stores_per_operator=4, executors=3))
    assert est.instances == 20 and est.instances_per_executor == 7


def test_bounded_mode_caps_the_executor_and_warns_above_the_overhead() -> None:
    conf = read_conf({**ROCKS, ROCKSDB_PREFIX + "boundedMemoryUsage": "true", "spark.executor.memory": "8g"})
    est = estimate(conf, Workload(partitions=200, executors=4))
    assert est.memory_bound_bytes_per_executor == 500 * MIB < est.memory_bytes_per_executor
    assert conf.overhead_bytes == int(0.1 * 8192 * MIB) and not est.assumed
    tight = estimate(read_conf({**ROCKS, ROCKSDB_PREFIX + "boundedMemoryUsage": "true"}), Workload(partitions=200, executors=4))
    assert any("above the executor's memoryOverhead" in n for n in tight.notes)


def test_data_sizes_give_expected_memory_and_disk() -> None:
    est = estimate(read_conf(ROCKS), Workload(partitions=4, executors=2, rows=40_000, bytes_per_row=100))
    assert est.sst_bytes == 4_000_000 and est.sst_bytes_per_executor == 2_000_000
    per_store = 1_000_000
    index_filter = 10_000 * 10 // 8 + per_store // 4096 * 40
    # the memtable holds at least one arena block (1 MiB: an eighth of 64 MiB, capped), the cache at most the data
    assert est.instance_expected_bytes == pytest.approx(MIB + per_store + index_filter, abs=40)
    big = estimate(read_conf(ROCKS), Workload(partitions=1, rows=1, bytes_per_row=300 * MIB))
    assert big.instance_expected_bytes == big.instance_ceiling_bytes
    assert est.instance_ceiling_bytes > est.instance_expected_bytes


@pytest.mark.parametrize(
    ("text", "unit", "expected"),
    [
        ("512m", MIB, 512 * MIB),
        ("2g", MIB, 2048 * MIB),
        ("1024", MIB, 1024 * MIB),
        ("2gb", 1, 2048 * MIB),
        ("1.5k", 1, 1536),
        ("x", 1, None),
    ],
)
def test_spark_sizes(text: str, unit: int, expected: int | None) -> None:
    assert parse_size(text, unit) == expected


@pytest.mark.parametrize(
    ("key", "value", "field", "expected", "note"),
    [
        ("writeBufferSizeMB", "512m", "write_buffer_bytes", 512 * MIB, "plain number of MB"),
        ("writeBufferSizeMB", "-1", "write_buffer_bytes", 64 * MIB, None),
        ("writeBufferSizeMB", "0", "write_buffer_bytes", 64 * MIB, "RocksDB's default"),
        ("maxWriteBufferNumber", "lots", "max_write_buffers", 2, "not a sensible"),
        ("blockCacheSizeMB", "-1", "block_cache_bytes", 8 * MIB, "not a positive"),
        ("blockCacheSizeMB", "99999999999", "block_cache_bytes", 8 * MIB, "absurd"),
        ("maxMemoryUsageMB", "2g", "max_memory_bytes", 2048 * MIB, "plain number of MB"),
        ("writeBufferCacheRatio", "1.5", "write_buffer_cache_ratio", 0.5, "ratio"),
        ("boundedMemoryUsage", "yes", "bounded", False, "true or false"),
    ],
)
def test_odd_values_get_a_note_and_a_default(key: str, value: str, field: str, expected: object, note: str | None) -> None:
    conf = read_conf({**ROCKS, ROCKSDB_PREFIX + key: value})
    assert getattr(conf, field) == expected
    if note is None:
        assert not conf.assumed
    else:
        assert conf.assumed and note in " ".join(conf.notes) and key in " ".join(conf.notes)


def test_ratios_spark_would_refuse_in_bounded_mode() -> None:
    conf = read_conf(
        {
            **ROCKS,
            ROCKSDB_PREFIX + "boundedMemoryUsage": "true",
            ROCKSDB_PREFIX + "writeBufferCacheRatio": "0.7",
            ROCKSDB_PREFIX + "highPriorityPoolRatio": "0.4",
        }
    )
    assert (conf.write_buffer_cache_ratio, conf.high_priority_pool_ratio) == (0.5, 0.1) and "refuses" in conf.notes[0]


def test_executor_overhead_settings() -> None:
    assert read_conf({"spark.executor.memoryOverhead": "1g"}).overhead_bytes == 1024 * MIB
    assert read_conf({"spark.executor.memory": "10g", "spark.executor.memoryOverheadFactor": "0.2"}).overhead_bytes == 2048 * MIB
    assert read_conf({"spark.executor.memory": "4g", "spark.executor.minMemoryOverhead": "1g"}).overhead_bytes == 1024 * MIB
    odd = read_conf({"spark.executor.memory": "lots"})
    assert odd.executor_memory_bytes == 1024 * MIB and odd.assumed
    assert read_conf({"spark.memory.offHeap.enabled": "true", "spark.memory.offHeap.size": "1g"}).offheap_bytes == 1024 * MIB


def test_hdfs_provider_is_said() -> None:
    conf = read_conf({PROVIDER_CONF: "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"})
    assert conf.provider == "hdfs" and "not RocksDB" in conf.notes[0]


def test_no_executors_or_negative_rows_never_raise() -> None:
    est = estimate(read_conf(ROCKS), Workload(partitions=4, executors=0, rows=-5, bytes_per_row=10))
    assert est.instances_per_executor == 4 and est.sst_bytes is None and len(est.notes) == 2
