"""Query detail: where one query's batch time goes, whether it keeps up, and what each state operator does."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from alerts.config import THRESHOLDS as T
from dashboards.panels import ROWS_PER_SECOND, dashboard, row, ts
from dashboards.promql import QO, QUERY, RATE, Q, or_zero, per_batch, rate, sel

OK, WARN, BAD = "green", "orange", "red"
BY_OP = "query, operator"
PHASES = Q + ', phase!="triggerExecution"'
KAFKA_MAX = Q + ', stat="max"'
KAFKA_AVG = Q + ', stat="avg"'

def build() -> db.Dashboard:
    batches = rate("spark_streaming_batches_total", QUERY)
    return (
        dashboard("spark-state-query-detail", "Spark state / Query detail",
                  "One query in depth: batch phases, pace, watermark, Kafka lag and every state operator's rows.")
        .with_row(row("Batches"))
        .with_panel(ts("Batch phase durations (mean per batch)", "Mean time per batch in each phase, stacked. Bad: addBatch (state work) growing, or latestOffset/walCommit/commitOffsets slow (source or checkpoint storage).",
                       [(f'sum by (query, phase) (rate({sel("spark_streaming_phase_seconds_total", PHASES)}[{RATE}])) '
                         f"/ on (query) group_left sum by (query) ({batches})", "{{query}} {{phase}}")],
                       "s", [(None, OK), (T["batch_duration_seconds"], BAD)], stack=True))
        .with_panel(ts("Input vs processing rate per source", "Rows per second arriving at and processed from each source. Bad: input above processing for minutes.",
                       [(f"sum by (query, source) ({sel('spark_streaming_source_input_rows_per_second')})", "{{query}} {{source}} input"),
                        (f"sum by (query, source) ({sel('spark_streaming_source_processed_rows_per_second')})", "{{query}} {{source}} processed")],
                       ROWS_PER_SECOND, [(None, OK)]))
        .with_panel(ts("Watermark and event-time lag", "Trigger time minus the watermark, and minus the newest event time. Bad: watermark lag far above the withWatermark delay or growing; newest-event lag growing (late or slow source).",
                       [(f"max by (query) ({sel('spark_streaming_watermark_lag_seconds')})", "{{query}} watermark lag"),
                        (f"max by (query) ({sel('spark_streaming_last_progress_timestamp_seconds')} - {sel('spark_streaming_event_time_max_timestamp_seconds')})", "{{query}} newest event lag")],
                       "s", [(None, OK), (T["watermark_lag_seconds"], BAD)], show_thresholds=True))
        .with_panel(ts("Kafka offsets behind latest", "Offsets between each Kafka source's batch end and the latest offset (max and avg over partitions). Bad: above a few batches' worth and growing.",
                       [(f'max by (query, source) ({sel("spark_streaming_source_offsets_behind_latest", KAFKA_MAX)})', "{{query}} {{source}} max"),
                        (f'max by (query, source) ({sel("spark_streaming_source_offsets_behind_latest", KAFKA_AVG)})', "{{query}} {{source}} avg")],
                       "short", [(None, OK), (T["kafka_lag_offsets"], BAD)], show_thresholds=True))
        .with_panel(ts("Rows read and written per batch", "Mean rows read from all sources and written to the sink per batch. Bad: output 0 while input is not (everything filtered, late or held in state).",
                       [(per_batch("spark_streaming_input_rows_total", QUERY, Q), "{{query}} input"),
                        (per_batch("spark_streaming_sink_output_rows_total", QUERY, Q), "{{query}} output")],
                       "short", [(None, OK)], span=24))
        .with_row(row("State operators"))
        .with_panel(ts("State rows held", "Rows in each operator's state after the latest batch. Bad: steady growth without eviction (see rows removed).",
                       [(f"sum by ({BY_OP}) ({sel('spark_state_rows', QO)})", "{{query}} / {{operator}}")],
                       "short", [(None, OK)], span=8))
        .with_panel(ts("Rows updated per batch", "State rows added or updated per batch. Bad: far above the input rows (exploding keys) or rising steadily.",
                       [(per_batch("spark_state_rows_updated_total"), "{{query}} / {{operator}}")], "short", [(None, OK)], span=8))
        .with_panel(ts("Rows removed (evicted) per batch", "State rows removed by watermark, timeout or TTL per batch. Bad: 0 for long while rows grow (state is unbounded).",
                       [(or_zero(per_batch("spark_state_rows_removed_total")), "{{query}} / {{operator}}")], "short", [(None, OK)], span=8))
        .with_panel(ts("Rows dropped by watermark per batch", "Input rows dropped as later than the watermark. Bad: above 0 when you expect no late data (watermark delay too short, or a source replayed old data).",
                       [(or_zero(per_batch("spark_state_rows_dropped_by_watermark_total")), "{{query}} / {{operator}}")],
                       "short", [(None, OK), (1, WARN)], span=8))
        .with_panel(ts("Eviction ratio", "Rows removed per row added or updated, over the observer's growth window. Bad: 0 for long (nothing is evicted).",
                       [(f"max by ({BY_OP}) ({sel('spark_state_eviction_ratio', QO)})", "{{query}} / {{operator}}")],
                       "percentunit", [(None, BAD), (0.01, OK)], span=8))
        .with_panel(ts("State growth rate", "Rows per second the state grew over the growth window (least squares). Bad: positive for hours.",
                       [(f"max by ({BY_OP}) ({sel('spark_state_rows_growth_rate', QO)})", "{{query}} / {{operator}}")],
                       "short", [(None, OK)], span=8, minimum=None))
        .with_panel(ts("State time per batch", "Time per batch spent updating, removing and committing state, summed over tasks. Bad: commit or removal dominating and rising.",
                       [(per_batch("spark_state_update_seconds_total"), "{{query}} / {{operator}} update"),
                        (per_batch("spark_state_removal_seconds_total"), "{{query}} / {{operator}} removal"),
                        (per_batch("spark_state_commit_seconds_total"), "{{query}} / {{operator}} commit")],
                       "s", [(None, OK)], span=12, stack=True))
        .with_panel(ts("Time to state budget", "Forecast time until the rows or memory budget is reached at the current growth (observer settings state_rows_budget / state_memory_budget_bytes). Bad: hours.",
                       [(f"min by ({BY_OP}) ({sel('spark_state_rows_budget_eta_seconds', QO)})", "{{query}} / {{operator}} rows"),
                        (f"min by ({BY_OP}) ({sel('spark_state_memory_budget_eta_seconds', QO)})", "{{query}} / {{operator}} memory")],
                       "s", [(None, BAD), (T["budget_eta_hours"] * 3600, OK)], span=12))
    )
