"""The one place to adjust alerting: thresholds, windows, the series selector and the runbook address.

``python -m alerts.generate`` turns this into ``alerts/rules.yml`` and ``alerts/recording.yml``; the dashboards
draw the same thresholds as lines, so a panel turns red where the alert fires. Change a value here,
regenerate, and update the matching case in ``alerts/tests/`` if the test series no longer cross it.
"""

from __future__ import annotations

# Where the runbook lives; each alert links to ``RUNBOOK_BASE_URL#<alertname lowercased>``.
RUNBOOK_BASE_URL = "https://github.com/spark-state-observer/spark-state-observer/blob/main/alerts/runbook.md"

# Extra label matchers put into every selector of every rule, e.g. 'env="prod"' or 'job=~"spark-.*"'.
SELECTOR = ""

# The scrape job (or Pushgateway job) of the observer endpoints, for the "observer down" alert.
OBSERVER_JOB = "spark_state_observer"

THRESHOLDS: dict[str, float] = {
    "query_terminated_minutes": 10,  # a query stopped cleanly and not started again for this long
    "crash_loop_restarts": 3,  # restarts within crash_loop_window_minutes (the observer's own rule also counts)
    "crash_loop_window_minutes": 15,
    "falling_behind_minutes": 10,  # input rate above processing rate for this long
    "falling_behind_ratio": 1.1,  # input above processing by this factor
    "kafka_lag_offsets": 10000,  # max offsets behind latest before a growing lag alerts
    "kafka_lag_window_minutes": 15,
    "restore_seconds": 300,  # a state restore slower than this
    "unbounded_minutes": 30,  # the observer called the state unbounded for this long
    "budget_eta_hours": 6,  # forecast time to the rows or memory budget
    "state_memory_budget_bytes": 8 * 1024**3,  # per operator, summed over partitions (RocksDB boundedMemoryUsage x partitions)
    "state_memory_budget_ratio": 0.8,  # alert above this share of the budget
    "commit_seconds_per_instance": 1.0,  # mean state-store commit per store instance per batch
    "write_stall_seconds_per_batch": 0.0,  # any sustained RocksDB write stall
    "snapshot_lag_batches": 100,  # batches since a store instance last uploaded a snapshot
    "watermark_lag_seconds": 2 * 3600,  # trigger time minus watermark; set above your withWatermark delay
    "batch_duration_seconds": 60,  # mean batch duration (dashboards' red line; no alert, stalls cover it)
}
