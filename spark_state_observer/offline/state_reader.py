"""Read the state itself through Spark's ``state-metadata`` and ``statestore`` sources (Spark 4.0+).

Both readers load each partition's store from the checkpoint in batch tasks, so they are a restore in
their own right: cheap on small state, expensive on large, and never to be polled. They only read; the
running query is not touched. On Spark 3.5, where they do not exist, ``StateReaderUnavailable`` says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MIN_SPARK = (4, 0)
FORMAT_CONF = "spark.sql.streaming.stateStore.checkpointFormatVersion"


class StateReaderUnavailable(RuntimeError):
    """This Spark cannot read state (3.5 has no state data source)."""


def _check(spark: Any) -> None:
    version = tuple(int(x) for x in spark.version.split(".")[:2])
    if version < MIN_SPARK:
        raise StateReaderUnavailable(
            f"reading state needs Spark 4.0 or newer (the 'statestore' and 'state-metadata' sources); this is Spark {spark.version}. "
            "The checkpoint inspector (spark-state-observer inspect) works on any version."
        )


@contextmanager
def _checkpoint_format(spark: Any, checkpoint: str) -> Iterator[None]:
    """Read a checkpoint-format-v2 checkpoint as one: Spark's state readers look for ``<version>.changelog``
    (v1 names) unless the reading session says v2 (4.3.0 fails with ``CANNOT_READ_STREAMING_STATE_FILE``).
    The session's own value is put back after the read; a remote checkpoint is read as the session says."""
    from spark_state_observer.offline.checkpoint.layout import format_version

    version = format_version(checkpoint)
    if version is None:
        yield
        return
    before = spark.conf.get(FORMAT_CONF, None)
    spark.conf.set(FORMAT_CONF, str(version))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(FORMAT_CONF)
        else:
            spark.conf.set(FORMAT_CONF, before)


def operators(spark: Any, checkpoint: str) -> list[dict[str, Any]]:
    """One row per operator and store: id, name, store, partitions, batch range (``state-metadata``)."""
    _check(spark)
    with _checkpoint_format(spark, checkpoint):
        return [r.asDict() for r in spark.read.format("state-metadata").load(checkpoint).collect()]


def _reader(spark: Any, checkpoint: str, operator_id: int, store: str, batch_id: int | None, options: dict[str, str]) -> Any:
    _check(spark)
    reader = spark.read.format("statestore").option("operatorId", operator_id)
    if store != "default":
        reader = reader.option("storeName", store)
    if batch_id is not None:
        reader = reader.option("batchId", batch_id)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(checkpoint)


def schema(spark: Any, checkpoint: str, operator_id: int = 0, store: str = "default") -> str:
    """The key and value schema of a store, as Spark's simple string."""
    with _checkpoint_format(spark, checkpoint):
        return str(_reader(spark, checkpoint, operator_id, store, None, {}).schema.simpleString())


def rows_per_partition(
    spark: Any, checkpoint: str, operator_id: int = 0, store: str = "default", batch_id: int | None = None
) -> dict[int, int]:
    """How many state rows each partition holds (at the last committed batch by default)."""
    with _checkpoint_format(spark, checkpoint):
        frame = _reader(spark, checkpoint, operator_id, store, batch_id, {})
        return {r["partition_id"]: r["count"] for r in frame.groupBy("partition_id").count().collect()}


def sample(
    spark: Any,
    checkpoint: str,
    operator_id: int = 0,
    store: str = "default",
    batch_id: int | None = None,
    key_contains: str | None = None,
    partition: int | None = None,
    offset: int = 0,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """A page of (key, value, partition) rows; ``key_contains`` searches the key's text form."""
    from pyspark.sql import functions as F

    frame = _reader(spark, checkpoint, operator_id, store, batch_id, {})
    if partition is not None:
        frame = frame.where(F.col("partition_id") == partition)
    if key_contains:
        frame = frame.where(F.to_json(F.col("key")).contains(key_contains))
    with _checkpoint_format(spark, checkpoint):
        rows = frame.orderBy("partition_id", F.to_json(F.col("key"))).limit(offset + limit).collect()[offset:]
    return [
        {
            "key": r["key"].asDict(recursive=True),
            "value": r["value"].asDict(recursive=True) if r["value"] else None,
            "partition_id": r["partition_id"],
        }
        for r in rows
    ]


def change_feed(
    spark: Any,
    checkpoint: str,
    start_batch: int,
    end_batch: int | None = None,
    operator_id: int = 0,
    store: str = "default",
    limit: int = 1000,
) -> list[dict[str, Any]]:
    """Updates and deletes between two batches (needs HDFS deltas or RocksDB changelog checkpointing)."""
    options = {"readChangeFeed": "true", "changeStartBatchId": str(start_batch)}
    if end_batch is not None:
        options["changeEndBatchId"] = str(end_batch)
    frame = _reader(spark, checkpoint, operator_id, store, None, options)
    return [
        {
            "batch_id": r["batch_id"],
            "change_type": r["change_type"],
            "key": r["key"].asDict(recursive=True),
            "value": r["value"].asDict(recursive=True) if r["value"] else None,
            "partition_id": r["partition_id"],
        }
        for r in _collect(spark, checkpoint, frame.orderBy("batch_id", "partition_id").limit(limit))
    ]


def _collect(spark: Any, checkpoint: str, frame: Any) -> list[Any]:
    with _checkpoint_format(spark, checkpoint):
        return list(frame.collect())
