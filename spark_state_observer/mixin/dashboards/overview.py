"""Overview: is every streaming query up, keeping pace, and is its state healthy? One screen per fleet."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from spark_state_observer.metrics import catalog
from spark_state_observer.mixin.dashboards.panels import (
    BAD,
    OK,
    ROWS_PER_SECOND,
    WARN,
    Context,
    dashboard,
    row,
    stat_panel,
    table_panel,
    ts,
)
from spark_state_observer.mixin.promql import RATE, bucket
from spark_state_observer.mixin.rules import RECORDED_BATCH_DURATION, scheduled_overdue

ANY_BAD = [(None, OK), (1, BAD)]


def build(ctx: Context) -> db.Dashboard:
    p, t = ctx.p, ctx.t
    by_query = p.by("query")
    # real-time-mode queries (their batches last the checkpoint interval) are left out of the batch-duration series
    real_time_left_out = f"unless on ({by_query}) (max by ({by_query}) ({p.sel(catalog.REAL_TIME_MODE)}) == 1)"
    return (
        dashboard(
            ctx,
            "overview",
            "Spark state / Overview",
            "Every streaming query of every application: status, pace, batch duration, state size, restarts and restores.",
            with_operator=False,
        )
        .with_row(row("Health"))
        .with_panel(
            stat_panel(
                ctx,
                "Active queries",
                "Queries currently running. Bad: fewer than you deploy (a query stopped or failed).",
                [(p.how_many(catalog.QUERY_STATUS, 'status="active"'), "active")],
                "none",
                [(None, BAD), (1, OK)],
            )
        )
        .with_panel(
            stat_panel(
                ctx,
                "Failed queries",
                "Queries whose last run failed and that have not run again or been retired since, whether or not their "
                "application is still followed. Bad: anything above 0.",
                [(p.how_many(catalog.QUERY_LIFECYCLE, 'state="failed"'), "failed")],
                "none",
                ANY_BAD,
            )
        )
        .with_panel(
            stat_panel(
                ctx,
                "Stalled",
                "Active queries without progress for many times their usual interval. Bad: above 0 (a hung batch or a long restore).",
                [(p.how_many(catalog.QUERY_STALLED), "stalled")],
                "none",
                ANY_BAD,
            )
        )
        .with_panel(
            stat_panel(
                ctx,
                "Crash looping",
                "Queries restarting in a loop. Bad: above 0; every restart restores the state again.",
                [(p.how_many(catalog.QUERY_CRASH_LOOP), "crash loop")],
                "none",
                ANY_BAD,
            )
        )
        .with_panel(
            stat_panel(
                ctx,
                "Scheduled runs overdue",
                "Queries on a schedule (availableNow or once, started by a scheduler) whose next run is later than their usual "
                "interval allows (SparkStreamingScheduledRunOverdue). Bad: above 0; nothing is processed until it runs.",
                [(f"count({scheduled_overdue(p, t)}) or vector(0)", "overdue")],
                "none",
                ANY_BAD,
            )
        )
        .with_panel(
            stat_panel(
                ctx,
                "Falling behind",
                "Queries whose input rate stayed above their processing rate. Bad: above 0; latency grows.",
                [(p.how_many(catalog.FALLING_BEHIND), "falling behind")],
                "none",
                ANY_BAD,
            )
        )
        .with_panel(
            stat_panel(
                ctx,
                "Dropping late rows",
                "Queries whose watermark drops a share of their input as too late (SparkStreamingLateRowsDropped). Bad: above 0; "
                "those rows are missing from the output.",
                [(p.how_many(catalog.LATE_ROWS_DROPPING), "dropping")],
                "none",
                ANY_BAD,
            )
        )
        .with_panel(
            stat_panel(
                ctx,
                "Restarts",
                "Restarts seen by the observer (same query id, new run id). Bad: growing; look at the Restore & rebalance dashboard.",
                [(f"sum(max by ({p.query}) ({p.sel(catalog.QUERY_RESTARTS)})) or vector(0)", "restarts")],
                "none",
                [(None, OK), (1, WARN), (t.crash_loop_restarts, BAD)],
            )
        )
        .with_panel(
            table_panel(
                ctx,
                "Query status",
                "One row per application, query and its current status. Bad: status failed or terminated for a query that should run.",
                [(f"{p.sel(catalog.QUERY_STATUS)} == 1", "")],
                "none",
                [(None, OK)],
                no_value="No query of the selection is known to the observers",
            )
        )
        .with_row(row("Pace"))
        .with_panel(
            ts(
                ctx,
                "Input vs processing rate",
                "Rows arriving vs rows processed per second, of running queries (an ended run's last rates are not drawn). Bad: input above processing for minutes (the query falls behind).",
                [
                    (p.running(f"max by ({by_query}) ({p.sel(catalog.INPUT_ROWS_PER_SECOND)})"), "{{query}} input"),
                    (p.running(f"max by ({by_query}) ({p.sel(catalog.PROCESSED_ROWS_PER_SECOND)})"), "{{query}} processed"),
                ],
                ROWS_PER_SECOND,
                [(None, OK)],
                no_value="No running query in the selection",
            )
        )
        .with_panel(
            ts(
                ctx,
                "Mean batch duration",
                "Mean micro-batch duration (rate of batch seconds over rate of batches). Bad: above the trigger interval, or rising. "
                "A real-time-mode query's batch lasts its checkpoint interval by design: it shows its boundary pause instead "
                "(planning and commits between two reading phases, when no record is read).",
                [
                    (
                        (
                            f"(max by ({by_query}) ({p.rate(catalog.BATCH_SECONDS, p.query)}) / "
                            f"max by ({by_query}) ({p.rate(catalog.BATCHES, p.query)})) {real_time_left_out}"
                        ),
                        "{{query}}",
                    ),
                    (f"max by ({by_query}) ({RECORDED_BATCH_DURATION}{{{p.q}}}) {real_time_left_out}", "{{query}} (5m, recorded)"),
                    (f"max by ({by_query}) ({p.sel(catalog.REAL_TIME_BOUNDARY_PAUSE)})", "{{query}} real-time boundary pause"),
                ],
                "s",
                [(None, OK), (t.batch_duration_seconds / 2, WARN), (t.batch_duration_seconds, BAD)],
                show_thresholds=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Watermark lag",
                "Trigger time minus the event-time watermark. Bad: far above the withWatermark delay, or growing (state cannot be evicted).",
                [(f"max by ({by_query}) ({p.sel(catalog.WATERMARK_LAG)})", "{{query}}")],
                "s",
                [(None, OK), (t.watermark_lag_seconds, BAD)],
                show_thresholds=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Batches per minute",
                "Completed micro-batches per minute. Bad: drops to 0 while the query is active (stalled).",
                [(f"{p.rate(catalog.BATCHES, by_query)} * 60", "{{query}}")],
                "none",
                [(None, BAD), (0.001, OK)],
            )
        )
        .with_row(row("State"))
        .with_panel(
            ts(
                ctx,
                "State rows",
                "Rows held in state, per query and operator. Bad: grows steadily without bound (no watermark, timeout or TTL).",
                [(f"sum by ({p.by('query, operator')}) ({p.sel(catalog.by_key('numRowsTotal'))})", "{{query}} / {{operator}}")],
                "short",
                [(None, OK)],
                span=8,
            )
        )
        .with_panel(
            ts(
                ctx,
                "State memory",
                "Memory of the state stores, per query and operator. Bad: near the executors' memory or the RocksDB bound.",
                [(f"sum by ({p.by('query, operator')}) ({p.sel(catalog.by_key('memoryUsedBytes'))})", "{{query}} / {{operator}}")],
                "bytes",
                [(None, OK), (t.state_memory_budget_ratio * t.state_memory_budget_bytes, WARN), (t.state_memory_budget_bytes, BAD)],
                span=8,
                show_thresholds=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Restarts and restores",
                "Query starts and state restores per interval. Bad: any restore you did not plan; repeated ones mean a crash loop.",
                [
                    (f"sum by ({by_query}) (increase({p.sel(catalog.QUERY_STARTS)}[{RATE}]))", "{{query}} starts"),
                    (f"sum by ({by_query}) (increase({p.sel(catalog.STATE_RESTORES)}[{RATE}]))", "{{query}} restores"),
                ],
                "none",
                [(None, OK), (1, WARN)],
                span=8,
                bars=True,
            )
        )
        .with_row(row("Observer"))
        .with_panel(
            ts(
                ctx,
                "Observer events",
                "Listener events received, dropped and failed per second. Bad: any dropped or failed events (metrics miss batches).",
                [
                    (p.rate(catalog.EVENTS_RECEIVED, "kind", p.endpoint), "received {{kind}}"),
                    (p.rate(catalog.EVENTS_DROPPED, "reason", p.endpoint), "dropped {{reason}}"),
                    (f"sum(rate({p.sel(catalog.EVENTS_FAILED, p.endpoint)}[{RATE}]))", "failed"),
                ],
                "ops",
                [(None, OK)],
            )
        )
        .with_panel(
            ts(
                ctx,
                "Observer processing time (p99)",
                "99th percentile of the worker's time per event and of the Spark listener callback. Bad: callback above a few ms (it runs on Spark's listener thread).",
                [
                    (f"histogram_quantile(0.99, {p.rate(bucket(catalog.PROCESSING_DURATION), 'le', p.endpoint)})", "processing p99"),
                    (f"histogram_quantile(0.99, {p.rate(bucket(catalog.CALLBACK_DURATION), 'le', p.endpoint)})", "callback p99"),
                ],
                "s",
                [(None, OK), (0.01, WARN), (0.1, BAD)],
            )
        )
    )
