"""Pipelines for the restore corpus: every stateful operator kind holding a state big enough to restore visibly.

Started by ``scenario_job.py --query NAME`` (through ``incident_queries.start``) and recorded by
``scripts/record_restores.py``, which runs each twice on one checkpoint in two processes: the second run
restores what the first left. The source is Spark's ``rate-micro-batch`` (``--option rows_per_batch=N``
rows per batch, whatever the batch took: on a busy machine the plain rate source backfills a slow batch's
time into a huge next one), each row exploded into ``fanout`` rows (``--option fanout=N``), so a batch
writes ``rows_per_batch x fanout`` keys of ``value % keys`` (the state fills up to ``--keys`` entries:
big, bounded). The join keeps every row it read (no watermark, matched on a unique id).
"""

from __future__ import annotations

from typing import Any

from incident_queries import Context, noop_sink


def _source(ctx: Context) -> Any:
    """``rows_per_batch`` rows (``value``, ``timestamp``) per batch, however long the batches take."""
    return ctx.spark.readStream.format("rate-micro-batch").option("rowsPerBatch", int(ctx.options["rows_per_batch"])).load()


def _rows(ctx: Context) -> Any:
    """The rate source, each row exploded into ``fanout`` (key, timestamp) rows over ``ctx.keys`` keys."""
    from pyspark.sql import functions as F

    fanout = int(ctx.options.get("fanout", "100"))
    exploded = _source(ctx).select(
        F.explode(F.sequence(F.col("value") * fanout, F.col("value") * fanout + fanout - 1)).alias("n"), "timestamp"
    )
    return exploded.select((F.col("n") % ctx.keys).alias("key"), "timestamp")


def aggregation(ctx: Context) -> Any:
    """A count per key: ``stateStoreSave`` (and its ``StateStoreRestore``)."""
    return noop_sink(_rows(ctx).groupBy("key").count(), ctx)


def dedup(ctx: Context) -> Any:
    """dropDuplicates on the key, no watermark: ``dedupe`` holding every key."""
    return noop_sink(_rows(ctx).dropDuplicates(["key"]), ctx, mode="append")


def session(ctx: Context) -> Any:
    """Session windows per key with a 1 h gap and watermark: every key's session stays open."""
    from pyspark.sql import functions as F

    df = _rows(ctx).withWatermark("timestamp", "1 hour")
    return noop_sink(df.groupBy("key", F.session_window("timestamp", "1 hour")).count(), ctx, mode="append")


def join(ctx: Context) -> Any:
    """Stream-stream inner join on a unique id without watermark: both sides keep every row they read."""
    from pyspark.sql import functions as F

    fanout = int(ctx.options.get("fanout", "100"))
    ids = F.explode(F.sequence(F.col("value") * fanout, F.col("value") * fanout + fanout - 1))
    left = _source(ctx).select(ids.alias("ad_id"))
    right = _source(ctx).select(ids.alias("click_id"))
    return noop_sink(left.join(right.where(F.col("click_id") % 3 == 0), F.expr("click_id = ad_id")), ctx, mode="append")


def pandas_state(ctx: Context) -> Any:
    """applyInPandasWithState keeping a count per key, no timeout."""
    from collections.abc import Iterator

    import pandas as pd
    from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

    def count(key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        n = sum(len(pdf) for pdf in pdfs) + (state.get[0] if state.exists else 0)
        state.update((n,))
        yield pd.DataFrame({"key": [key[0]], "n": [n]})

    return noop_sink(
        _rows(ctx).groupBy("key").applyInPandasWithState(count, "key long, n long", "n long", "Update", GroupStateTimeout.NoTimeout),
        ctx,
    )


def tws(ctx: Context) -> Any:
    """transformWithStateInPandas keeping a count per key in a value state, no TTL."""
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.types import LongType, StructField, StructType

    class Count(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.count = handle.getValueState("count", StructType([StructField("n", LongType())]))

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803 - PySpark names the hook
            n = sum(len(pdf) for pdf in rows) + (self.count.get()[0] if self.count.exists() else 0)
            self.count.update((n,))
            yield pd.DataFrame({"key": [key[0]], "n": [n]})

        def close(self) -> None:
            pass

    out = StructType([StructField("key", LongType()), StructField("n", LongType())])
    return noop_sink(
        _rows(ctx)
        .groupBy("key")
        .transformWithStateInPandas(statefulProcessor=Count(), outputStructType=out, outputMode="Update", timeMode="None"),
        ctx,
    )


PIPELINES = {
    "restore_aggregation": aggregation,
    "restore_dedup": dedup,
    "restore_session": session,
    "restore_join": join,
    "restore_pandas_state": pandas_state,
    "restore_tws": tws,
}
