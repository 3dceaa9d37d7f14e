"""attach() reads the capacity settings from a real Spark session's configuration."""

from __future__ import annotations

import pytest

from spark_state_observer.model.capacity import MIB, ROCKSDB_PREFIX


@pytest.mark.slow
def test_attach_reads_the_session_conf(spark) -> None:
    import spark_state_observer as observer

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


@pytest.mark.slow
def test_attach_names_the_application_as_its_event_log_does(spark) -> None:
    """A later ``builder.appName(...).getOrCreate()`` in the same driver renames the session, not the application:
    the listener keeps the application's name and id (the ones its event log, and so the watcher, carry)."""
    from pyspark.sql import SparkSession

    import spark_state_observer as observer
    from spark_state_observer.embedded.attach import spark_resource_attributes

    app_name, app_id = spark.sparkContext.appName, spark.sparkContext.applicationId
    SparkSession.builder.appName("renamed-by-a-later-builder").getOrCreate()
    try:
        assert spark.conf.get("spark.app.name") == "renamed-by-a-later-builder"  # what the session now says
        handle = observer.attach(spark, http_enabled=False, history_enabled=False)
        try:
            identity = handle.observer.identity
            assert (identity.name, identity.app_id) == (app_name, app_id)
        finally:
            handle.stop()
        attributes = spark_resource_attributes(spark)
        assert (attributes["spark.app.name"], attributes["spark.app.id"]) == (app_name, app_id)
    finally:
        spark.conf.set("spark.app.name", app_name)
