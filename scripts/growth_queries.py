"""Pipelines for the growth corpus: every stateful operator Spark has, built bounded or unbounded on purpose.

Started by ``scenario_job.py --query NAME`` (through ``incident_queries.start``) and recorded by
``scripts/record_growth.py``, which writes each recording's truth from ``SHAPES`` below: what the query
was built to do to its state (flat, filling up then evicting, or growing for ever), never from what the
observer said. The rate source gives ``value`` (0, 1, 2, ...) and ``timestamp`` (now): a key of
``value % N`` stays among N keys for ever (flat once all N were seen); a key of ``value`` or ``value // N``
is new all the time (unbounded unless something evicts it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from incident_queries import Context, noop_sink


@dataclass(frozen=True)
class Shape:
    """What a pipeline does to its state, by construction: the recording's truth."""

    bounded: bool  # for every stateful operator of the pipeline
    why: str
    grows_in: str = "rows"  # what grows when unbounded: "rows" (keys), or "size" (fixed keys whose values grow)
    # keep the (slimmed) event log: the verdict reads the plan's state keys from it, not only the progress
    event_log: bool = False
    # bounded at first, by construction, then unbounded once what bounded it stops (a watermark that stops)
    bounded_first: bool = False


def _rate(ctx: Context) -> Any:
    return ctx.spark.readStream.format("rate").option("rowsPerSecond", ctx.rows_per_second).load()


def session_open(ctx: Context) -> Any:
    """Session windows over 50 keys, each seen every second with a 10 s gap: sessions never close, 50 rows."""
    from pyspark.sql import functions as F

    df = _rate(ctx).withColumn("key", F.col("value") % 50).withWatermark("timestamp", "5 seconds")
    return noop_sink(df.groupBy("key", F.session_window("timestamp", "10 seconds")).count(), ctx, mode="append")


def _sessions_of_new_keys(ctx: Context, gap: str) -> Any:
    """A count per session window of ``gap`` over ever-new keys (a key per 10 rows), 5 s watermark, append mode."""
    from pyspark.sql import functions as F

    df = _rate(ctx).withColumn("key", (F.col("value") / 10).cast("long")).withWatermark("timestamp", "5 seconds")
    return noop_sink(df.groupBy("key", F.session_window("timestamp", gap)).count(), ctx, mode="append")


def session_closing(ctx: Context) -> Any:
    """Session windows over ever-new keys (a key per 10 rows), 3 s gap, 5 s watermark: sessions close and go."""
    return _sessions_of_new_keys(ctx, "3 seconds")


def session_long_gap(ctx: Context) -> Any:
    """``session_closing`` with a 30-minute gap: every key's session stays open longer than any run here, so the
    sessions of ever-new keys pile up until the watermark passes their end (bounded, nothing evicted yet)."""
    return _sessions_of_new_keys(ctx, "30 minutes")


def session_no_watermark(ctx: Context) -> Any:
    """Session windows over ever-new keys without a watermark (complete mode): no session is ever closed."""
    from pyspark.sql import functions as F

    df = _rate(ctx).withColumn("key", (F.col("value") / 10).cast("long"))
    return noop_sink(df.groupBy("key", F.session_window("timestamp", "3 seconds")).count(), ctx, mode="complete")


def count_fixed_keys(ctx: Context) -> Any:
    """A count per key over 100 fixed keys, no watermark: 100 rows from the first seconds on."""
    from pyspark.sql import functions as F

    return noop_sink(_rate(ctx).groupBy((F.col("value") % 100).alias("key")).count(), ctx)


def count_new_keys(ctx: Context) -> Any:
    """A count per distinct value, no watermark: a new key per row, never evicted."""
    from pyspark.sql import functions as F

    return noop_sink(_rate(ctx).groupBy(F.col("value").alias("key")).count(), ctx)


def tumbling(ctx: Context) -> Any:
    """5 s tumbling windows over 20 keys, 5 s watermark: windows close and are evicted."""
    from pyspark.sql import functions as F

    df = _rate(ctx).withColumn("key", F.col("value") % 20).withWatermark("timestamp", "5 seconds")
    return noop_sink(df.groupBy("key", F.window("timestamp", "5 seconds")).count(), ctx)


def _long_windows(df: Any, ctx: Context) -> Any:
    """A count per ``value`` (a new key per row) and 30-minute tumbling window starting when the query does (a count
    per user and half hour): a window's keys pile up until the watermark passes its end, which no run here reaches."""
    import time

    from pyspark.sql import functions as F

    start = f"{int(time.time()) % 1800} seconds"
    return noop_sink(df.groupBy(F.col("value").alias("key"), F.window("timestamp", "30 minutes", "30 minutes", start)).count(), ctx)


def tumbling_long(ctx: Context) -> Any:
    """``_long_windows`` with a 10 s watermark that keeps pace with the input: bounded, nothing evicted yet."""
    return _long_windows(_rate(ctx).withWatermark("timestamp", "10 seconds"), ctx)


def tumbling_long_stuck(ctx: Context) -> Any:
    """``_long_windows`` over two inputs, one of which goes quiet 40 s after the query starts: the global watermark
    (the min of the inputs') stops there, so no window can ever close and the keys pile up for ever (the quiet
    input is cut on its event time below its ``withWatermark``, as in ``join_idle_side``)."""
    import time

    from pyspark.sql import functions as F

    cutoff = F.timestamp_seconds(F.lit(time.time() + 40.0))
    busy = _rate(ctx).withWatermark("timestamp", "10 seconds")
    quiet = _rate(ctx).where(F.col("timestamp") < cutoff).withWatermark("timestamp", "10 seconds")
    return _long_windows(busy.unionByName(quiet), ctx)


def count_new_keys_watermark(ctx: Context) -> Any:
    """A count per distinct value with a 10 s watermark that cannot evict: the key does not hold the event time, so
    Spark keeps every key for ever (update mode; the watermark only drops late rows)."""
    from pyspark.sql import functions as F

    df = _rate(ctx).withWatermark("timestamp", "10 seconds")
    return noop_sink(df.groupBy(F.col("value").alias("key")).agg(F.max("timestamp").alias("last")), ctx)


def sliding(ctx: Context) -> Any:
    """10 s windows sliding by 5 s over 20 keys, 5 s watermark."""
    from pyspark.sql import functions as F

    df = _rate(ctx).withColumn("key", F.col("value") % 20).withWatermark("timestamp", "5 seconds")
    return noop_sink(df.groupBy("key", F.window("timestamp", "10 seconds", "5 seconds")).count(), ctx)


def dedup_watermark(ctx: Context) -> Any:
    """dropDuplicates on (value, timestamp) with a 5 s watermark: every row is new, evicted after the delay."""
    df = _rate(ctx).withWatermark("timestamp", "5 seconds").dropDuplicates(["value", "timestamp"])
    return noop_sink(df, ctx, mode="append")


def dedup_new_keys(ctx: Context) -> Any:
    """dropDuplicates on value without a watermark: every value is kept for ever."""
    return noop_sink(_rate(ctx).dropDuplicates(["value"]), ctx, mode="append")


def dedup_fixed_keys(ctx: Context) -> Any:
    """dropDuplicates on value % 100 without a watermark: 100 keys, flat."""
    from pyspark.sql import functions as F

    return noop_sink(_rate(ctx).withColumn("key", F.col("value") % 100).dropDuplicates(["key"]), ctx, mode="append")


def dedup_within(ctx: Context) -> Any:
    """dropDuplicatesWithinWatermark on value, 5 s watermark: each key expires after the delay."""
    df = _rate(ctx).withWatermark("timestamp", "5 seconds").dropDuplicatesWithinWatermark(["value"])
    return noop_sink(df, ctx, mode="append")


def _sides(ctx: Context, watermark: bool) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    left = _rate(ctx).select(F.col("value").alias("ad_id"), F.col("timestamp").alias("shown_at"))
    right = _rate(ctx).where(F.col("value") % 3 == 0).select(F.col("value").alias("click_ad_id"), F.col("timestamp").alias("clicked_at"))
    if watermark:
        left, right = left.withWatermark("shown_at", "5 seconds"), right.withWatermark("clicked_at", "5 seconds")
    return left, right


def join_cleanup(ctx: Context) -> Any:
    """Inner stream-stream join, 5 s watermarks and a 10 s time range: both sides' state is cleaned."""
    from pyspark.sql import functions as F

    left, right = _sides(ctx, watermark=True)
    cond = F.expr("click_ad_id = ad_id AND clicked_at BETWEEN shown_at AND shown_at + interval 10 seconds")
    return noop_sink(left.join(right, cond), ctx, mode="append")


def join_long_range(ctx: Context) -> Any:
    """``join_cleanup`` whose clicks may come up to 30 minutes after the impression: each side keeps half an hour of
    rows before the watermark lets it drop them, longer than any run here (bounded, nothing evicted yet)."""
    from pyspark.sql import functions as F

    left, right = _sides(ctx, watermark=True)
    cond = F.expr("click_ad_id = ad_id AND clicked_at BETWEEN shown_at AND shown_at + interval 30 minutes")
    return noop_sink(left.join(right, cond), ctx, mode="append")


def outer_join_cleanup(ctx: Context) -> Any:
    """Left outer stream-stream join with watermarks and a time range: unmatched rows are emitted and evicted."""
    from pyspark.sql import functions as F

    left, right = _sides(ctx, watermark=True)
    cond = F.expr("click_ad_id = ad_id AND clicked_at BETWEEN shown_at AND shown_at + interval 10 seconds")
    return noop_sink(left.join(right, cond, "leftOuter"), ctx, mode="append")


def join_idle_side(ctx: Context) -> Any:
    """``join_cleanup`` whose right input goes quiet 40 s after the query starts: the global watermark (the min
    of the inputs', ``spark.sql.streaming.multipleWatermarkPolicy=min``) stops there, so the join evicts
    nothing more and the left side's rows pile up.

    The right side keeps the rows stamped before the cutoff, filtered below its ``withWatermark`` so that no
    row reaches its watermark node after it (its source's unfiltered rows would still advance it). The cutoff
    is on the event time, not on ``value``: a filter on the join key (``value < 40 * rate``) is inferred onto
    the left side through ``click_ad_id = ad_id`` and pushed below its watermark too (as ``value % 3 == 0``
    is), so both inputs went quiet and the state stayed flat; the time range's bounds infer nothing."""
    import time

    from pyspark.sql import functions as F

    cutoff = F.timestamp_seconds(F.lit(time.time() + 40.0))
    left = _rate(ctx).select(F.col("value").alias("ad_id"), F.col("timestamp").alias("shown_at")).withWatermark("shown_at", "5 seconds")
    right = (
        _rate(ctx)
        .where((F.col("value") % 3 == 0) & (F.col("timestamp") < cutoff))
        .select(F.col("value").alias("click_ad_id"), F.col("timestamp").alias("clicked_at"))
        .withWatermark("clicked_at", "5 seconds")
    )
    cond = F.expr("click_ad_id = ad_id AND clicked_at BETWEEN shown_at AND shown_at + interval 10 seconds")
    return noop_sink(left.join(right, cond), ctx, mode="append")


def join_no_cleanup(ctx: Context) -> Any:
    """Inner stream-stream join on the key alone, no watermark: every row of both sides is kept for ever."""
    from pyspark.sql import functions as F

    left, right = _sides(ctx, watermark=False)
    return noop_sink(left.join(right, F.expr("click_ad_id = ad_id")), ctx, mode="append")


def _pandas_state(ctx: Context, timeout: bool) -> Any:
    """applyInPandasWithState, a count per key (a new key per 10 rows); with a 3 s processing-time timeout
    each key's state is removed once it times out, without it every key stays."""
    from collections.abc import Iterator

    import pandas as pd
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

    def count(key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        if state.hasTimedOut:
            state.remove()
            return
        n = sum(len(pdf) for pdf in pdfs) + (state.get[0] if state.exists else 0)
        state.update((n,))
        if timeout:
            state.setTimeoutDuration(3000)
        yield pd.DataFrame({"key": [key[0]], "n": [n]})

    df = _rate(ctx).withColumn("key", (F.col("value") / 10).cast("long"))
    return noop_sink(
        df.groupBy("key").applyInPandasWithState(
            count,
            outputStructType="key long, n long",
            stateStructType="n long",
            outputMode="Update",
            timeoutConf=GroupStateTimeout.ProcessingTimeTimeout if timeout else GroupStateTimeout.NoTimeout,
        ),
        ctx,
    )


def pandas_state_timeout(ctx: Context) -> Any:
    return _pandas_state(ctx, timeout=True)


def pandas_state_no_timeout(ctx: Context) -> Any:
    return _pandas_state(ctx, timeout=False)


def _tws(ctx: Context, ttl: bool) -> Any:
    """transformWithStateInPandas keeping a count per key (a new key per 10 rows), with a 3 s TTL or none."""
    import pandas as pd
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.types import LongType, StructField, StructType

    class Count(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            schema = StructType([StructField("n", LongType())])
            self.count = handle.getValueState("count", schema, 3000) if ttl else handle.getValueState("count", schema)

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803 - PySpark names the hook
            n = sum(len(pdf) for pdf in rows) + (self.count.get()[0] if self.count.exists() else 0)
            self.count.update((n,))
            yield pd.DataFrame({"key": [key[0]], "n": [n]})

        def close(self) -> None:
            pass

    out = StructType([StructField("key", LongType()), StructField("n", LongType())])
    df = _rate(ctx).withColumn("key", (F.col("value") / 10).cast("long"))
    return noop_sink(
        df.groupBy("key").transformWithStateInPandas(
            statefulProcessor=Count(), outputStructType=out, outputMode="Update", timeMode="ProcessingTime" if ttl else "None"
        ),
        ctx,
    )


def tws_ttl(ctx: Context) -> Any:
    return _tws(ctx, ttl=True)


def tws_no_ttl(ctx: Context) -> Any:
    return _tws(ctx, ttl=False)


def chained(ctx: Context) -> Any:
    """Two stateful operators chained: dedup with a 5 s watermark, then 5 s tumbling windows over 20 keys."""
    from pyspark.sql import functions as F

    df = _rate(ctx).withWatermark("timestamp", "5 seconds").dropDuplicates(["value", "timestamp"]).withColumn("key", F.col("value") % 20)
    return noop_sink(df.groupBy("key", F.window("timestamp", "5 seconds")).count(), ctx, mode="append")


PIPELINES = {
    "session_open": session_open,
    "session_closing": session_closing,
    "session_no_watermark": session_no_watermark,
    "session_long_gap": session_long_gap,
    "count_fixed_keys": count_fixed_keys,
    "count_new_keys": count_new_keys,
    "tumbling": tumbling,
    "sliding": sliding,
    "tumbling_long": tumbling_long,
    "tumbling_long_stuck": tumbling_long_stuck,
    "count_new_keys_watermark": count_new_keys_watermark,
    "dedup_watermark": dedup_watermark,
    "dedup_new_keys": dedup_new_keys,
    "dedup_fixed_keys": dedup_fixed_keys,
    "dedup_within": dedup_within,
    "join_cleanup": join_cleanup,
    "outer_join_cleanup": outer_join_cleanup,
    "join_long_range": join_long_range,
    "join_idle_side": join_idle_side,
    "join_no_cleanup": join_no_cleanup,
    "pandas_state_timeout": pandas_state_timeout,
    "pandas_state_no_timeout": pandas_state_no_timeout,
    "tws_ttl": tws_ttl,
    "tws_no_ttl": tws_no_ttl,
    "chained": chained,
}
SHAPES = {
    "session_open": Shape(True, "50 keys each seen every second within a 10 s gap: 50 open sessions, flat"),
    "session_closing": Shape(True, "sessions of ever-new keys close after the gap and the watermark evicts them"),
    "session_long_gap": Shape(True, "a 30-minute gap: sessions of ever-new keys stay open, then the watermark closes them", event_log=True),
    "session_no_watermark": Shape(False, "no watermark: sessions of ever-new keys are never closed"),
    "count_fixed_keys": Shape(True, "100 fixed keys, no watermark: 100 rows, flat"),
    "count_new_keys": Shape(False, "a new key per row, no watermark: nothing is ever evicted"),
    "tumbling": Shape(True, "tumbling windows closed by the watermark are evicted"),
    "sliding": Shape(True, "sliding windows closed by the watermark are evicted"),
    "tumbling_long": Shape(
        True, "a 30-minute window's new keys pile up until the watermark passes its end, then are evicted", event_log=True
    ),
    "tumbling_long_stuck": Shape(
        False,
        "one input goes quiet: the watermark (min of the inputs') stops, no window ever closes",
        event_log=True,
        bounded_first=True,
    ),
    "count_new_keys_watermark": Shape(False, "a watermark, but the key holds no event time: Spark never evicts a key", event_log=True),
    "dedup_watermark": Shape(True, "keys older than the watermark are evicted"),
    "dedup_new_keys": Shape(False, "every value kept for ever: no watermark"),
    "dedup_fixed_keys": Shape(True, "100 keys, no watermark: flat"),
    "dedup_within": Shape(True, "each key expires once the watermark passes its time plus the delay"),
    "join_cleanup": Shape(True, "watermarks and a time range: both sides are cleaned"),
    "outer_join_cleanup": Shape(True, "watermarks and a time range: unmatched rows are emitted and cleaned"),
    "join_long_range": Shape(True, "a 30-minute time range: each side's rows are kept half an hour, then cleaned", event_log=True),
    "join_idle_side": Shape(
        False,
        "the right input goes quiet after 40 s: the global watermark (min of the inputs) stops, nothing is evicted, the left side's rows pile up",
    ),
    "join_no_cleanup": Shape(False, "no watermark: both sides kept for ever"),
    "pandas_state_timeout": Shape(True, "each key's state is removed when its 3 s timeout fires"),
    "pandas_state_no_timeout": Shape(False, "a new key per 10 rows and no timeout: kept for ever"),
    "tws_ttl": Shape(True, "a 3 s TTL expires each key's value"),
    "tws_no_ttl": Shape(False, "a new key per 10 rows and no TTL: kept for ever"),
    "chained": Shape(True, "dedup evicted by the watermark, then windows closed by it"),
}
