"""Pipelines for the incident corpus, started by ``scenario_job.py --query NAME``.

Each one is a small stateful query (so the observer tracks it) that either runs cleanly (``join``) or is
built to fail in one way a real job fails: user code in a UDF or foreachBatch, a sink or source that breaks
mid-run, a transformWithState misconfiguration, a Python worker missing a module, running out of memory.
Failures that need something done to a running query (a path replaced, a corrupt file dropped) have an
``inject`` step that ``scenario_job.py --inject-after N`` calls after N batches.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Context:
    """What a pipeline may use: the session, its checkpoint, the run's options (paths, messages, limits)."""

    spark: Any
    checkpoint: str
    rows_per_second: int
    keys: int
    name: str
    out: str
    options: dict[str, str] = field(default_factory=dict)


def _rate(ctx: Context) -> Any:
    from pyspark.sql import functions as F

    return (
        ctx.spark.readStream.format("rate").option("rowsPerSecond", ctx.rows_per_second).load().withColumn("key", F.col("value") % ctx.keys)
    )


def _counts(df: Any) -> Any:
    """The stateful part: a count per key (update mode)."""
    return df.groupBy("key").count()


def noop_sink(df: Any, ctx: Context, mode: str = "update") -> Any:
    """The recordings' sink: Spark's ``noop`` format, so only the stateful operators cost anything; the trigger
    is 1 s unless the scenario's ``trigger`` option says otherwise."""
    return (
        df.writeStream.format("noop")
        .outputMode(mode)
        .queryName(ctx.name)
        .option("checkpointLocation", ctx.checkpoint)
        .trigger(processingTime=ctx.options.get("trigger", "1 second"))
        .start()
    )


def join(ctx: Context) -> Any:
    """Stream-stream inner join with watermarks on both sides (impressions joined with their clicks)."""
    from pyspark.sql import functions as F

    rate = ctx.spark.readStream.format("rate").option("rowsPerSecond", ctx.rows_per_second).load()
    impressions = rate.select(F.col("value").alias("ad_id"), F.col("timestamp").alias("shown_at")).withWatermark("shown_at", "10 seconds")
    clicks = (
        ctx.spark.readStream.format("rate")
        .option("rowsPerSecond", ctx.rows_per_second)
        .load()
        .where(F.col("value") % 3 == 0)
        .select(F.col("value").alias("click_ad_id"), F.col("timestamp").alias("clicked_at"))
        .withWatermark("clicked_at", "10 seconds")
    )
    joined = impressions.join(clicks, F.expr("click_ad_id = ad_id AND clicked_at BETWEEN shown_at AND shown_at + interval 20 seconds"))
    return noop_sink(joined, ctx, mode="append")


def foreach_503(ctx: Context) -> Any:
    """A count per key written by foreachBatch to a 'warehouse' that rejects every batch from ``fail_from`` on."""
    fail_from = int(ctx.options["fail_from"])
    message = ctx.options["message"]

    def write(batch: Any, batch_id: int) -> None:
        if batch_id >= fail_from:
            raise RuntimeError(message)
        batch.count()

    return (
        _counts(_rate(ctx))
        .writeStream.foreachBatch(write)
        .outputMode("update")
        .queryName(ctx.name)
        .option("checkpointLocation", ctx.checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )


def udf_error(ctx: Context) -> Any:
    """A Python UDF that raises ValueError once the rate source reaches ``fail_at_value``."""
    from pyspark.sql import functions as F

    fail_at = int(ctx.options["fail_at_value"])
    message = ctx.options["message"]

    @F.udf("long")
    def bucket(value: int) -> int:
        if value >= fail_at:
            raise ValueError(message)
        return value % 7

    return noop_sink(_counts(_rate(ctx).withColumn("key", bucket("value"))), ctx)


def file_sink(ctx: Context) -> Any:
    """Deduplication (append mode) written to a parquet folder; ``inject`` replaces that folder by a plain file."""
    df = _rate(ctx).withWatermark("timestamp", "5 seconds").dropDuplicates(["value", "timestamp"])
    return (
        df.writeStream.format("parquet")
        .option("path", ctx.options["path"])
        .outputMode("append")
        .queryName(ctx.name)
        .option("checkpointLocation", ctx.checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )


def file_sink_inject(ctx: Context) -> None:
    path = ctx.options["path"]
    shutil.rmtree(path)
    with open(path, "w") as f:
        f.write("not a folder: the sink's output path was replaced by a file\n")


def file_source(ctx: Context) -> Any:
    """A parquet file source (one file per batch) counted per key; ``inject`` drops a corrupt parquet file in."""
    from pyspark.sql import functions as F

    folder = ctx.options["path"]
    os.makedirs(folder, exist_ok=True)
    _write_parquet(folder, "part-0000.parquet", 0)
    _write_parquet(folder, "part-0001.parquet", 100)
    df = (
        ctx.spark.readStream.schema("value LONG")
        .option("maxFilesPerTrigger", 1)
        .parquet(folder)
        .withColumn("key", F.col("value") % ctx.keys)
    )
    return noop_sink(_counts(df), ctx)


def _write_parquet(folder: str, name: str, start: int) -> None:
    """A small valid parquet file (written aside, then renamed in, so the source never sees half a file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = os.path.join(folder, "." + name + ".tmp")
    pq.write_table(pa.table({"value": pa.array(range(start, start + 100), pa.int64())}), tmp)
    os.rename(tmp, os.path.join(folder, name))


def file_source_inject(ctx: Context) -> None:
    _write_parquet(ctx.options["path"], "part-0002.parquet", 200)
    path = os.path.join(ctx.options["path"], ctx.options["corrupt_name"])
    tmp = os.path.join(ctx.options["path"], ".corrupt.tmp")
    with open(tmp, "wb") as f:
        f.write(b"PAR1" + b"\x00garbage, not a parquet footer\x00" * 20)
    os.rename(tmp, path)


def tws_ttl_none(ctx: Context) -> Any:
    """transformWithStateInPandas asking for a TTL on its value state while running with TimeMode 'None'."""
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import (
        StatefulProcessor,
        StatefulProcessorHandle,
    )
    from pyspark.sql.types import LongType, StructField, StructType

    ttl_ms = int(ctx.options.get("ttl_ms", "60000"))

    class LastSeen(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.seen = handle.getValueState("seen", StructType([StructField("n", LongType())]), ttl_ms)

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803 - PySpark names the hook
            n = sum(len(pdf) for pdf in rows)
            self.seen.update((n,))
            yield pd.DataFrame({"key": [key[0]], "n": [n]})

        def close(self) -> None:
            pass

    out = StructType([StructField("key", LongType()), StructField("n", LongType())])
    df = (
        _rate(ctx)
        .groupBy("key")
        .transformWithStateInPandas(statefulProcessor=LastSeen(), outputStructType=out, outputMode="Update", timeMode="None")
    )
    return noop_sink(df, ctx)


def worker_import(ctx: Context) -> Any:
    """A pandas UDF defined in a module only the driver can import: every Python worker fails to unpickle it."""
    from pyspark.sql import functions as F

    module = ctx.options["module"]
    folder = tempfile.mkdtemp(prefix="driver-only-")
    with open(os.path.join(folder, f"{module}.py"), "w") as f:
        f.write("def enrich(values):\n    return values % 7\n")
    sys.path.insert(0, folder)  # the driver only: not in PYTHONPATH, so not in the workers'
    enrich = __import__(module).enrich
    bucket = F.pandas_udf(enrich, "long")  # type: ignore[call-overload]
    return noop_sink(_counts(_rate(ctx).withColumn("key", bucket("value"))), ctx)


def python_oom(ctx: Context) -> Any:
    """A UDF that allocates far more than the Python worker's memory limit (spark.executor.pyspark.memory)."""
    from pyspark.sql import functions as F

    fail_at = int(ctx.options["fail_at_value"])
    size = int(ctx.options["allocate_mb"]) * 1024 * 1024

    @F.udf("long")
    def bucket(value: int) -> int:
        if value >= fail_at:
            return len(bytearray(size))
        return value % 7

    return noop_sink(_counts(_rate(ctx).withColumn("key", bucket("value"))), ctx)


def unbounded(ctx: Context) -> Any:
    """A count per distinct value with no watermark: every row adds a key that is never evicted."""
    from pyspark.sql import functions as F

    rows = ctx.spark.readStream.format("rate").option("rowsPerSecond", ctx.rows_per_second).load()
    return noop_sink(rows.groupBy(F.col("value").alias("key")).count(), ctx)


def scheduled_counts(ctx: Context) -> Any:
    """A job scheduled every few minutes with ``Trigger.AvailableNow``: what arrived since its last run is
    deduplicated and counted per 5-second window and key (watermark 10 s), and the run stops cleanly."""
    from pyspark.sql import functions as F

    rows = (
        ctx.spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", ctx.rows_per_second)
        .option("numPartitions", 2)
        .option("advanceMillisPerBatch", 1000)
        .load()
    )
    counts = (
        rows.withWatermark("timestamp", "10 seconds")
        .dropDuplicates(["value", "timestamp"])
        .groupBy(F.window("timestamp", "5 seconds"), (F.col("value") % ctx.keys).alias("key"))
        .count()
    )
    return (
        counts.writeStream.format("noop")
        .outputMode("update")
        .queryName(ctx.name)
        .option("checkpointLocation", ctx.checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def late_future(ctx: Context) -> Any:
    """A count per 5-second window and key (watermark 10 s, update mode) over the union of a ``rate`` source
    (event time: its timestamp, now) and a JSON file source on a landing folder (``path``), empty at first;
    ``inject`` drops into it one file of one row whose event time is ``ahead_seconds`` (2 h) in the future."""
    from pyspark.sql import functions as F

    folder = ctx.options["path"]
    os.makedirs(folder, exist_ok=True)
    rate = (
        ctx.spark.readStream.format("rate")
        .option("rowsPerSecond", ctx.rows_per_second)
        .load()
        .select(F.col("timestamp").alias("event_time"), "value")
    )
    files = ctx.spark.readStream.schema("event_time TIMESTAMP, value LONG").json(folder)
    counts = (
        rate.unionByName(files)
        .withWatermark("event_time", "10 seconds")
        .groupBy(F.window("event_time", "5 seconds"), (F.col("value") % ctx.keys).alias("key"))
        .count()
    )
    return noop_sink(counts, ctx)


def late_future_inject(ctx: Context) -> None:
    """One JSON file, one row, its event time ``ahead_seconds`` from now (written aside, then renamed in);
    what was written goes to ``injected.json`` in the run's folder, for the truth."""
    import json
    import time
    from datetime import datetime, timezone

    written_at = time.time()
    event_time = written_at + float(ctx.options.get("ahead_seconds", "7200"))
    stamp = datetime.fromtimestamp(event_time, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    folder = ctx.options["path"]
    tmp = os.path.join(folder, ".future.json.tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps({"event_time": stamp, "value": 0}) + "\n")
    os.rename(tmp, os.path.join(folder, "future-0000.json"))
    with open(os.path.join(ctx.out, "injected.json"), "w") as f:
        json.dump({"written_at": written_at, "event_time": event_time, "event_time_text": stamp, "file": "future-0000.json"}, f)


# the lagging ``rate`` source of a query with two (a join): its description in the progress names this many
# partitions (the other's says ``default``; local[2]'s default is 2 as well), so the truth can tell which is which
LAGGING_PARTITIONS = 2
# the clicks of ``late_lagging_join``: the rate source's values ``value % CLICK_EVERY == 0`` (a third, as in ``join``)
CLICK_EVERY = 3


def _lagging_rows(ctx: Context, marked: bool = False) -> Any:
    """A ``rate`` source whose rows with ``value % every == 0`` (``every`` 20: 5 %) come from a lagging producer:
    their event time is the timestamp minus ``lag_seconds``, the others' the timestamp itself. ``marked``: with
    ``numPartitions`` set (``LAGGING_PARTITIONS``), to be told from another rate source in the progress."""
    from pyspark.sql import functions as F

    every = int(ctx.options.get("every", "20"))
    lag = int(ctx.options["lag_seconds"])
    rate = ctx.spark.readStream.format("rate").option("rowsPerSecond", ctx.rows_per_second)
    if marked:
        rate = rate.option("numPartitions", LAGGING_PARTITIONS)
    return rate.load().select(
        "value",
        F.when(F.col("value") % every == 0, F.col("timestamp") - F.expr(f"INTERVAL {lag} SECONDS"))
        .otherwise(F.col("timestamp"))
        .alias("event_time"),
    )


def late_lagging(ctx: Context) -> Any:
    """Deduplication on (value, event_time) after a 10 s watermark over the lagging producer's rows (``_lagging_rows``)."""
    deduped = _lagging_rows(ctx).withWatermark("event_time", "10 seconds").dropDuplicates(["value", "event_time"])
    return noop_sink(deduped, ctx, mode="append")


def late_lagging_window(ctx: Context) -> Any:
    """A count per 5-second window and key (``value % keys``; watermark 10 s, update mode) over the lagging
    producer's rows (``_lagging_rows``): the aggregation drops its late rows after the partial aggregation, so
    it counts late *groups*. With ``every`` a multiple of ``keys`` every late row has the same key (0)."""
    from pyspark.sql import functions as F

    counts = (
        _lagging_rows(ctx)
        .withWatermark("event_time", "10 seconds")
        .groupBy(F.window("event_time", "5 seconds"), (F.col("value") % ctx.keys).alias("key"))
        .count()
    )
    return noop_sink(counts, ctx)


def late_lagging_join(ctx: Context) -> Any:
    """The stream-stream inner join of ``join`` (impressions with their clicks, a 10 s watermark on each side, a
    click within 20 s of its impression) whose impressions come from the lagging producer (``_lagging_rows``,
    marked): the join drops each late impression that reaches it before it joins or enters the state, and counts
    it, a row. The query's watermark is the minimum of the two inputs' (``multipleWatermarkPolicy=min``), both on
    time but for the lagging share. ``numInputRows`` counts both sources' rows before any filter, and Spark copies
    the clicks' filter to the impressions through the key's equality: a third of each side reaches the join."""
    from pyspark.sql import functions as F

    impressions = (
        _lagging_rows(ctx, marked=True)
        .select(F.col("value").alias("ad_id"), F.col("event_time").alias("shown_at"))
        .withWatermark("shown_at", "10 seconds")
    )
    clicks = (
        ctx.spark.readStream.format("rate")
        .option("rowsPerSecond", ctx.rows_per_second)
        .load()
        .where(F.col("value") % CLICK_EVERY == 0)
        .select(F.col("value").alias("click_ad_id"), F.col("timestamp").alias("clicked_at"))
        .withWatermark("clicked_at", "10 seconds")
    )
    joined = impressions.join(clicks, F.expr("click_ad_id = ad_id AND clicked_at BETWEEN shown_at AND shown_at + interval 20 seconds"))
    return noop_sink(joined, ctx, mode="append")


def late_lagging_session(ctx: Context) -> Any:
    """A count per session (``session_window``, gap ``gap_seconds``, 5 s) and key (``value % keys``; watermark 10 s,
    append mode: Spark refuses update for a session window) over the lagging producer's rows (``_lagging_rows``). Spark merges each task's rows of a key into
    partial sessions before the state, so what it counts late is sessions, not rows. With ``keys`` a multiple of
    ``every`` the lagging producer owns whole keys (``every`` 20, ``keys`` 100: keys 0, 20, .., 80, each sent
    only late rows, two a second)."""
    from pyspark.sql import functions as F

    gap = int(ctx.options.get("gap_seconds", "5"))
    counts = (
        _lagging_rows(ctx)
        .withWatermark("event_time", "10 seconds")
        .groupBy(F.session_window("event_time", f"{gap} seconds"), (F.col("value") % ctx.keys).alias("key"))
        .count()
    )
    return noop_sink(counts, ctx, mode="append")


PIPELINES = {
    "scheduled_counts": scheduled_counts,
    "unbounded": unbounded,
    "join": join,
    "foreach_503": foreach_503,
    "udf_error": udf_error,
    "file_sink": file_sink,
    "file_source": file_source,
    "tws_ttl_none": tws_ttl_none,
    "worker_import": worker_import,
    "python_oom": python_oom,
    "late_future": late_future,
    "late_lagging": late_lagging,
    "late_lagging_window": late_lagging_window,
    "late_lagging_join": late_lagging_join,
    "late_lagging_session": late_lagging_session,
}
INJECTIONS = {"file_sink": file_sink_inject, "file_source": file_source_inject, "late_future": late_future_inject}


def start(query: str, ctx: Context) -> Any:
    """Start the pipeline called ``query`` (here, or one of ``growth_queries``, ``pace_queries``, ``restore_queries``)."""
    import growth_queries
    import pace_queries
    import restore_queries

    return {**PIPELINES, **growth_queries.PIPELINES, **pace_queries.PIPELINES, **restore_queries.PIPELINES}[query](ctx)


def inject(query: str, ctx: Context) -> None:
    """Do to the running ``query`` what makes it fail (replace its output path, corrupt its input)."""
    INJECTIONS[query](ctx)
