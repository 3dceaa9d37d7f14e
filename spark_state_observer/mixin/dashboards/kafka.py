"""The Kafka sources row of the query detail dashboard: lag in records and seconds, partitions, health, catch-up.

Every panel reads the series ``spark_state_observer.signals.kafka`` derives from the offsets of each progress (Spark keeps
its Kafka offsets in the checkpoint, so no Kafka-side tool sees them); the thresholds are the alerts' own.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from spark_state_observer.metrics import catalog
from spark_state_observer.mixin.dashboards.panels import BAD, KAFKA_NONE, OK, WARN, Context, row, ts
from spark_state_observer.mixin.promql import RATE


def add_row(ctx: Context, dash: db.Dashboard) -> db.Dashboard:
    """``dash`` with the row *Kafka sources* appended."""
    p, t = ctx.p, ctx.t
    by_topic = p.by("query, source_index, topic")
    by_partition = p.by("query, topic, partition")
    legend = "{{query}} {{topic}}"
    return (
        dash.with_row(row("Kafka sources"))
        .with_panel(
            ts(
                ctx,
                "Kafka lag per topic (records)",
                "Records the query has not read yet, summed over the topic's partitions (latest offset when a batch was planned minus its end offset). Bad: above the alert level and growing. Needs a rate limit (maxOffsetsPerTrigger) to show at all.",
                [(f"sum by ({by_topic}) ({p.sel(catalog.KAFKA_TOPIC_LAG_RECORDS)})", legend)],
                "short",
                [(None, OK), (t.kafka_lag_offsets, BAD)],
                span=8,
                show_thresholds=True,
                no_value=KAFKA_NONE,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Kafka lag in seconds",
                "Age of the oldest unread record per topic (interpolated over the history of latest offsets), next to the event-time lag of the watermark. Bad: above the freshness SLO line.",
                [
                    (f"max by ({by_topic}) ({p.sel(catalog.KAFKA_TOPIC_LAG_SECONDS)})", legend),
                    (f"max by ({p.by('query')}) ({p.sel(catalog.WATERMARK_LAG)})", "{{query}} watermark lag"),
                ],
                "s",
                [(None, OK), (t.kafka_lag_seconds_slo / 2, WARN), (t.kafka_lag_seconds_slo, BAD)],
                span=8,
                show_thresholds=True,
                no_value=KAFKA_NONE,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Catch-up forecast",
                "Seconds until the query has read its backlog, at the rate it reads while behind and the topic's produce rate; 0 when caught up, absent when not draining. Bad: rising, or gone while the lag grows.",
                [(f"max by ({by_topic}) ({p.sel(catalog.KAFKA_CATCH_UP_FORECAST)})", legend)],
                "s",
                [(None, OK), (t.kafka_lag_seconds_slo, WARN)],
                span=8,
                no_value=KAFKA_NONE,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Most lagging partitions",
                "Records behind per partition, for the top-K partitions by lag (observer setting partition_top_k). Bad: one partition far above the others (skew, or a stuck partition).",
                [
                    (f"max by ({by_partition}) ({p.sel(catalog.KAFKA_LAG_RECORDS)})", "{{query}} {{topic}}[{{partition}}]"),
                    (f"max by ({by_partition}) ({p.sel(catalog.KAFKA_LAG_SECONDS)})", "{{query}} {{topic}}[{{partition}}] seconds"),
                ],
                "short",
                [(None, OK)],
                span=12,
                no_value=KAFKA_NONE,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Partitions, stuck partitions and offset anomalies",
                "Partitions read per topic, partitions stuck (records to read, end offset not moving), partitions added, and offsets that skipped or went back per interval. Bad: any stuck partition or anomaly (data-loss risk).",
                [
                    (f"max by ({by_topic}) ({p.sel(catalog.KAFKA_PARTITIONS)})", legend + " partitions"),
                    (f"max by ({by_topic}) ({p.sel(catalog.KAFKA_STUCK_PARTITIONS)})", legend + " stuck"),
                    (f"sum by ({by_topic}) (increase({p.sel(catalog.KAFKA_PARTITIONS_ADDED)}[{RATE}]))", legend + " added"),
                    (
                        f"sum by ({p.by('query, source_index, topic, kind')}) (increase({p.sel(catalog.KAFKA_OFFSET_ANOMALIES)}[{RATE}]))",
                        legend + " {{kind}}",
                    ),
                ],
                "short",
                [(None, OK)],
                span=12,
                no_value=KAFKA_NONE,
            )
        )
    )
