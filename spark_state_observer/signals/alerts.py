"""Every alert, declared once: its name, the signals and verdicts it stands for, its default ``for`` and
severity, the thresholds it shares with its signal, and its runbook section.

The mixin's rules (``spark_state_observer.mixin.rules``), their promtool cases (``...mixin.rule_tests``),
the configuration's defaults (``...mixin.config``), the runbook's index and the browser's verdict table
(``spark_state_observer.browser.verdict``) read this table. Adding an alert is one entry here, its rule, its
case and its runbook section; a test fails when one of them is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_state_observer.model import signal_kinds as k

CRITICAL, WARNING, INFO = "critical", "warning", "info"


@dataclass(frozen=True)
class AlertSpec:
    """One alert. ``anchor`` is its runbook section (the heading's slug); ``verdicts`` are the browser's verdict
    kinds whose fix that section holds; ``thresholds`` are the mixin threshold keys its rule reads (shared with
    the dashboards), ``signals`` the observer's signal kinds it fires on."""

    name: str
    group: str  # the rule group's suffix: queries, state, observer
    for_: str
    severity: str
    signals: tuple[str, ...] = ()
    verdicts: tuple[str, ...] = ()
    thresholds: tuple[str, ...] = ()
    summary: str = ""  # the runbook index's one line

    @property
    def anchor(self) -> str:
        return self.name.lower()


ALERTS: tuple[AlertSpec, ...] = (
    AlertSpec(
        "SparkStreamingQueryFailed",
        "queries",
        "0m",
        CRITICAL,
        (k.QUERY_TERMINATED,),
        ("failed", "failed_at_start"),
        summary="The query terminated with an exception.",
    ),
    AlertSpec(
        "SparkStreamingQueryDown",
        "queries",
        "2m",
        WARNING,
        (k.QUERY_TERMINATED,),
        ("stopped",),
        summary="A query expected to run stopped and did not come back (opt-in: expected_running_selector).",
    ),
    AlertSpec(
        "SparkStreamingScheduledRunOverdue",
        "queries",
        "2m",
        WARNING,
        verdicts=("overdue",),
        thresholds=("schedule_late_share", "schedule_late_min_minutes"),
        summary="A scheduled run did not start when due.",
    ),
    AlertSpec(
        "SparkStreamingQueryCrashLooping",
        "queries",
        "0m",
        CRITICAL,
        (k.CRASH_LOOP,),
        ("crash_loop",),
        ("crash_loop_restarts", "crash_loop_window_minutes"),
        "The query fails and restarts in a loop.",
    ),
    AlertSpec("SparkStreamingQueryLost", "queries", "0m", CRITICAL, (k.QUERY_LOST,), ("lost",), summary="The driver died without a word."),
    AlertSpec("SparkStreamingQueryStalled", "queries", "1m", CRITICAL, (k.STALLED,), ("stalled",), summary="The query makes no progress."),
    AlertSpec(
        "SparkStreamingQueryFallingBehind",
        "queries",
        "10m",
        WARNING,
        (k.FALLING_BEHIND,),
        ("falling_behind",),
        ("falling_behind_ratio", "falling_behind_window_minutes"),
        "Input arrives faster than it is processed.",
    ),
    AlertSpec(
        "SparkStreamingKafkaLagGrowing",
        "queries",
        "1m",
        WARNING,
        (k.KAFKA_LAG_GROWING,),
        ("kafka_lag",),
        summary="Kafka lag keeps growing: the query reads slower than the topic is written.",
    ),
    AlertSpec(
        "SparkStreamingKafkaLagSecondsHigh",
        "queries",
        "5m",
        WARNING,
        thresholds=("kafka_lag_seconds_slo",),
        summary="Unread Kafka records are older than the freshness objective.",
    ),
    AlertSpec(
        "SparkStreamingKafkaPartitionStuck",
        "queries",
        "5m",
        WARNING,
        (k.KAFKA_PARTITION_STUCK,),
        summary="A Kafka partition has records the query does not read.",
    ),
    AlertSpec(
        "SparkStreamingKafkaDataLossRisk",
        "queries",
        "0m",
        CRITICAL,
        (k.KAFKA_OFFSETS_SKIPPED, k.KAFKA_LATEST_WENT_BACK, k.KAFKA_OFFSETS_REWOUND),
        ("kafka_data_loss",),
        ("kafka_anomaly_window_minutes",),
        "Kafka offsets skipped or went back: input lost or read twice.",
    ),
    AlertSpec(
        "SparkStreamingWatermarkLagHigh",
        "queries",
        "15m",
        WARNING,
        thresholds=("watermark_lag_seconds",),
        summary="The watermark lags far behind.",
    ),
    AlertSpec(
        "SparkStreamingLateRowsDropped",
        "queries",
        "0m",
        WARNING,
        (k.LATE_ROWS_DROPPED,),
        ("late_rows",),
        summary="The watermark drops input rows as too late.",
    ),
    AlertSpec(
        "SparkStateRestoreTooLong",
        "state",
        "0m",
        WARNING,
        (k.RESTORE,),
        ("restarted",),
        ("restore_seconds",),
        "A state restore after a restart took too long.",
    ),
    AlertSpec(
        "SparkStateRestoreSlow",
        "state",
        "0m",
        WARNING,
        thresholds=("restore_seconds",),
        summary="A running state restore will take too long.",
    ),
    AlertSpec(
        "SparkStateUnbounded",
        "state",
        # the signal already asks for growth over its whole window: a long ``for`` on top only delays it past the
        # end of a job shorter than the window plus the watcher's grace, where it can never fire
        "0m",
        WARNING,
        (k.STATE_UNBOUNDED,),
        ("state_unbounded",),
        summary="State keeps growing.",
    ),
    AlertSpec(
        "SparkStateBudgetExhaustionForecast",
        "state",
        "15m",
        WARNING,
        thresholds=("budget_eta_hours",),
        summary="State will reach its budget soon.",
    ),
    AlertSpec(
        "SparkStateMemoryNearBudget",
        "state",
        "15m",
        WARNING,
        thresholds=("state_memory_budget_ratio", "state_memory_budget_bytes"),
        summary="State memory is near its budget.",
    ),
    AlertSpec(
        "SparkStateCommitLatencyHigh",
        "state",
        "10m",
        WARNING,
        thresholds=("commit_seconds_per_instance",),
        summary="State commits are slow.",
    ),
    AlertSpec(
        "SparkStateRocksDBWriteStalls",
        "state",
        "10m",
        WARNING,
        thresholds=("write_stall_seconds_per_batch",),
        summary="RocksDB writes stall.",
    ),
    AlertSpec(
        "SparkStateSnapshotUploadLagging",
        "state",
        # the signal judges the lag (snapshot_lag_batches plus a maintenance interval's batches); the alert reads its
        # judgement, so both fire at the same lag; a minute rides out a scrape that saw it alone
        "1m",
        WARNING,
        (k.SNAPSHOT_LAGGING,),
        ("snapshot_lagging",),
        summary="State snapshots are not uploaded: a restart would replay many files.",
    ),
    AlertSpec(
        "SparkStateSnapshotAutoRepaired",
        "state",
        "0m",
        WARNING,
        thresholds=("snapshot_repair_window_minutes",),
        summary="Spark skipped a corrupt snapshot.",
    ),
    AlertSpec(
        "SparkStatePartitionsMigrating",
        "state",
        "10m",
        WARNING,
        (k.PARTITION_MIGRATED,),
        thresholds=("partition_migration_batches", "partition_migration_window_minutes"),
        summary="State partitions keep moving between executors.",
    ),
    AlertSpec(
        "SparkStateSkewed",
        "state",
        "1m",  # the gauges hold batch after batch; the signal asks three in a row
        WARNING,
        (k.STATE_SKEWED,),
        ("state_skewed",),
        ("state_skew_ratio", "state_skew_min_bytes"),
        "One partition holds far more of the state's bytes than the others.",
    ),
    AlertSpec(
        "SparkStateRocksDBMemoryNearBudget",
        "state",
        "15m",
        WARNING,
        thresholds=("rocksdb_memory_budget_ratio",),
        summary="RocksDB needs most of an executor's memory overhead.",
    ),
    AlertSpec("SparkStateObserverDown", "observer", "5m", WARNING, summary="The observer's endpoint cannot be scraped."),
    AlertSpec("SparkStateObserverDroppingEvents", "observer", "0m", WARNING, summary="The observer drops events."),
    AlertSpec("SparkStateObserverFailing", "observer", "0m", WARNING, summary="The observer fails to process or export events."),
)
BY_NAME = {a.name: a for a in ALERTS}
# runbook sections with no alert of their own, by anchor: the verdicts whose fix they hold
SECTIONS_WITHOUT_ALERT = {"executor-lost": ("executor_lost",)}


def verdict_anchors() -> dict[str, str]:
    """Browser verdict kind -> the runbook anchor of the section that holds its fix."""
    out = {kind: anchor for anchor, kinds in SECTIONS_WITHOUT_ALERT.items() for kind in kinds}
    for a in ALERTS:
        for kind in a.verdicts:
            out.setdefault(kind, a.anchor)
    return out
