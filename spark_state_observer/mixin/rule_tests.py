"""promtool rule tests (``promtool test rules``) for the generated alerts, adapted to the configuration.

For every alert one test: a series just past the configured threshold fires (after the configured
``for``), a healthy one (another application with a query of the same name) stays silent. The series
carry the configured identity and selector labels, their values are derived from the thresholds, and
the expected annotations are rendered from the generated rules with Prometheus' own formatting
(``spark_state_observer.mixin.prometheus_text``), so ``promtool test rules`` checks the exported rules exactly as
configured. ``build_cases(config, values=...)`` puts another configuration's values on this
configuration's series: a test uses it to show that a raised threshold silences a series the default
fires on. Each alert's case is built by a function of its own (``_crash_looping``, ``_kafka_lag_growing``,
...), from the inputs every case shares (``CaseInputs``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.mixin.config import MixinConfig, MixinConfigError, Thresholds, labels_satisfying, parse_matchers, quote
from spark_state_observer.mixin.prometheus_text import format_duration, render_template
from spark_state_observer.mixin.promql import metric
from spark_state_observer.mixin.rule_case_inputs import (
    HEADER,
    KAFKA_LABELS,
    Case,
    CaseInputs,
    Labels,
    LabelSets,
)
from spark_state_observer.mixin.rule_case_inputs import keep as _keep
from spark_state_observer.mixin.rule_case_inputs import matches as _matches
from spark_state_observer.mixin.rule_case_inputs import num as _n
from spark_state_observer.mixin.rule_case_inputs import samples as _samples
from spark_state_observer.mixin.rules import alert_groups, dump
from spark_state_observer.signals import alerts


# --- one case per alert ----------------------------------------------------------------------------------
def _query_failed(c: CaseInputs) -> Case:
    """A failed query's lasting state: the watcher keeps exporting it after it forgot the application
    (``fleet.grace_seconds``), so the alert still fires well past the grace, where the application's
    own series are gone; the healthy query's state is 0 throughout."""
    alert = "SparkStreamingQueryFailed"
    case = c.flag(alert, catalog.QUERY_LIFECYCLE, c.ls.query, c.by_query, {"state": "failed"})
    case.fire_at = max(case.fire_at, math.ceil(c.config.fleet.grace_seconds / 60) + 5)
    n = _samples(case.fire_at + 10)
    case.series = [(name, labels, f"{values.split('x')[0]}x{n}") for name, labels, values in case.series]
    return case


def _query_lost(c: CaseInputs) -> Case:
    """A lost query's lasting state (its driver gone without a word), kept past the application's grace as a
    failed one's is; the healthy query's state is 0 throughout."""
    alert = "SparkStreamingQueryLost"
    case = c.flag(alert, catalog.QUERY_LIFECYCLE, c.ls.query, c.by_query, {"state": "lost"})
    case.fire_at = max(case.fire_at, math.ceil(c.config.fleet.grace_seconds / 60) + 5)
    n = _samples(case.fire_at + 10)
    case.series = [(name, labels, f"{values.split('x')[0]}x{n}") for name, labels, values in case.series]
    return case


def _query_down(c: CaseInputs) -> Case:
    """A query expected to run (``expected_running_selector``) stopped cleanly: fires within the watcher's grace (its
    application's series live that long after its end, then go stale, and the alert resolves). Another expected
    query waiting for its next scheduled run, and a query not expected to run that stopped (a planned stop), stay silent."""
    alert = "SparkStreamingQueryDown"
    expected = parse_matchers(c.config.expected_running_selector, "expected_running_selector")

    def expected_query(role: int, **extra: str) -> Labels:
        """The role's query labels, made to match the selector (from ``test_labels``) when they do not already."""
        labels = c.ls.query(role)
        if not _matches(labels, expected):
            labels = {**labels, **labels_satisfying(expected, c.config.test_labels, "expected_running_selector")}
        return {**labels, **extra}

    n = _samples(c.for_(alert) + 10)
    last = math.floor(c.config.fleet.grace_seconds / 60) - 1  # the last one-minute scrape before the watcher forgets
    bad = expected_query(0)
    values, fire_at, quiet = f"1x{n}", c.for_(alert) + 2, c.quiet_before(alert)
    if last < n:
        values, fire_at, quiet = f"1x{max(last, 0)} stale", min(fire_at, last), [*quiet, last + 2]
    series: list[tuple[MetricSpec | str, Labels, str]] = [
        (catalog.QUERY_LIFECYCLE, {**bad, "state": "stopped"}, values),
        (catalog.QUERY_LIFECYCLE, expected_query(1, state="scheduled"), f"1x{n}"),
        (catalog.QUERY_LIFECYCLE, expected_query(1, state="stopped"), f"0x{n}"),
    ]
    if not _matches(c.ls.query(2), expected):
        series.append((catalog.QUERY_LIFECYCLE, c.ls.query(2, state="stopped"), f"1x{n}"))
    return Case(alert, series, fire_at, [(_keep(bad, c.by_query), 1.0)], quiet)


def _scheduled_run_overdue(c: CaseInputs) -> Case:
    """A query on a schedule every 10 minutes whose latest run started at 0 and no run since: due at 10 minutes,
    overdue once later than its lateness (a share of the interval, at least the minimum). Another on the same
    schedule whose runs keep coming (a new start every 10 minutes) and a third whose last start is as old but that
    is no longer on a schedule (stopped) never fire. The first's application is forgotten after the watcher's
    grace: the lasting state (and the two gauges kept with it) are what the alert reads then."""
    alert = "SparkStreamingScheduledRunOverdue"
    interval = 600.0
    late = max(interval * c.v.schedule_late_share, c.v.schedule_late_min_minutes * 60)
    due = math.floor((interval + late) / 60)  # the last whole minute at which it is not late enough yet
    at = due + 1 + c.for_(alert) + 1
    n, ls = _samples(at + 10), c.ls
    every = math.ceil(interval / 60)
    starts = " ".join(f"{_n(k * interval)}x{every - 1}" for k in range(math.ceil(n / every) + 1))
    series: list[tuple[MetricSpec | str, Labels, str]] = []
    for role, start, state in ((0, f"0x{n}", "scheduled"), (1, starts, "scheduled"), (2, f"0x{n}", "stopped")):
        series += [
            (catalog.QUERY_LAST_START, ls.query(role), start),
            (catalog.QUERY_SCHEDULE_INTERVAL, ls.query(role), f"{_n(interval)}x{n}"),
            (catalog.QUERY_LIFECYCLE, ls.query(role, state=state), f"1x{n}"),
        ]
    return Case(alert, series, at, [(_keep(ls.query(0), c.by_query), at * 60 - interval)], [due])


def _crash_looping(c: CaseInputs) -> Case:
    """Restarts above the threshold within the window on one query; another restarts four times as often, each
    run stopped cleanly first (a scheduled availableNow job): no loop; a third
    query carries the watcher's own crash-loop verdict, whose application the watcher forgets after its grace:
    its lasting state keeps the alert firing past that."""
    alert = "SparkStreamingQueryCrashLooping"
    last = max(math.floor(c.config.fleet.grace_seconds / 60) - 1, 0)  # the third's application forgotten after this scrape
    at = max(c.t.crash_loop_window_minutes + c.for_(alert) + 2, last + 5)
    n, restarts, window, ls = _samples(at + 10), c.v.crash_loop_restarts, c.v.crash_loop_window_minutes, c.ls
    return Case(
        alert,
        [
            (catalog.QUERY_STARTS, ls.query(0), f"1+{_n((restarts + 1) / window)}x{n}"),
            (catalog.QUERY_TERMINATIONS, ls.query(0, outcome="clean"), f"0x{n}"),
            (catalog.QUERY_CRASH_LOOP, ls.query(0), f"0x{n}"),
            # restarting four times as often, each run stopped cleanly first (a scheduled availableNow job): no loop
            (catalog.QUERY_STARTS, ls.query(1), f"1+{_n(4 * restarts / window)}x{n}"),
            (catalog.QUERY_TERMINATIONS, ls.query(1, outcome="clean"), f"0+{_n(4 * restarts / window)}x{n}"),
            (catalog.QUERY_CRASH_LOOP, ls.query(1), f"0x{n}"),
            (catalog.QUERY_CRASH_LOOP, ls.query(1), f"0x{n}"),
            (catalog.QUERY_CRASH_LOOP, ls.query(2), f"1x{last} stale"),
            (catalog.QUERY_LIFECYCLE, ls.query(2, state="crash_looping"), f"1x{n}"),
        ],
        at,
        [(_keep(ls.query(0), c.by_query), None), (_keep(ls.query(2), c.by_query), None)],
    )


def _stalled(c: CaseInputs) -> Case:
    return c.flag("SparkStreamingQueryStalled", catalog.QUERY_STALLED, c.ls.query, c.by_query)


def _falling_behind(c: CaseInputs) -> Case:
    """Processing a quarter below the ratio on the bad query, a fifth above it on the healthy one; a third query
    stopped with the bad one's last rates (a terminated query keeps its last batch's gauges) stays silent."""
    alert = "SparkStreamingQueryFallingBehind"
    at = c.t.falling_behind_window_minutes + c.for_(alert) + 2
    n = _samples(at + 10)
    series: list[tuple[MetricSpec | str, Labels, str]] = []
    for role, factor, status in ((0, 1.25, "active"), (1, 0.8, "active"), (2, 1.25, "terminated")):
        series += [
            (catalog.FALLING_BEHIND, c.ls.query(role), f"0x{n}"),
            (catalog.INPUT_ROWS_PER_SECOND, c.ls.query(role), f"100x{n}"),
            (catalog.PROCESSED_ROWS_PER_SECOND, c.ls.query(role), f"{_n(round(100 / (c.v.falling_behind_ratio * factor), 3))}x{n}"),
            (catalog.QUERY_STATUS, c.ls.query(role, status=status), f"1x{n}"),
        ]
    return Case(alert, series, at, [(_keep(c.ls.query(0), c.by_query), None)], c.quiet_before(alert))


def _kafka_lag_growing(c: CaseInputs) -> Case:
    """The observer judged the bad topic's lag growing (the kafka_lag_growing signal's gauge): fires with its lag;
    a topic as far behind but judged not growing (a backlog being read down) stays silent."""
    alert = "SparkStreamingKafkaLagGrowing"
    n, lag, ls = _samples(c.for_(alert) + 10), c.v.kafka_lag_offsets, c.ls
    return Case(
        alert,
        [
            (catalog.KAFKA_TOPIC_LAG_RECORDS, ls.query(0, **KAFKA_LABELS), f"{_n(lag)}x{n}"),
            (catalog.KAFKA_LAG_GROWING, ls.query(0, **KAFKA_LABELS), f"1x{n}"),
            (catalog.KAFKA_TOPIC_LAG_RECORDS, ls.query(1, **KAFKA_LABELS), f"{_n(lag)}x{n}"),
            (catalog.KAFKA_LAG_GROWING, ls.query(1, **KAFKA_LABELS), f"0x{n}"),
        ],
        c.for_(alert) + 2,
        [(_keep(ls.query(0, **KAFKA_LABELS), c.by_kafka), lag)],
        c.quiet_before(alert),
    )


def _kafka_lag_seconds_high(c: CaseInputs) -> Case:
    slo = c.v.kafka_lag_seconds_slo
    return c.level(
        "SparkStreamingKafkaLagSecondsHigh",
        catalog.KAFKA_TOPIC_LAG_SECONDS,
        lambda role: c.ls.query(role, **KAFKA_LABELS),
        c.by_kafka,
        1.5 * slo,
        slo / 2,
    )


def _kafka_partition_stuck(c: CaseInputs) -> Case:
    return c.flag("SparkStreamingKafkaPartitionStuck", catalog.KAFKA_STUCK_PARTITIONS, c.ls.query, c.by_kafka, KAFKA_LABELS)


def _kafka_data_loss_risk(c: CaseInputs) -> Case:
    """One skipped offset a minute on the bad query, none on the healthy one."""
    alert = "SparkStreamingKafkaDataLossRisk"
    window = c.t.kafka_anomaly_window_minutes
    at = window + c.for_(alert) + 2
    n = _samples(at + 10)
    skipped = {**KAFKA_LABELS, "kind": "skipped"}
    return Case(
        alert,
        [
            (catalog.KAFKA_OFFSET_ANOMALIES, c.ls.query(0, **skipped), f"0+1x{n}"),
            (catalog.KAFKA_OFFSET_ANOMALIES, c.ls.query(1, **skipped), f"0x{n}"),
        ],
        at,
        [(_keep(c.ls.query(0, **skipped), [*c.by_kafka, "kind"]), window)],
    )


def _watermark_lag_high(c: CaseInputs) -> Case:
    lag = c.v.watermark_lag_seconds
    return c.level("SparkStreamingWatermarkLagHigh", catalog.WATERMARK_LAG, c.ls.query, c.by_query, 1.5 * lag, lag / 2)


def _late_rows_dropped(c: CaseInputs) -> Case:
    """A running query in a late-rows episode fires (its value the share dropped); one whose share is as high but whose
    episode is over, and a stopped one with the bad one's last gauges, stay silent."""
    alert = "SparkStreamingLateRowsDropped"
    at = c.for_(alert) + 2
    n = _samples(at + 10)
    series: list[tuple[MetricSpec | str, Labels, str]] = []
    for role, dropping, status in ((0, 1, "active"), (1, 0, "active"), (2, 1, "terminated")):
        series += [
            (catalog.LATE_ROWS_SHARE, c.ls.query(role), f"0.05x{n}"),
            (catalog.LATE_ROWS_DROPPING, c.ls.query(role), f"{dropping}x{n}"),
            (catalog.QUERY_STATUS, c.ls.query(role, status=status), f"1x{n}"),
        ]
    return Case(alert, series, at, [(_keep(c.ls.query(0), c.by_query), 0.05)], c.quiet_before(alert))


def _restore_too_long(c: CaseInputs) -> Case:
    """A measured restore above the threshold fires; a low-confidence estimate as long never does; the
    alert ends once the restore is an hour old."""
    alert = "SparkStateRestoreTooLong"
    if c.for_(alert) > 55:
        raise MixinConfigError(f"for_durations.{alert}: must be under 55m (the alert looks at restores of the last hour)")
    restore, ls = 1.5 * c.v.restore_seconds, c.ls
    return Case(
        alert,
        [
            (catalog.LAST_RESTORE_DURATION, ls.operator(0, method="load_metrics", confidence="measured"), f"_x10 {_n(restore)}x80"),
            (
                catalog.LAST_RESTORE_DURATION,
                ls.operator(1, method="load_metrics", confidence="measured"),
                f"{_n(c.v.restore_seconds / 10)}x90",
            ),
            # a first batch full of backlog: a residual estimate of low confidence never alerts
            (
                catalog.LAST_RESTORE_DURATION,
                ls.query(1, operator_index="1", operator="stateStoreSave", method="residual_estimate", confidence="low"),
                f"_x10 {_n(restore)}x80",
            ),
        ],
        10 + c.for_(alert) + 2,
        [(_keep(ls.operator(0), c.by_op), restore)],
        [75.0],
    )


def _restore_slow(c: CaseInputs) -> Case:
    """A running restore whose elapsed time plus ETA passes the budget fires while it runs; one well within it
    does not; both gauges go when the restore finishes, and so does the alert."""
    alert = "SparkStateRestoreSlow"
    budget, ls = c.v.restore_seconds, c.ls
    n = _samples(c.for_(alert) + 10)
    return Case(
        alert,
        [
            (catalog.RESTORE_ELAPSED, ls.operator(0), f"60x{n} _x10"),
            (catalog.RESTORE_ETA, ls.operator(0), f"{_n(budget)}x{n} _x10"),
            (catalog.RESTORE_ELAPSED, ls.operator(1), f"10x{n}"),
            (catalog.RESTORE_ETA, ls.operator(1), f"{_n(budget / 10)}x{n}"),
        ],
        c.for_(alert) + 2,
        [(_keep(ls.operator(0), c.by_op), 60 + budget)],
        [n + 6.0],
    )


def _state_unbounded(c: CaseInputs) -> Case:
    return c.flag("SparkStateUnbounded", catalog.STATE_UNBOUNDED, c.ls.operator, c.by_op)


def _budget_exhaustion_forecast(c: CaseInputs) -> Case:
    """Rows reach the budget in half the horizon on the bad operator; rows and memory far later on the healthy one."""
    alert = "SparkStateBudgetExhaustionForecast"
    n, eta, ls = _samples(c.for_(alert) + 10), c.v.budget_eta_hours * 3600, c.ls
    return Case(
        alert,
        [
            (catalog.ROWS_BUDGET_ETA, ls.operator(0), f"{_n(eta / 2)}x{n}"),
            (catalog.ROWS_BUDGET_ETA, ls.operator(1), f"{_n(eta * 10)}x{n}"),
            (catalog.MEMORY_BUDGET_ETA, ls.operator(1), f"{_n(eta * 10)}x{n}"),
        ],
        c.for_(alert) + 2,
        [(_keep(ls.operator(0), c.by_op), eta / 2)],
        c.quiet_before(alert),
    )


def _memory_near_budget(c: CaseInputs) -> Case:
    limit = c.v.state_memory_budget_ratio * c.v.state_memory_budget_bytes
    bad, ok = float(math.floor(limit * 1.1)), float(math.floor(limit / 2))
    return c.level("SparkStateMemoryNearBudget", catalog.by_key("memoryUsedBytes"), c.ls.operator, c.by_op, bad, ok)


def _commit_latency_high(c: CaseInputs) -> Case:
    """Commit time per store instance and batch twice the threshold on the bad operator, half on the healthy one."""
    alert = "SparkStateCommitLatencyHigh"
    at = 10 + c.for_(alert) + 2
    n, instances, ls = _samples(at + 10), 4, c.ls
    per_instance = 2 * c.v.commit_seconds_per_instance + 0.5  # off the whole seconds, so rounding never moves the rendered value
    return Case(
        alert,
        [
            (catalog.BATCHES, ls.query(0), f"0+1x{n}"),
            (catalog.by_key("commitTimeMs"), ls.operator(0), f"0+{_n(per_instance * instances)}x{n}"),
            (catalog.by_key("numStateStoreInstances"), ls.operator(0), f"{instances}x{n}"),
            (catalog.BATCHES, ls.query(1), f"0+1x{n}"),
            (catalog.by_key("commitTimeMs"), ls.operator(1), f"0+{_n(c.v.commit_seconds_per_instance / 2 * instances)}x{n}"),
            (catalog.by_key("numStateStoreInstances"), ls.operator(1), f"{instances}x{n}"),
        ],
        at,
        [(_keep(ls.operator(0), c.by_op), per_instance)],
    )


def _rocksdb_write_stalls(c: CaseInputs) -> Case:
    alert = "SparkStateRocksDBWriteStalls"
    at = 10 + c.for_(alert) + 2
    n, ls = _samples(at + 10), c.ls
    stall = 2 * c.v.write_stall_seconds_per_batch + 5
    return Case(
        alert,
        [
            (catalog.BATCHES, ls.query(0), f"0+1x{n}"),
            (catalog.by_key("rocksdbWriterStallLatencyMs"), ls.operator(0), f"0+{_n(stall)}x{n}"),
            (catalog.BATCHES, ls.query(1), f"0+1x{n}"),
            (catalog.by_key("rocksdbWriterStallLatencyMs"), ls.operator(1), f"3+{_n(c.v.write_stall_seconds_per_batch / 2)}x{n}"),
        ],
        at,
        [(_keep(ls.operator(0), c.by_op), stall)],
    )


def _snapshot_upload_lagging(c: CaseInputs) -> Case:
    """The observer judged store instances of the bad operator past the normal lag (the snapshot_lagging signal's
    gauge): fires with the operator's largest lag; the healthy operator lags as much but within its normal (its
    batches are short beside the maintenance interval), no instance judged lagging: silent."""
    alert = "SparkStateSnapshotUploadLagging"
    n, ls = _samples(c.for_(alert) + 10), c.ls
    lag = float(math.floor(1.5 * c.v.snapshot_lag_batches) + 1)
    return Case(
        alert,
        [
            (catalog.SNAPSHOT_MAX_LAG_BATCHES, ls.operator(0), f"{_n(lag)}x{n}"),
            (catalog.SNAPSHOT_INSTANCES_LAGGING, ls.operator(0), f"2x{n}"),
            (catalog.SNAPSHOT_MAX_LAG_BATCHES, ls.operator(1), f"{_n(lag)}x{n}"),
            (catalog.SNAPSHOT_INSTANCES_LAGGING, ls.operator(1), f"0x{n}"),
        ],
        c.for_(alert) + 2,
        [(_keep(ls.operator(0), c.by_op), lag)],
        c.quiet_before(alert),
    )


def _snapshot_auto_repaired(c: CaseInputs) -> Case:
    """A snapshot repaired on the bad operator (RocksDB's counter going 0 -> 1), none on two healthy ones
    (RocksDB's and the HDFS-backed store's counters); a window after the repair it is quiet again."""
    alert = "SparkStateSnapshotAutoRepaired"
    window = c.t.snapshot_repair_window_minutes
    at = c.for_(alert) + 5
    n = _samples(window + at + 10)
    return Case(
        alert,
        [
            (catalog.by_key("rocksdbNumSnapshotsAutoRepaired"), c.ls.operator(0), f"0x2 1x{n}"),
            (catalog.by_key("rocksdbNumSnapshotsAutoRepaired"), c.ls.operator(1), f"0x{n}"),
            (catalog.by_key("numSnapshotsAutoRepaired"), c.ls.operator(2), f"0x{n}"),
        ],
        at,
        [(_keep(c.ls.operator(0), c.by_op), 1.0)],  # from 0: increase() does not extrapolate before the series' start
        [window + at + 5],
    )


def _partitions_migrating(c: CaseInputs) -> Case:
    """One batch a minute: the bad operator moves state (locality fallbacks) in 1.5x the threshold's batches per
    window. Silent: one that lost executors as often (each move an executor loss: one verdict each, not state that
    keeps moving), and a third moving as the bad one but whose query stopped (its application ended)."""
    alert = "SparkStatePartitionsMigrating"
    window = c.t.partition_migration_window_minutes
    at = window + c.for_(alert) + 2
    n, moving = _samples(at + 10), c.v.partition_migration_batches
    rate = _n(1.5 * moving / window)
    series: list[tuple[MetricSpec | str, Labels, str]] = []
    for role, cause, status in (
        (0, "locality_fallback", "active"),
        (1, "executor_removed", "active"),
        (2, "locality_fallback", "terminated"),
    ):
        series += [
            (catalog.PARTITION_MIGRATION_BATCHES, c.ls.operator(role), f"0+{rate}x{n}"),
            (catalog.PARTITION_MIGRATIONS, c.ls.operator(role, cause=cause), f"0+{rate}x{n}"),
            (catalog.QUERY_STATUS, c.ls.query(role, status=status), f"1x{n}"),
        ]
    return Case(alert, series, at, [(_keep(c.ls.operator(0), c.by_op), 1.5 * moving)])


def _state_skewed(c: CaseInputs) -> Case:
    """The bad operator's largest partition holds twice the ratio over the median, with bytes above the floor; the
    healthy one is as skewed but small (a few SST kilobytes), a third is large but even: both silent."""
    alert = "SparkStateSkewed"
    n, ratio, floor, ls = _samples(c.for_(alert) + 10), c.v.state_skew_ratio, c.v.state_skew_min_bytes, c.ls
    series: list[tuple[MetricSpec | str, Labels, str]] = []
    for role, skew, top in ((0, 2 * ratio, 4 * floor), (1, 2 * ratio, floor / 4), (2, ratio / 2, 4 * floor)):
        series += [
            (catalog.PARTITION_BYTES_SKEW, ls.operator(role), f"{_n(skew)}x{n}"),
            (catalog.PARTITION_BYTES_MAX, ls.operator(role), f"{_n(math.floor(top))}x{n}"),
        ]
    return Case(alert, series, c.for_(alert) + 2, [(_keep(ls.operator(0), c.by_op), 2 * ratio)], c.quiet_before(alert))


def _rocksdb_memory_near_budget(c: CaseInputs) -> Case:
    """Two executors of the bad application above the share (by estimate, by Spark's report), one of the
    healthy one below it, and the executor="total" sum that is no executor."""
    alert = "SparkStateRocksDBMemoryNearBudget"
    n, budget, ratio = _samples(c.for_(alert) + 10), 384 * 1024**2, c.v.rocksdb_memory_budget_ratio
    share = ratio + 0.25  # a quarter above: a share Prometheus renders exactly
    bad_app, ok_app = c.ls.apps[0][0], c.ls.apps[1][0]  # one application when the selector pins it: executors differ too

    def executor(app: str, ex: str) -> Labels:
        return {**c.ls.base, c.config.app_label: app, "executor": ex}

    by_ex = [*c.config.identity_labels, "executor"]
    return Case(
        alert,
        [
            (catalog.EXECUTOR_ROCKSDB_MEMORY_BUDGET, executor(bad_app, "1"), f"{budget}x{n}"),
            (catalog.EXECUTOR_ROCKSDB_MEMORY_ESTIMATE, executor(bad_app, "1"), f"{_n(budget * share)}x{n}"),
            (catalog.EXECUTOR_ROCKSDB_MEMORY_BUDGET, executor(bad_app, "2"), f"{budget}x{n}"),
            (catalog.EXECUTOR_ROCKSDB_MEMORY_ESTIMATE, executor(bad_app, "2"), f"{_n(budget * ratio / 4)}x{n}"),
            (catalog.EXECUTOR_ROCKSDB_MEMORY_REPORTED, executor(bad_app, "2"), f"{_n(budget * share)}x{n}"),
            (catalog.EXECUTOR_ROCKSDB_MEMORY_BUDGET, executor(ok_app, "3"), f"{budget}x{n}"),
            (catalog.EXECUTOR_ROCKSDB_MEMORY_ESTIMATE, executor(ok_app, "3"), f"{_n(budget * ratio / 2)}x{n}"),
            # the sum over executors is no executor: far above one executor's budget, it never alerts
            (catalog.EXECUTOR_ROCKSDB_MEMORY_BUDGET, executor(ok_app, "total"), f"{budget}x{n}"),
            (catalog.EXECUTOR_ROCKSDB_MEMORY_ESTIMATE, executor(ok_app, "total"), f"{_n(budget * 4)}x{n}"),
        ],
        c.for_(alert) + 2,
        [(_keep(executor(bad_app, "1"), by_ex), share), (_keep(executor(bad_app, "2"), by_ex), share)],
        c.quiet_before(alert),
    )


def _observer_down(c: CaseInputs) -> Case:
    """``up`` of the configured observer job: 0 on one endpoint fires, 1 on the other does not."""
    alert = "SparkStateObserverDown"
    n = _samples(c.for_(alert) + 10)
    down, up = {**c.ls.up, "instance": "driver-a:9108"}, {**c.ls.up, "instance": "driver-b:9108"}
    return Case(alert, [("up", down, f"0x{n}"), ("up", up, f"1x{n}")], c.for_(alert) + 3, [(down, 0.0)], c.quiet_before(alert))


def _observer_dropping_events(c: CaseInputs) -> Case:
    alert = "SparkStateObserverDroppingEvents"
    at = 10 + c.for_(alert) + 2
    n, reason = _samples(at + 10), {"reason": "queue_full"}
    return Case(
        alert,
        [
            (catalog.EVENTS_DROPPED, c.ls.endpoint(0, **reason), f"0+5x{n}"),
            (catalog.EVENTS_DROPPED, c.ls.endpoint(1, **reason), f"0x{n}"),
        ],
        at,
        [(_keep(c.ls.endpoint(0, **reason), [*c.by_endpoint, "reason"]), 50.0)],
    )


def _observer_failing(c: CaseInputs) -> Case:
    alert = "SparkStateObserverFailing"
    at = 10 + c.for_(alert) + 2
    n = _samples(at + 10)
    return Case(
        alert,
        [
            (catalog.EVENTS_FAILED, c.ls.endpoint(0), f"0+1x{n}"),
            (catalog.EVENTS_FAILED, c.ls.endpoint(1), f"0x{n}"),
            (catalog.EXPORT_FAILURES, c.ls.endpoint(1, exporter="pushgateway"), f"0x{n}"),
        ],
        at,
        [(_keep(c.ls.endpoint(0), c.by_endpoint), 10.0)],
    )


CASE_BUILDERS: dict[str, Callable[[CaseInputs], Case]] = {  # alert name -> its case
    "SparkStreamingQueryFailed": _query_failed,
    "SparkStreamingQueryLost": _query_lost,
    "SparkStreamingQueryDown": _query_down,
    "SparkStreamingScheduledRunOverdue": _scheduled_run_overdue,
    "SparkStreamingQueryCrashLooping": _crash_looping,
    "SparkStreamingQueryStalled": _stalled,
    "SparkStreamingQueryFallingBehind": _falling_behind,
    "SparkStreamingKafkaLagGrowing": _kafka_lag_growing,
    "SparkStreamingKafkaLagSecondsHigh": _kafka_lag_seconds_high,
    "SparkStreamingKafkaPartitionStuck": _kafka_partition_stuck,
    "SparkStreamingKafkaDataLossRisk": _kafka_data_loss_risk,
    "SparkStreamingWatermarkLagHigh": _watermark_lag_high,
    "SparkStreamingLateRowsDropped": _late_rows_dropped,
    "SparkStateRestoreTooLong": _restore_too_long,
    "SparkStateRestoreSlow": _restore_slow,
    "SparkStateUnbounded": _state_unbounded,
    "SparkStateBudgetExhaustionForecast": _budget_exhaustion_forecast,
    "SparkStateMemoryNearBudget": _memory_near_budget,
    "SparkStateCommitLatencyHigh": _commit_latency_high,
    "SparkStateRocksDBWriteStalls": _rocksdb_write_stalls,
    "SparkStateSnapshotUploadLagging": _snapshot_upload_lagging,
    "SparkStateSnapshotAutoRepaired": _snapshot_auto_repaired,
    "SparkStatePartitionsMigrating": _partitions_migrating,
    "SparkStateSkewed": _state_skewed,
    "SparkStateRocksDBMemoryNearBudget": _rocksdb_memory_near_budget,
    "SparkStateObserverDown": _observer_down,
    "SparkStateObserverDroppingEvents": _observer_dropping_events,
    "SparkStateObserverFailing": _observer_failing,
}


def build_cases(config: MixinConfig, values: Thresholds | None = None) -> list[Case]:
    """One case per alert; series values from ``values`` (default: the configuration's own thresholds).

    The expected alerts assume ``values`` is the configuration's own; with another's, only the series
    are meaningful (the caller states what it expects).
    """
    inputs = CaseInputs(config, values or config.thresholds, LabelSets(config))
    exported = [r["alert"] for rules in alert_groups(config).values() for r in rules]
    cases = [build(inputs) for alert, build in CASE_BUILDERS.items() if alert in exported]
    specs = alerts.by_name()
    return cases + [_flag(inputs, specs[a]) for a in exported if a not in CASE_BUILDERS and specs[a].flag]


def _flag(c: CaseInputs, spec: alerts.AlertSpec) -> Case:
    """The case of a declared alert on a per-query 0/1 gauge (``AlertSpec.flag``; ``rules.flag_alert``)."""
    return c.flag(spec.name, catalog.BY_NAME[spec.flag], c.ls.query, c.by_query)


def _series(name: MetricSpec | str, labels: Labels) -> str:
    inner = ", ".join(f"{k}={quote(v)}" for k, v in labels.items())
    return f"{name if isinstance(name, str) else metric(name)}{{{inner}}}"


def case_document(case: Case, rule: dict[str, Any]) -> dict[str, Any]:
    """The promtool test of one case, expected annotations rendered from ``rule``."""
    expected = []
    for labels, value in case.firing:
        all_labels = {**labels, "severity": rule["labels"]["severity"]}
        annotations = {k: render_template(text, all_labels, value) for k, text in rule["annotations"].items()}
        expected.append({"exp_labels": all_labels, "exp_annotations": annotations})
    checks: list[tuple[float, list[dict[str, Any]]]] = [(at, []) for at in case.quiet_at]
    checks.append((case.fire_at, expected))
    return {
        "interval": "1m",
        "input_series": [{"series": _series(n, labels), "values": values} for n, labels, values in case.series],
        "alert_rule_test": [
            {"eval_time": format_duration(at * 60), "alertname": case.alert, "exp_alerts": exp}
            for at, exp in sorted(checks, key=lambda c: c[0])
        ],
    }


def rule_test_files(config: MixinConfig, rule_files: tuple[str, ...] = ("../rules.yml", "../recording.yml")) -> dict[str, str]:
    """File name -> promtool test YAML, one file per rule group, for the rules of ``config``."""
    groups = alert_groups(config)
    cases = {c.alert: c for c in build_cases(config)}
    missing = {r["alert"] for rules in groups.values() for r in rules} - set(cases)
    assert not missing, f"alerts without a generated test: {missing}"
    out = {}
    for suffix, rules in groups.items():
        doc = {"rule_files": list(rule_files), "evaluation_interval": "1m", "tests": [case_document(cases[r["alert"]], r) for r in rules]}
        out[f"{suffix}.yml"] = dump(doc, HEADER)
    return out
