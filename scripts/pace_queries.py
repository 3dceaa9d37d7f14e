"""Pipelines for the pace corpus: a real stall, a real falling behind, and slow queries that do neither.

Started by ``scenario_job.py --query NAME`` (through ``incident_queries.start``) and recorded by
``scripts/record_pace.py``. Each is a count per key (stateful, so the observer tracks it) written by
``foreachBatch``, whose writer is where the time goes: it sleeps, as a slow warehouse would keep it
waiting. Each writer appends what it did to ``sink.jsonl`` in the run's folder (batch id, rows, when it
started and ended writing): the ground truth of when the query was blocked. Options (``--option k=v``):

- ``trigger``: the processingTime trigger, in seconds;
- ``sleep``: seconds every batch's write takes (a slow but steady sink);
- ``block_batch``, ``block_seconds``: the write of that batch hangs that long (a stall);
- ``seconds_per_row``: the write takes this long per row (the sink's capacity is its inverse), and
  ``ramp_seconds``: the rate source ramps its input from 0 to ``--rows-per-second`` over that time
  (Spark's ``rampUpTime``): input rises above the capacity, and the query falls behind.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from incident_queries import Context


def _sink(ctx: Context) -> Any:
    """The foreachBatch writer: reads the batch's counts (``keys`` rows at most), sleeps as the options say
    (per input row: the counts' growth), and logs what it did."""
    sleep = float(ctx.options.get("sleep", "0"))
    per_row = float(ctx.options.get("seconds_per_row", "0"))
    block_batch = int(ctx.options.get("block_batch", "-1"))
    block_seconds = float(ctx.options.get("block_seconds", "0"))
    log = os.path.join(ctx.out, "sink.jsonl")

    totals: dict[int, int] = {}  # key -> its count so far: the batch's input rows are what the counts grew by

    def write(batch: Any, batch_id: int) -> None:
        started = time.time()
        counts = {row["key"]: row["count"] for row in batch.collect()}
        rows = sum(n - totals.get(key, 0) for key, n in counts.items())
        totals.update(counts)
        time.sleep(sleep + per_row * rows + (block_seconds if batch_id == block_batch else 0.0))
        with open(log, "a") as f:
            f.write(json.dumps({"batch_id": batch_id, "rows": rows, "started": started, "ended": time.time()}) + "\n")

    return write


def paced(ctx: Context) -> Any:
    """Rate source (ramped when ``ramp_seconds`` is given) -> count per key -> the sleeping writer."""
    from pyspark.sql import functions as F

    reader = ctx.spark.readStream.format("rate").option("rowsPerSecond", ctx.rows_per_second)
    if "ramp_seconds" in ctx.options:
        reader = reader.option("rampUpTime", f"{ctx.options['ramp_seconds']}s")
    counts = reader.load().groupBy((F.col("value") % ctx.keys).alias("key")).count()
    return (
        counts.writeStream.foreachBatch(_sink(ctx))
        .outputMode("update")
        .queryName(ctx.name)
        .option("checkpointLocation", ctx.checkpoint)
        .trigger(processingTime=f"{ctx.options.get('trigger', '1')} seconds")
        .start()
    )


PIPELINES = {"paced": paced}
