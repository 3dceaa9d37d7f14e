"""attach() reads the capacity settings from a real Spark session's configuration."""

from __future__ import annotations

import pytest

from observer.model.capacity import MIB, ROCKSDB_PREFIX


@pytest.mark.slow
def test_attach_reads_the_session_conf(spark) -> None:
    import observer

    spark.conf.set(ROCKSDB_PREFIX + "blockCacheSizeMB", "16")
    try:
        handle = observer.attach(spark, http_enabled=False, history_enabled=False)
        try:
            conf = handle.observer.capacity_conf
            assert conf.provider == "rocksdb" and conf.block_cache_bytes == 16 * MIB
            assert conf.shuffle_partitions == int(spark.conf.get("spark.sql.shuffle.partitions"))
        finally:
            handle.stop()
    finally:
        spark.conf.unset(ROCKSDB_PREFIX + "blockCacheSizeMB")
