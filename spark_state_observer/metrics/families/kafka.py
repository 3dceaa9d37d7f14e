"""Kafka source metrics, from the offsets of each progress (``spark_state_observer.signals.kafka_lag``, ``spark_state_observer.signals.kafka``).

Specs are written here and assembled, checked and exported by ``spark_state_observer.metrics.catalog``, the one module
emitters import (``catalog.X``); see its docstring for what the kinds mean.
"""

from __future__ import annotations

from spark_state_observer.metrics.spec import COUNTER, GAUGE, MetricSpec
from spark_state_observer.model.alert_spec import WARNING, AlertSpec


# --- Kafka sources, from the offsets of each progress (spark_state_observer.signals.kafka_lag, spark_state_observer.signals.kafka) ---
def _k(name: str, kind: str, unit: str, help: str, labels: tuple[str, ...], key: str = "") -> MetricSpec:
    return MetricSpec(key, name, kind, unit, help, "source", "kafka", labels=labels)


KAFKA_LAG_RECORDS = _k(
    "spark_streaming_kafka_lag_records",
    GAUGE,
    "records",
    "Kafka records not yet read by the query per partition (latest offset when the batch was planned minus the batch's end offset); only the top-K partitions by lag (labels topic, partition).",
    ("topic", "partition"),
    "latestOffset-endOffset",
)
KAFKA_LAG_SECONDS = _k(
    "spark_streaming_kafka_lag_seconds",
    GAUGE,
    "seconds",
    "Age of the oldest unread Kafka record per partition, interpolated over the history of latest offsets (absent while only a lower bound is known: a new observer's first batch); only the top-K partitions (labels topic, partition).",
    ("topic", "partition"),
)
KAFKA_TOPIC_LAG_RECORDS = _k(
    "spark_streaming_kafka_topic_lag_records",
    GAUGE,
    "records",
    "Kafka records not yet read by the query, summed over the topic's partitions (label topic).",
    ("topic",),
    "latestOffset-endOffset",
)
KAFKA_TOPIC_LAG_SECONDS = _k(
    "spark_streaming_kafka_topic_lag_seconds",
    GAUGE,
    "seconds",
    "Largest lag in seconds over the topic's partitions: the figure a freshness SLO is written in (label topic).",
    ("topic",),
)
KAFKA_PARTITIONS = _k(
    "spark_streaming_kafka_partitions", GAUGE, "", "Partitions of the topic the query reads (label topic).", ("topic",), "latestOffset"
)
KAFKA_STUCK_PARTITIONS = _k(
    "spark_streaming_kafka_stuck_partitions",
    GAUGE,
    "",
    "Partitions whose end offset has not moved for several batches while their latest offset has (label topic).",
    ("topic",),
)
KAFKA_LAG_GROWTH = _k(
    "spark_streaming_kafka_topic_lag_growth_records_per_second",
    GAUGE,
    "records",
    "Slope of the topic's lag over the growth window (least squares); positive while the query falls behind (label topic).",
    ("topic",),
)
KAFKA_LAG_GROWING = _k(
    "spark_streaming_kafka_lag_growing",
    GAUGE,
    "",
    "1 while the observer judges the topic's lag growing (its kafka_lag_growing signal), 0 once it is not: the judgement SparkStreamingKafkaLagGrowing reads (label topic).",
    ("topic",),
)
KAFKA_CATCH_UP_FORECAST = _k(
    "spark_streaming_kafka_catch_up_forecast_seconds",
    GAUGE,
    "seconds",
    "Forecast seconds until the query has read the topic's backlog, at the rate it read while behind and the topic's produce rate over the recent batches; 0 when caught up, absent when it is not draining (label topic).",
    ("topic",),
)
KAFKA_OFFSET_ANOMALIES = _k(
    "spark_streaming_kafka_offset_anomalies",
    COUNTER,
    "",
    "Offsets that went backwards or skipped between batches (label kind: rewound, skipped, latest_went_back; label topic): data-loss or reprocessing risk.",
    ("topic", "kind"),
)
KAFKA_PARTITIONS_ADDED = _k(
    "spark_streaming_kafka_partitions_added", COUNTER, "", "Partitions that appeared in a topic the query reads (label topic).", ("topic",)
)
KAFKA_METRICS: tuple[MetricSpec, ...] = (
    KAFKA_LAG_RECORDS,
    KAFKA_LAG_SECONDS,
    KAFKA_TOPIC_LAG_RECORDS,
    KAFKA_TOPIC_LAG_SECONDS,
    KAFKA_PARTITIONS,
    KAFKA_STUCK_PARTITIONS,
    KAFKA_LAG_GROWTH,
    KAFKA_LAG_GROWING,
    KAFKA_CATCH_UP_FORECAST,
    KAFKA_OFFSET_ANOMALIES,
    KAFKA_PARTITIONS_ADDED,
)


# the alert read straight from these metrics
ALERTS = (
    AlertSpec(
        "SparkStreamingKafkaLagSecondsHigh",
        "queries",
        "5m",
        WARNING,
        thresholds=("kafka_lag_seconds_slo",),
        summary="Unread Kafka records are older than the freshness objective.",
    ),
)
