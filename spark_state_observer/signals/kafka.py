"""Kafka sources: lag per topic and partition, lag in seconds, source health and the catch-up forecast.

The computation lives in ``spark_state_observer.signals.kafka_lag`` (pure, bounded, never raising); this rule feeds it
each progress' raw Kafka ``sources[]`` entries and turns its snapshots into metric values and signals, the
same way live, in replay and in the event-log watcher (they all run the engine).

One ``KafkaLagTracker`` per (query id, source index) lives as long as the query is kept: after a restart the
new run's first batch is interpolated across the downtime (the offset history carries over), and the catch-up
forecast at the restart uses the read rate seen before it. Per-partition series are bounded to the top K
partitions by lag; a partition leaving the top K has its series removed, not frozen at an old value.

Signals: ``kafka_lag_growing``, ``kafka_partition_stuck`` / ``kafka_partition_recovered``,
``kafka_partitions_added``, ``kafka_offsets_rewound`` / ``kafka_offsets_skipped`` / ``kafka_latest_went_back``
(the data-loss risk ``failOnDataLoss`` guards against), ``kafka_catch_up_forecast`` when a restarted run
starts behind (the backlog and when it will be read: at its first batch with the read rate seen before the
restart, or, in a new observer, as soon as the new run has shown its pace), and ``kafka_caught_up`` when that
backlog is read (the measured time next to the forecast).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.metrics.tracker import QueryRecord, source_labels
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.alert_spec import CRITICAL, WARNING, AlertSpec
from spark_state_observer.model.decode import sources_as_sent
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.kafka_lag import KafkaLagTracker, KafkaSnapshot, metric_samples
from spark_state_observer.signals.kafka_offsets import KAFKA_PREFIX, kafka_sources, progress_time
from spark_state_observer.signals.rule import Context, Rule

ANOMALY_KINDS = ("rewound", "skipped", "latest_went_back")  # label values of spark_streaming_kafka_offset_anomalies_total
MAX_SOURCES_PER_QUERY = 16  # Kafka sources tracked per query (a union of more is rare; more are ignored)


@dataclass
class _Forecast:
    """A catch-up forecast made at a run's first batch, until its backlog is read."""

    t: float  # when the forecast was made (the latest offsets read by that batch)
    seconds: float | None
    backlog: int  # what the restarted run's first batch found
    pending: bool = False  # no read rate yet: made once the new run has shown its pace


@dataclass
class _Source:
    """What the rule keeps per Kafka source of a query."""

    tracker: KafkaLagTracker
    published: set[tuple[MetricSpec, Labels]] = field(default_factory=set)  # gauges set at the last batch
    counted: dict[tuple[MetricSpec, Labels], float] = field(default_factory=dict)  # counter totals already added
    forecasts: dict[str, _Forecast] = field(default_factory=dict)  # topic -> open forecast
    restart_pending: bool = False  # restarted, and no batch with a lag yet (a re-run batch reports none)


class KafkaSources(Rule):
    """The Kafka rule family: called by the engine for every progress of every query."""

    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self._queries: dict[str, dict[int, _Source]] = {}

    def forget(self, query_id: str) -> None:
        self._queries.pop(query_id, None)

    def on_batch_end(self, ctx: Context) -> None:
        assert ctx.progress is not None
        self.batch(ctx.record, ctx.progress, ctx.ts, ctx.first_of_run, ctx.facts)

    def new_run(self, query_id: str, carried: dict[str, Any]) -> None:
        self.carry(query_id, carried)

    def carry(self, query_id: str, carried: dict[str, Any]) -> None:
        """Keep ``query_id``'s sources in ``carried`` (``RunState.carried``): a run in another application that
        takes the query over starts from this run's offsets and read rate (its backlog at the restart, the
        records produced while it was down, and the catch-up forecast), as one observer of both would."""
        self._queries[query_id] = carried.setdefault("kafka", self._queries.get(query_id, {}))

    def batch(self, record: QueryRecord, p: QueryProgress, ts: float, first_of_run: bool, facts: SignalFacts) -> None:
        """Update every Kafka source of the batch ``p`` (a no-op for queries without one)."""
        if sources_as_sent(p) and not any(s.description.startswith(KAFKA_PREFIX) for s in p.sources):
            return  # no Kafka source, told without decoding the raw JSON (``is_kafka_source``'s test on the same text)
        found = kafka_sources(p.raw)
        if not found:
            return
        t = progress_time(p.raw) or ts
        delay = (p.batch_duration_ms or 0.0) / 1000.0
        sources = self._queries.setdefault(record.query_id, {})
        for index, raw in found[:MAX_SOURCES_PER_QUERY]:
            src = sources.get(index)
            # a restart: a new run of a source seen before, or a first sight of a query resuming its checkpoint
            restarted = first_of_run and (src is not None or p.batch_id > 0)
            if src is None:
                src = sources[index] = _Source(
                    KafkaLagTracker(top_k=self.s.partition_top_k, growth_window_seconds=self.s.growth_window_seconds)
                )
            if first_of_run:
                src.tracker.new_run()
            src.restart_pending = src.restart_pending or restarted
            snap = src.tracker.update(raw, t, delay)
            if snap is None:
                continue
            restarted, src.restart_pending = src.restart_pending, False
            labels = source_labels(index, str(raw.get("description") or ""))
            self._metrics(record, src, snap, labels, facts)
            self._signals(record, p, src, snap, labels, restarted, facts)

    def _metrics(self, record: QueryRecord, src: _Source, snap: KafkaSnapshot, labels: Labels, facts: SignalFacts) -> None:
        """Gauges set (and removed when gone, e.g. a partition left the top K); counters advanced by their delta."""
        current: set[tuple[MetricSpec, Labels]] = set()
        for topic in snap.topic_records:
            # counters exist from 0 on, so increase() sees their first real increment
            for kind in ANOMALY_KINDS:
                src.counted.setdefault((catalog.KAFKA_OFFSET_ANOMALIES, (("topic", topic), ("kind", kind))), -1.0)
            src.counted.setdefault((catalog.KAFKA_PARTITIONS_ADDED, (("topic", topic),)), -1.0)
        samples = metric_samples(snap, src.tracker)
        totals = {(spec, own): value for spec, own, value in samples if spec.kind == catalog.COUNTER}
        for (spec, own), before in list(src.counted.items()):
            total = totals.get((spec, own), 0.0)
            if before < 0 or total > before:
                facts.add(record, spec, labels + own, total - max(before, 0.0))
                src.counted[(spec, own)] = total
        for spec, own, value in samples:
            if spec.kind == catalog.COUNTER:
                continue
            key = (spec, labels + own)
            current.add(key)
            facts.set(record, spec, labels + own, value)
        for spec, full in src.published - current:
            facts.set(record, spec, full, None)
        src.published = current

    def _signals(
        self, record: QueryRecord, p: QueryProgress, src: _Source, snap: KafkaSnapshot, labels: Labels, restarted: bool, facts: SignalFacts
    ) -> None:
        where = dict(labels)
        for finding in snap.findings:
            attrs: dict[str, Any] = {**where, "topic": finding.topic}
            if finding.partitions:
                attrs["partitions"] = list(finding.partitions)
            attrs.update(finding.detail)
            facts.signal("kafka_" + finding.kind, record, p.run_id, snap.t, **attrs)
        for topic, backlog in sorted(snap.topic_records.items()):
            open_forecast = src.forecasts.get(topic)
            if open_forecast is not None and backlog == 0:
                del src.forecasts[topic]
                facts.signal(
                    kinds.KAFKA_CAUGHT_UP,
                    record,
                    p.run_id,
                    snap.t,
                    **where,
                    topic=topic,
                    seconds=round(snap.t - open_forecast.t, 3),
                    forecast_seconds=_rounded(open_forecast.seconds),
                    backlog_records=open_forecast.backlog,
                )
                continue
            if restarted and backlog > 0:
                open_forecast = src.forecasts[topic] = _Forecast(snap.t, None, backlog, pending=True)
            if open_forecast is None or not open_forecast.pending or topic not in snap.read_rate:
                continue
            # the restart's forecast: at its first batch with the rate seen before the restart (same observer),
            # else as soon as the new run has shown its pace
            open_forecast.t, open_forecast.seconds, open_forecast.pending = snap.t, snap.catch_up.get(topic), False
            facts.signal(
                kinds.KAFKA_CATCH_UP_FORECAST,
                record,
                p.run_id,
                snap.t,
                **where,
                topic=topic,
                backlog_records=backlog,
                restart_backlog_records=open_forecast.backlog,
                forecast_seconds=_rounded(open_forecast.seconds),
                read_records_per_second=_rounded(snap.read_rate.get(topic)),
                produce_records_per_second=_rounded(snap.produce_rate.get(topic)),
                basis="rate_before_restart" if restarted else "rate_of_this_run",
                lag_seconds=_rounded(snap.topic_seconds.get(topic)),
            )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


ALERTS = (
    AlertSpec(
        "SparkStreamingKafkaLagGrowing",
        "queries",
        "1m",
        WARNING,
        (kinds.KAFKA_LAG_GROWING,),
        ("kafka_lag",),
        summary="Kafka lag keeps growing: the query reads slower than the topic is written.",
        verdict_text=(
            ("kafka_lag", "Kafka lag growing: {topic} {records} records behind the latest ({then} when it began to grow at {since}{rate})"),
        ),
    ),
    AlertSpec(
        "SparkStreamingKafkaPartitionStuck",
        "queries",
        "5m",
        WARNING,
        (kinds.KAFKA_PARTITION_STUCK,),
        summary="A Kafka partition has records the query does not read.",
    ),
    AlertSpec(
        "SparkStreamingKafkaDataLossRisk",
        "queries",
        "0m",
        CRITICAL,
        (kinds.KAFKA_OFFSETS_SKIPPED, kinds.KAFKA_LATEST_WENT_BACK, kinds.KAFKA_OFFSETS_REWOUND),
        ("kafka_data_loss",),
        ("kafka_anomaly_window_minutes",),
        "Kafka offsets skipped or went back: input lost or read twice.",
        verdict_text=(("kafka_data_loss", "{finding} on {where} at {at}"),),
    ),
)
KafkaSources.alerts = ALERTS
