"""Restore & rebalance: what a restart costs (the Spark side of Kafka Streams' restoration), and what moves
stores between executors within a run."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from alerts.config import THRESHOLDS as T
from dashboards.panels import dashboard, row, ts
from dashboards.promql import OPERATOR, QO, RATE, metric, or_zero, per_batch, sel

OK, WARN, BAD = "green", "orange", "red"
BY_OP = "query, operator"
ROCKSDB = QO + ', provider="rocksdb"'
RESTORE_STEPS = [(None, OK), (T["restore_seconds"] / 5, WARN), (T["restore_seconds"], BAD)]


def build() -> db.Dashboard:
    return (
        dashboard("spark-state-restore", "Spark state / Restore & rebalance",
                  "State restores after restarts, changelog replay, loads from the checkpoint, uploads, executor changes; restarts as annotations.")
        .with_row(row("Restores after restarts"))
        .with_panel(ts("Last restore duration", "How long each operator's latest restore took (load metrics, or the excess of the first addBatch). Bad: minutes; the query makes no progress meanwhile.",
                       [(f"max by ({BY_OP}, method) ({sel('spark_state_last_restore_duration_seconds', QO)})", "{{query}} / {{operator}} ({{method}})")],
                       "s", RESTORE_STEPS, span=8, show_thresholds=True))
        .with_panel(ts("Restores and restarts", "State restores and query starts per interval. Bad: restores you did not plan (driver failures) or repeated ones (crash loop).",
                       [(f"sum by ({BY_OP}) (increase({sel('spark_state_restores_total', QO)}[{RATE}]))", "{{query}} / {{operator}} restores"),
                        (f"sum by (query) (increase({sel('spark_streaming_query_starts_total')}[{RATE}]))", "{{query}} starts")],
                       "none", [(None, OK), (1, WARN)], span=8, bars=True))
        .with_panel(ts("Downtime at the last restart", "Time between the previous run's last sign of life and the latest restart. Bad: longer than your recovery objective.",
                       [(f"max by (query) ({sel('spark_streaming_query_last_downtime_seconds')})", "{{query}}")],
                       "s", [(None, OK), (T["restore_seconds"], BAD)], span=8))
        .with_panel(ts("Changelog files replayed", "Changelog files replayed in the latest restore, and per batch (RocksDB 4.1+). Bad: many files (snapshots lag: lower minDeltasForSnapshot or check maintenance).",
                       [(f"max by ({BY_OP}) ({sel('spark_state_last_restore_changelog_files', QO)})", "{{query}} / {{operator}} last restore"),
                        (or_zero(per_batch("spark_state_rocksdb_changelog_files_replayed_total"), matchers=ROCKSDB), "{{query}} / {{operator}} per batch")],
                       "short", [(None, OK), (T["snapshot_lag_batches"], BAD)], span=12))
        .with_panel(ts("Store load time per batch", "RocksDB time loading stores and replaying changelogs per batch, summed over tasks. Bad: spikes outside restarts (stores moved between executors).",
                       [(or_zero(per_batch("spark_state_rocksdb_load_seconds_total"), matchers=ROCKSDB), "{{query}} / {{operator}} load"),
                        (or_zero(per_batch("spark_state_rocksdb_changelog_replay_seconds_total"), matchers=ROCKSDB), "{{query}} / {{operator}} changelog replay")],
                       "s", [(None, OK), (T["restore_seconds"] / 5, WARN)], span=12))
        .with_row(row("Within a run: rebalance and uploads"))
        .with_panel(ts("Loads from the checkpoint per batch", "Store loads that fetched state from the checkpoint instead of reusing an open instance (Spark 4.2+). Bad: above 0 outside restarts (executor lost, tasks moved: raise spark.locality.wait for stateful stages).",
                       [(or_zero(per_batch("spark_state_rocksdb_loads_from_checkpoint_total"), matchers=ROCKSDB), "{{query}} / {{operator}}")],
                       "short", [(None, OK), (1, WARN)], span=8))
        .with_panel(ts("Store reloads within a run", "Reloads the observer detected inside a run (loads from the checkpoint, changelog replay, load latency jumps, HDFS cache misses). Bad: any; stores moved between executors.",
                       [(or_zero(f"sum by ({OPERATOR}) (increase({sel('spark_state_store_reloads_total', QO)}[{RATE}]))"), "{{query}} / {{operator}}")],
                       "none", [(None, OK), (1, WARN)], span=8, bars=True))
        .with_panel(ts("Executors and executor changes", "Executors registered with the driver, and executors added or removed per interval. Bad: removals (lost executors move stores and force reloads).",
                       [(f"sum({metric('spark_streaming_executors')})", "executors"),
                        (f"sum by (change) (increase({metric('spark_streaming_executor_changes_total')}[{RATE}]))", "{{change}}")],
                       "none", [(None, OK)], span=8))
        .with_panel(ts("Bytes copied at the last upload", "Bytes of SST files and snapshot zip uploaded to the checkpoint at the last upload. Bad: every upload copying the whole state (files not reused).",
                       [(f"sum by ({BY_OP}) ({sel('spark_state_rocksdb_upload_copied_bytes', QO)})", "{{query}} / {{operator}} SST copied"),
                        (f"sum by ({BY_OP}) ({sel('spark_state_rocksdb_upload_zip_uncompressed_bytes', QO)})", "{{query}} / {{operator}} zip (uncompressed)")],
                       "bytes", [(None, OK)], span=12))
        .with_panel(ts("SST files copied vs reused at the last upload", "Files uploaded vs already present in the checkpoint. Bad: copied close to the total at every upload.",
                       [(f"sum by ({BY_OP}) ({sel('spark_state_rocksdb_upload_files_copied', QO)})", "{{query}} / {{operator}} copied"),
                        (f"sum by ({BY_OP}) ({sel('spark_state_rocksdb_upload_files_reused', QO)})", "{{query}} / {{operator}} reused")],
                       "short", [(None, OK)], span=12))
        .with_panel(ts("State partitions and store instances", "Shuffle partitions (pinned by the checkpoint) and store instances per operator, and changes between batches. Bad: any change (a new checkpoint, or stores not running).",
                       [(f"max by ({BY_OP}) ({sel('spark_state_shuffle_partitions', QO)})", "{{query}} / {{operator}} partitions"),
                        (f"max by ({BY_OP}) ({sel('spark_state_store_instances', QO)})", "{{query}} / {{operator}} store instances"),
                        (or_zero(f"sum by ({OPERATOR}) (increase({sel('spark_state_partition_changes_total', QO)}[{RATE}]))"), "{{query}} / {{operator}} changes")],
                       "short", [(None, OK)], span=24))
    )
