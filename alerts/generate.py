"""Generate ``alerts/rules.yml`` and ``alerts/recording.yml`` from ``alerts.config`` and the metric catalog.

Rules are data here so that thresholds live in one place and every metric name goes through
``metric()``, which fails on a name ``observer.metrics.catalog`` does not export: a renamed metric breaks
generation and the tests, not a pager at night. Run ``python -m alerts.generate`` after a change.
"""

from __future__ import annotations

import os
import sys

import yaml

from alerts.config import OBSERVER_JOB, RUNBOOK_BASE_URL, SELECTOR, THRESHOLDS
from observer.metrics.catalog import BY_NAME, UnknownMetricError

HERE = os.path.dirname(os.path.abspath(__file__))
T = THRESHOLDS
QUERY = "query, query_id"
OPERATOR = "query, query_id, operator_index, operator"


def metric(name: str, matchers: str = "") -> str:
    """``name{matchers}`` with the global SELECTOR; ``UnknownMetricError`` (a KeyError) for a name the catalog lacks."""
    if name not in BY_NAME:
        raise UnknownMetricError(f"{name} is not a metric of observer.metrics.catalog")
    parts = [p for p in (matchers, SELECTOR) if p]
    return f"{name}{{{', '.join(parts)}}}" if parts else name


def _n(value: float) -> str:
    return f"{value:g}"


# --- recording rules: per-batch means the alerts and the dashboards share -----------------------------
BATCHES = "query:spark_streaming_batches:rate5m"
RECORDING: list[dict[str, str]] = [
    {"record": BATCHES, "expr": f"sum by ({QUERY}) (rate({metric('spark_streaming_batches_total')}[5m]))"},
    {"record": "query:spark_streaming_batch_duration_seconds:mean5m",
     "expr": f"sum by ({QUERY}) (rate({metric('spark_streaming_batch_seconds_total')}[5m])) / {BATCHES}"},
    {"record": "operator:spark_state_commit_seconds:per_batch_mean5m",
     "expr": f"sum by ({OPERATOR}) (rate({metric('spark_state_commit_seconds_total')}[5m])) / on (query, query_id) group_left {BATCHES}"},
    {"record": "operator:spark_state_commit_seconds:per_instance_mean5m",
     "expr": f"operator:spark_state_commit_seconds:per_batch_mean5m / on ({OPERATOR}) max by ({OPERATOR}) ({metric('spark_state_store_instances')} > 0)"},
    {"record": "operator:spark_state_rocksdb_write_stall_seconds:per_batch_mean5m",
     "expr": f"sum by ({OPERATOR}) (rate({metric('spark_state_rocksdb_write_stall_seconds_total')}[5m])) / on (query, query_id) group_left {BATCHES}"},
    {"record": "operator:spark_state_rocksdb_block_cache_hit_ratio:rate5m",
     "expr": f"sum by ({OPERATOR}) (rate({metric('spark_state_rocksdb_block_cache_hits_total')}[5m])) / "
             f"(sum by ({OPERATOR}) (rate({metric('spark_state_rocksdb_block_cache_hits_total')}[5m])) + "
             f"(sum by ({OPERATOR}) (rate({metric('spark_state_rocksdb_block_cache_misses_total')}[5m])) or "
             f"sum by ({OPERATOR}) (rate({metric('spark_state_rocksdb_block_cache_hits_total')}[5m])) * 0)) > -1"},
]


def alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str) -> dict[str, object]:
    """One alerting rule with the labels and annotations every alert here carries."""
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": description, "runbook_url": f"{RUNBOOK_BASE_URL}#{name.lower()}"},
    }


Q = "{{ $labels.query }}"
OP = "{{ $labels.operator }}"
WINDOW_FB = f"{_n(T['falling_behind_minutes'])}m"
WINDOW_CL = f"{_n(T['crash_loop_window_minutes'])}m"
WINDOW_KL = f"{_n(T['kafka_lag_window_minutes'])}m"
RESTORE = metric("spark_state_last_restore_duration_seconds")
FAILED = metric("spark_streaming_query_status", 'status="failed"')
TERMINATED = metric("spark_streaming_query_status", 'status="terminated"')
KAFKA_LAG = metric("spark_streaming_source_offsets_behind_latest", 'stat="max"')

QUERY_ALERTS = [
    alert("SparkStreamingQueryFailed",
          f"max by ({QUERY}) ({FAILED}) == 1", "0m", "critical",
          f"Streaming query {Q} terminated with an exception.",
          f"Query {Q} ({{{{ $labels.query_id }}}}) failed and is not running; its state is not being updated."),
    alert("SparkStreamingQueryDown",
          f"max by ({QUERY}) ({TERMINATED}) == 1",
          f"{_n(T['query_terminated_minutes'])}m", "warning",
          f"Streaming query {Q} is stopped.",
          f"Query {Q} stopped without an exception {_n(T['query_terminated_minutes'])} or more minutes ago and has not started again."),
    alert("SparkStreamingQueryCrashLooping",
          f"max by ({QUERY}) ({metric('spark_streaming_query_crash_loop')}) == 1 or "
          f"sum by ({QUERY}) (increase({metric('spark_streaming_query_starts_total')}[{WINDOW_CL}])) >= {_n(T['crash_loop_restarts'])}",
          "0m", "critical",
          f"Streaming query {Q} is restarting in a loop.",
          f"Query {Q} restarted at least {_n(T['crash_loop_restarts'])} times within {WINDOW_CL}; every restart restores its state again."),
    alert("SparkStreamingQueryStalled",
          f"max by ({QUERY}) ({metric('spark_streaming_query_stalled')}) == 1", "1m", "critical",
          f"Streaming query {Q} makes no progress.",
          f"Query {Q} is active but has reported no batch for many times its usual interval (a hung batch, a long restore or a stuck source)."),
    alert("SparkStreamingQueryFallingBehind",
          f"max by ({QUERY}) ({metric('spark_streaming_falling_behind')}) == 1 or "
          f"(max by ({QUERY}) (avg_over_time({metric('spark_streaming_input_rows_per_second')}[{WINDOW_FB}])) > "
          f"{_n(T['falling_behind_ratio'])} * max by ({QUERY}) (avg_over_time({metric('spark_streaming_processed_rows_per_second')}[{WINDOW_FB}])))",
          WINDOW_FB, "warning",
          f"Streaming query {Q} is falling behind its input.",
          f"Data arrives at query {Q} faster than it is processed (sustained over {WINDOW_FB}); latency grows until it catches up."),
    alert("SparkStreamingKafkaLagGrowing",
          f"max by ({QUERY}, source_index, source) ({KAFKA_LAG}) > {_n(T['kafka_lag_offsets'])} and "
          f"max by ({QUERY}, source_index, source) (deriv({KAFKA_LAG}[{WINDOW_KL}])) > 0",
          WINDOW_KL, "warning",
          f"Kafka lag of streaming query {Q} keeps growing.",
          f"Source {{{{ $labels.source }}}} of query {Q} is {{{{ $value | humanize }}}} offsets behind the latest and the lag grew over {WINDOW_KL}."),
    alert("SparkStreamingWatermarkLagHigh",
          f"max by ({QUERY}) ({metric('spark_streaming_watermark_lag_seconds')}) > {_n(T['watermark_lag_seconds'])}", "15m", "warning",
          f"Watermark of streaming query {Q} lags far behind.",
          f"The event-time watermark of query {Q} is {{{{ $value | humanizeDuration }}}} behind the trigger time; state older than it cannot be evicted."),
]

STATE_ALERTS = [
    alert("SparkStateRestoreTooLong",
          f"max by ({OPERATOR}) ({RESTORE} > {_n(T['restore_seconds'])} unless {RESTORE} == {RESTORE} offset 1h)", "0m", "warning",
          f"State restore of query {Q} took too long.",
          f"Operator {OP} of query {Q} needed {{{{ $value | humanizeDuration }}}} to restore its state after the latest restart."),
    alert("SparkStateUnbounded",
          f"max by ({OPERATOR}) ({metric('spark_state_unbounded')}) == 1", f"{_n(T['unbounded_minutes'])}m", "warning",
          f"State of query {Q} grows without eviction.",
          f"Operator {OP} of query {Q} keeps adding state rows and removes none; without a watermark, timeout or TTL it grows until it fails."),
    alert("SparkStateBudgetExhaustionForecast",
          f"min by ({OPERATOR}) ({metric('spark_state_rows_budget_eta_seconds')}) < {_n(T['budget_eta_hours'] * 3600)} or "
          f"min by ({OPERATOR}) ({metric('spark_state_memory_budget_eta_seconds')}) < {_n(T['budget_eta_hours'] * 3600)}",
          "15m", "warning",
          f"State of query {Q} will reach its budget soon.",
          f"At the current growth rate operator {OP} of query {Q} reaches its rows or memory budget in {{{{ $value | humanizeDuration }}}}."),
    alert("SparkStateMemoryNearBudget",
          f"max by ({OPERATOR}) ({metric('spark_state_memory_used_bytes')}) > "
          f"{_n(T['state_memory_budget_ratio'] * T['state_memory_budget_bytes'])}",
          "15m", "warning",
          f"State memory of query {Q} is near its budget.",
          f"Operator {OP} of query {Q} uses {{{{ $value | humanize1024 }}}}B of state memory, above "
          f"{_n(T['state_memory_budget_ratio'] * 100)}% of the {_n(T['state_memory_budget_bytes'] / 1024**3)} GiB budget."),
    alert("SparkStateCommitLatencyHigh",
          f"max by ({OPERATOR}) (operator:spark_state_commit_seconds:per_instance_mean5m) > {_n(T['commit_seconds_per_instance'])}",
          "10m", "warning",
          f"State commits of query {Q} are slow.",
          f"Committing one state store of operator {OP} in query {Q} takes {{{{ $value | humanizeDuration }}}} per batch on average."),
    alert("SparkStateRocksDBWriteStalls",
          f"max by ({OPERATOR}) (operator:spark_state_rocksdb_write_stall_seconds:per_batch_mean5m) > {_n(T['write_stall_seconds_per_batch'])}",
          "10m", "warning",
          f"RocksDB writes of query {Q} stall.",
          f"RocksDB writers of operator {OP} in query {Q} wait for flushes or compaction ({{{{ $value | humanize }}}} s per batch)."),
    alert("SparkStateSnapshotUploadLagging",
          f"max by ({OPERATOR}) ({metric('spark_state_snapshot_lag_batches')}) > {_n(T['snapshot_lag_batches'])}", "15m", "warning",
          f"State snapshots of query {Q} are not uploaded.",
          f"A store instance of operator {OP} in query {Q} has not uploaded a snapshot for {{{{ $value }}}} batches; a restart would replay that many changelog files."),
]

OBSERVER_ALERTS = [
    alert("SparkStateObserverDown",
          "up{job=\"" + OBSERVER_JOB + "\"} == 0", "5m", "warning",
          "The spark-state-observer endpoint {{ $labels.instance }} is down.",
          "Prometheus cannot scrape {{ $labels.instance }}: the Spark driver is gone or the endpoint is unreachable; its queries are invisible."),
    alert("SparkStateObserverDroppingEvents",
          f"sum by (instance, job, reason) (increase({metric('spark_state_observer_events_dropped_total')}[10m])) > 0", "0m", "warning",
          "spark-state-observer on {{ $labels.instance }} drops events.",
          "{{ $value | humanize }} listener events were lost in 10 minutes (reason {{ $labels.reason }}); metrics and signals miss batches."),
    alert("SparkStateObserverFailing",
          f"sum by (instance, job) (increase({metric('spark_state_observer_events_failed_total')}[10m])) > 0 or "
          f"sum by (instance, job) (increase({metric('spark_state_observer_export_failures_total')}[10m])) > 0", "0m", "warning",
          "spark-state-observer on {{ $labels.instance }} fails.",
          "The observer failed to process or export {{ $value | humanize }} events in 10 minutes; see the driver log (spark-state-observer lines)."),
]


def rule_files() -> dict[str, str]:
    """File name -> YAML text of every generated rule file."""
    alerts = {"groups": [
        {"name": "spark-state-observer.queries", "rules": QUERY_ALERTS},
        {"name": "spark-state-observer.state", "rules": STATE_ALERTS},
        {"name": "spark-state-observer.observer", "rules": OBSERVER_ALERTS},
    ]}
    recording = {"groups": [{"name": "spark-state-observer.recording", "rules": RECORDING}]}
    header = "# Generated by `python -m alerts.generate` from alerts/config.py; do not edit by hand.\n"
    dump = lambda doc: header + yaml.safe_dump(doc, sort_keys=False, width=10_000, allow_unicode=True)  # noqa: E731
    return {"rules.yml": dump(alerts), "recording.yml": dump(recording)}


def main() -> int:
    for name, text in rule_files().items():
        with open(os.path.join(HERE, name), "w") as f:
            f.write(text)
        print(f"wrote alerts/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
