"""Query detail: where one query's batch time goes, whether it keeps up, and what each state operator does."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from spark_state_observer.metrics import catalog
from spark_state_observer.mixin.dashboards import kafka
from spark_state_observer.mixin.dashboards.panels import BAD, KAFKA_NONE, OK, ROWS_PER_SECOND, WARN, Context, dashboard, row, ts
from spark_state_observer.mixin.promql import RATE


def build(ctx: Context) -> db.Dashboard:
    p, t = ctx.p, ctx.t
    by_query, by_op = p.by("query"), p.by("query, operator")
    batches = p.rate(catalog.BATCHES, p.query)
    phases = p.sel(catalog.PHASE_SECONDS, extra='phase!="triggerExecution"')
    kafka_max = p.sel(catalog.SOURCE_OFFSETS_BEHIND_LATEST, extra='stat="max"')
    kafka_avg = p.sel(catalog.SOURCE_OFFSETS_BEHIND_LATEST, extra='stat="avg"')
    return kafka.add_row(
        ctx,
        (
            dashboard(
                ctx,
                "query-detail",
                "Spark state / Query detail",
                "One query in depth: batch phases, pace, watermark, Kafka lag and every state operator's rows.",
            )
            .with_row(row("Batches"))
            .with_panel(
                ts(
                    ctx,
                    "Batch phase durations (mean per batch)",
                    "Mean time per batch in each phase, stacked. Bad: addBatch (state work) growing, or latestOffset/walCommit/commitOffsets slow (source or checkpoint storage).",
                    [
                        (
                            (
                                f"sum by ({p.by('query, phase')}) (rate({phases}[{RATE}])) "
                                f"/ on ({by_query}) group_left sum by ({by_query}) ({batches})"
                            ),
                            "{{query}} {{phase}}",
                        )
                    ],
                    "s",
                    [(None, OK), (t.batch_duration_seconds, BAD)],
                    stack=True,
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "Real-time mode: checkpoint interval and boundary pause",
                    "Queries under trigger(realTime=...) only. Each batch reads for its checkpoint interval (a long addBatch is normal); "
                    "between two batches the query plans and commits and reads nothing: the boundary pause, the latency a record "
                    "arriving then gets. Bad: the pause growing (checkpoint storage slow).",
                    [
                        (f"max by ({by_query}) ({p.sel(catalog.REAL_TIME_CHECKPOINT_INTERVAL)})", "{{query}} checkpoint interval"),
                        (f"max by ({by_query}) ({p.sel(catalog.REAL_TIME_BOUNDARY_PAUSE)})", "{{query}} boundary pause"),
                    ],
                    "s",
                    [(None, OK)],
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "Real-time mode: records behind at each batch boundary",
                    "Queries under trigger(realTime=...) only: records behind the latest offsets when a batch ended, against what the "
                    "batch read. Bad: behind above read, batch after batch (the query reads slower than records arrive; its rates cannot show it).",
                    [
                        (f"max by ({by_query}) ({p.sel(catalog.REAL_TIME_BOUNDARY_BACKLOG)})", "{{query}} behind"),
                        (
                            f"{p.per_batch(catalog.INPUT_ROWS, p.query, p.q)} and on ({by_query}) {p.sel(catalog.REAL_TIME_MODE)} == 1",
                            "{{query}} read per batch",
                        ),
                    ],
                    "short",
                    [(None, OK)],
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "Input vs processing rate per source",
                    "Rows per second arriving at and processed from each source. Bad: input above processing for minutes.",
                    [
                        (f"sum by ({p.by('query, source')}) ({p.sel(catalog.SOURCE_INPUT_ROWS_PER_SECOND)})", "{{query}} {{source}} input"),
                        (
                            f"sum by ({p.by('query, source')}) ({p.sel(catalog.SOURCE_PROCESSED_ROWS_PER_SECOND)})",
                            "{{query}} {{source}} processed",
                        ),
                    ],
                    ROWS_PER_SECOND,
                    [(None, OK)],
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "Watermark and event-time lag",
                    "Trigger time minus the watermark, and minus the newest event time; below 0, a watermark ahead of the trigger time. Bad: watermark lag far above the withWatermark delay or growing; newest-event lag growing (late or slow source); any watermark ahead (an event from the future: every later row is dropped as late).",
                    [
                        (f"max by ({by_query}) ({p.sel(catalog.WATERMARK_LAG)})", "{{query}} watermark lag"),
                        (
                            f"max by ({by_query}) ({p.sel(catalog.LAST_PROGRESS_TIMESTAMP)} - {p.sel(catalog.EVENT_TIME_MAX_TIMESTAMP)})",
                            "{{query}} newest event lag",
                        ),
                        (f"-max by ({by_query}) ({p.sel(catalog.WATERMARK_AHEAD)})", "{{query}} watermark ahead (negative)"),
                    ],
                    "s",
                    [(None, OK), (t.watermark_lag_seconds, BAD)],
                    show_thresholds=True,
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "Kafka offsets behind latest",
                    "Offsets between each Kafka source's batch end and the latest offset (max and avg over partitions). Bad: above a few batches' worth and growing.",
                    [
                        (f"max by ({p.by('query, source')}) ({kafka_max})", "{{query}} {{source}} max"),
                        (f"max by ({p.by('query, source')}) ({kafka_avg})", "{{query}} {{source}} avg"),
                    ],
                    "short",
                    [(None, OK), (t.kafka_lag_offsets, BAD)],
                    show_thresholds=True,
                    no_value=KAFKA_NONE,
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "Rows read and written per batch",
                    "Mean rows read from all sources and written to the sink per batch. Bad: output 0 while input is not (everything filtered, late or held in state).",
                    [
                        (p.per_batch(catalog.INPUT_ROWS, p.query, p.q), "{{query}} input"),
                        (p.per_batch(catalog.SINK_OUTPUT_ROWS, p.query, p.q), "{{query}} output"),
                    ],
                    "short",
                    [(None, OK)],
                    span=24,
                )
            )
            .with_row(row("State operators"))
            .with_panel(
                ts(
                    ctx,
                    "State rows held",
                    "Rows in each operator's state after the latest batch. Bad: steady growth without eviction (see rows removed).",
                    [(f"sum by ({by_op}) ({p.sel(catalog.by_key('numRowsTotal'), p.qo)})", "{{query}} / {{operator}}")],
                    "short",
                    [(None, OK)],
                    span=8,
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "Rows updated per batch",
                    "State rows added or updated per batch. Bad: far above the input rows (exploding keys) or rising steadily.",
                    [(p.per_batch(catalog.by_key("numRowsUpdated")), "{{query}} / {{operator}}")],
                    "short",
                    [(None, OK)],
                    span=8,
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "Rows removed (evicted) per batch",
                    "State rows removed by watermark, timeout or TTL per batch. Bad: 0 for long while rows grow (state is unbounded).",
                    [(p.or_zero(p.per_batch(catalog.by_key("numRowsRemoved"))), "{{query}} / {{operator}}")],
                    "short",
                    [(None, OK)],
                    span=8,
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "Rows dropped by watermark per batch",
                    "Input rows dropped as later than the watermark (an aggregation counts them after partial aggregation). Bad: above 0 when you expect no late data (watermark delay too short, a lagging producer, a source replayed old data, a record from the future); SparkStreamingLateRowsDropped fires at late_rows_share of the input.",
                    [(p.or_zero(p.per_batch(catalog.by_key("numRowsDroppedByWatermark"))), "{{query}} / {{operator}}")],
                    "short",
                    [(None, OK), (1, WARN)],
                    span=8,
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "Eviction ratio",
                    "Rows removed per row added or updated, over the observer's growth window. Bad: 0 for long (nothing is evicted).",
                    [(f"max by ({by_op}) ({p.sel(catalog.EVICTION_RATIO, p.qo)})", "{{query}} / {{operator}}")],
                    "percentunit",
                    [(None, BAD), (0.01, OK)],
                    span=8,
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "State growth rate",
                    "Rows per second the state grew over the growth window (least squares). Bad: positive for hours.",
                    [(f"max by ({by_op}) ({p.sel(catalog.ROWS_GROWTH_RATE, p.qo)})", "{{query}} / {{operator}}")],
                    "short",
                    [(None, OK)],
                    span=8,
                    minimum=None,
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "State time per batch",
                    "Time per batch spent updating, removing and committing state, summed over tasks. Bad: commit or removal dominating and rising.",
                    [
                        (p.per_batch(catalog.by_key("allUpdatesTimeMs")), "{{query}} / {{operator}} update"),
                        (p.per_batch(catalog.by_key("allRemovalsTimeMs")), "{{query}} / {{operator}} removal"),
                        (p.per_batch(catalog.by_key("commitTimeMs")), "{{query}} / {{operator}} commit"),
                    ],
                    "s",
                    [(None, OK)],
                    span=12,
                    stack=True,
                )
            )
            .with_panel(
                ts(
                    ctx,
                    "Time to state budget",
                    "Forecast time until the rows or memory budget is reached at the current growth (observer settings state_rows_budget / state_memory_budget_bytes). Bad: hours.",
                    [
                        (f"min by ({by_op}) ({p.sel(catalog.ROWS_BUDGET_ETA, p.qo)})", "{{query}} / {{operator}} rows"),
                        (f"min by ({by_op}) ({p.sel(catalog.MEMORY_BUDGET_ETA, p.qo)})", "{{query}} / {{operator}} memory"),
                    ],
                    "s",
                    [(None, BAD), (t.budget_eta_hours * 3600, OK)],
                    span=12,
                    no_value="No forecast: no budget is set (observer settings state_rows_budget, state_memory_budget_bytes) or the state is not growing",
                )
            )
        ),
    )
