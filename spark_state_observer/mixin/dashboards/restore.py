"""Restore & rebalance: what a restart costs (the Spark side of Kafka Streams' restoration), and what moves
stores between executors within a run."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from spark_state_observer.metrics import catalog
from spark_state_observer.mixin.dashboards.panels import BAD, OK, WARN, Context, dashboard, row, ts
from spark_state_observer.mixin.promql import RATE


def build(ctx: Context) -> db.Dashboard:
    p, t = ctx.p, ctx.t
    by_op = p.by("query, operator")
    rocksdb = p.qo + ', provider="rocksdb"'
    restore_steps = [(None, OK), (t.restore_seconds / 5, WARN), (t.restore_seconds, BAD)]
    return (
        dashboard(
            ctx,
            "restore",
            "Spark state / Restore & rebalance",
            "State restores after restarts, changelog replay, loads from the checkpoint, uploads, executor changes; restarts as annotations.",
        )
        .with_row(row("Restores after restarts"))
        .with_panel(
            ts(
                ctx,
                "Last restore duration",
                "How long each operator's latest restore took (load metrics, or the excess of the first addBatch). Bad: minutes; the query makes no progress meanwhile.",
                [(f"max by ({by_op}, method) ({p.sel(catalog.LAST_RESTORE_DURATION, p.qo)})", "{{query}} / {{operator}} ({{method}})")],
                "s",
                restore_steps,
                span=8,
                show_thresholds=True,
                no_value="No restore seen: no query of the selection restarted from a checkpoint with state",
            )
        )
        .with_panel(
            ts(
                ctx,
                "Restores and restarts",
                "State restores and query starts per interval. Bad: restores you did not plan (driver failures) or repeated ones (crash loop).",
                [
                    (f"sum by ({by_op}) (increase({p.sel(catalog.STATE_RESTORES, p.qo)}[{RATE}]))", "{{query}} / {{operator}} restores"),
                    (f"sum by ({p.by('query')}) (increase({p.sel(catalog.QUERY_STARTS)}[{RATE}]))", "{{query}} starts"),
                ],
                "none",
                [(None, OK), (1, WARN)],
                span=8,
                bars=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Downtime at the last restart",
                "Time between the previous run's last sign of life and the latest restart. Bad: longer than your recovery objective.",
                [(f"max by ({p.by('query')}) ({p.sel(catalog.QUERY_LAST_DOWNTIME)})", "{{query}}")],
                "s",
                [(None, OK), (t.restore_seconds, BAD)],
                span=8,
                no_value="No restart seen for the selected queries",
            )
        )
        .with_panel(
            ts(
                ctx,
                "Changelog files replayed",
                "Changelog files replayed in the latest restore, and per batch (RocksDB 4.1+). Bad: many files (snapshots lag: lower minDeltasForSnapshot or check maintenance).",
                [
                    (f"max by ({by_op}) ({p.sel(catalog.LAST_RESTORE_CHANGELOG_FILES, p.qo)})", "{{query}} / {{operator}} last restore"),
                    (
                        p.or_zero(p.per_batch(catalog.by_key("rocksdbNumReplayChangelogFiles")), matchers=rocksdb),
                        "{{query}} / {{operator}} per batch",
                    ),
                ],
                "short",
                [(None, OK), (t.snapshot_lag_batches, BAD)],
                span=12,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Store load time per batch",
                "RocksDB time loading stores and replaying changelogs per batch, summed over tasks. Bad: spikes outside restarts (stores moved between executors).",
                [
                    (p.or_zero(p.per_batch(catalog.by_key("rocksdbLoadLatencyMs")), matchers=rocksdb), "{{query}} / {{operator}} load"),
                    (
                        p.or_zero(p.per_batch(catalog.by_key("rocksdbReplayChangeLogLatencyMs")), matchers=rocksdb),
                        "{{query}} / {{operator}} changelog replay",
                    ),
                ],
                "s",
                [(None, OK), (t.restore_seconds / 5, WARN)],
                span=12,
            )
        )
        .with_row(row("Restore in progress"))
        .with_panel(
            ts(
                ctx,
                "Partitions left to restore",
                "State partitions (store instances) of a running restore not loaded yet, from the restoring batch's tasks as they end (event logs; live with the UI on). Bad: partitions left for long while the query makes no progress (a restore that has stalled). Empty: no restore running.",
                [(f"max by ({by_op}) ({p.sel(catalog.RESTORE_PARTITIONS_REMAINING, p.qo)})", "{{query}} / {{operator}}")],
                "none",
                [(None, OK)],
                span=12,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Restore elapsed and ETA",
                "Time since the restoring batch started, and the time left at the rate its partitions have finished. Bad: their sum past the restore budget (SparkStateRestoreSlow).",
                [
                    (f"max by ({by_op}) ({p.sel(catalog.RESTORE_ELAPSED, p.qo)})", "{{query}} / {{operator}} elapsed"),
                    (f"max by ({by_op}) ({p.sel(catalog.RESTORE_ETA, p.qo)})", "{{query}} / {{operator}} ETA"),
                ],
                "s",
                restore_steps,
                span=12,
            )
        )
        .with_row(row("Within a run: rebalance and uploads"))
        .with_panel(
            ts(
                ctx,
                "Loads from the checkpoint per batch",
                "Store loads that fetched state from the checkpoint instead of reusing an open instance (Spark 4.2+). Bad: above 0 outside restarts (executor lost, tasks moved: raise spark.locality.wait for stateful stages).",
                [(p.or_zero(p.per_batch(catalog.by_key("rocksdbNumLoadedFromDfs")), matchers=rocksdb), "{{query}} / {{operator}}")],
                "short",
                [(None, OK), (1, WARN)],
                span=8,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Store reloads within a run",
                "Reloads the observer detected inside a run (loads from the checkpoint, changelog replay, load latency jumps, HDFS cache misses). Bad: any; stores moved between executors.",
                [
                    (
                        p.or_zero(f"sum by ({p.operator}) (increase({p.sel(catalog.STATE_STORE_RELOADS, p.qo)}[{RATE}]))"),
                        "{{query}} / {{operator}}",
                    )
                ],
                "none",
                [(None, OK), (1, WARN)],
                span=8,
                bars=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Executors and executor changes",
                "Executors registered with the driver, and executors added or removed per interval. Bad: removals (lost executors move stores and force reloads).",
                [
                    (f"sum by ({p.identity}) ({p.sel(catalog.EXECUTORS, p.app)})", "{{" + ctx.config.app_label + "}} executors"),
                    (
                        f"sum by ({p.by('change')}) (increase({p.sel(catalog.EXECUTOR_CHANGES, p.app)}[{RATE}]))",
                        "{{" + ctx.config.app_label + "}} {{change}}",
                    ),
                ],
                "none",
                [(None, OK)],
                span=8,
                no_value="Not reported: the executor count comes from a live driver (not from event logs); no executor came or went",
            )
        )
        .with_panel(
            ts(
                ctx,
                "Bytes copied at the last upload",
                "Bytes of SST files and snapshot zip uploaded to the checkpoint at the last upload. Bad: every upload copying the whole state (files not reused).",
                [
                    (f"sum by ({by_op}) ({p.sel(catalog.by_key('rocksdbBytesCopied'), p.qo)})", "{{query}} / {{operator}} SST copied"),
                    (
                        f"sum by ({by_op}) ({p.sel(catalog.by_key('rocksdbZipFileBytesUncompressed'), p.qo)})",
                        "{{query}} / {{operator}} zip (uncompressed)",
                    ),
                ],
                "bytes",
                [(None, OK)],
                span=12,
            )
        )
        .with_panel(
            ts(
                ctx,
                "SST files copied vs reused at the last upload",
                "Files uploaded vs already present in the checkpoint. Bad: copied close to the total at every upload.",
                [
                    (f"sum by ({by_op}) ({p.sel(catalog.by_key('rocksdbFilesCopied'), p.qo)})", "{{query}} / {{operator}} copied"),
                    (f"sum by ({by_op}) ({p.sel(catalog.by_key('rocksdbFilesReused'), p.qo)})", "{{query}} / {{operator}} reused"),
                ],
                "short",
                [(None, OK)],
                span=12,
            )
        )
        .with_panel(
            ts(
                ctx,
                "State partitions and store instances",
                "Shuffle partitions (pinned by the checkpoint) and store instances per operator, and changes between batches. Bad: any change (a new checkpoint, or stores not running).",
                [
                    (f"max by ({by_op}) ({p.sel(catalog.by_key('numShufflePartitions'), p.qo)})", "{{query}} / {{operator}} partitions"),
                    (
                        f"max by ({by_op}) ({p.sel(catalog.by_key('numStateStoreInstances'), p.qo)})",
                        "{{query}} / {{operator}} store instances",
                    ),
                    (
                        p.or_zero(f"sum by ({p.operator}) (increase({p.sel(catalog.PARTITION_CHANGES, p.qo)}[{RATE}]))"),
                        "{{query}} / {{operator}} changes",
                    ),
                ],
                "short",
                [(None, OK)],
                span=24,
            )
        )
        .with_row(row("Placement: migrations and skew"))
        .with_panel(
            ts(
                ctx,
                "Partition migrations by cause",
                "State partitions that ran on another executor than in their previous batch, per interval, by cause (executor_removed, executor_added, locality_fallback). Bad: moves in batch after batch (SparkStatePartitionsMigrating); one burst at an executor loss is expected.",
                [
                    (
                        f"sum by ({by_op}, cause) (increase({p.sel(catalog.PARTITION_MIGRATIONS, p.qo)}[{RATE}]))",
                        "{{query}} / {{operator}} {{cause}}",
                    )
                ],
                "none",
                [(None, OK), (1, WARN)],
                span=8,
                bars=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Stickiness",
                "Share of the operator's state partitions that stayed on their executor in the latest placed batch. Bad: below 1 often (stores reload elsewhere).",
                [(f"min by ({by_op}) ({p.sel(catalog.PARTITION_STICKINESS, p.qo)})", "{{query}} / {{operator}}")],
                "percentunit",
                [(None, BAD), (0.5, WARN), (1, OK)],
                span=8,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Migration load time",
                "Store load time of migrated partitions per interval (RocksDB 4.1+, from event logs: replay or watch; an aggregation's moves are under-reported, its tasks load twice). Bad: seconds per interval, again and again.",
                [(f"sum by ({by_op}) (increase({p.sel(catalog.PARTITION_MIGRATION_LOAD, p.qo)}[{RATE}]))", "{{query}} / {{operator}}")],
                "s",
                [(None, OK), (t.restore_seconds / 5, WARN)],
                span=8,
                bars=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "State skew per operator",
                "Largest partition over the median partition, by state rows and by state memory (event logs only). Bad: far above 1: one partition holds most of the state, restores and batches wait for it.",
                [
                    (f"max by ({by_op}) ({p.sel(catalog.PARTITION_ROWS_SKEW, p.qo)})", "{{query}} / {{operator}} rows"),
                    (f"max by ({by_op}) ({p.sel(catalog.PARTITION_MEMORY_SKEW, p.qo)})", "{{query}} / {{operator}} memory"),
                ],
                "none",
                [(None, OK), (2, WARN), (10, BAD)],
                span=8,
            )
        )
        .with_panel(
            ts(
                ctx,
                "State bytes skew per operator",
                "Largest partition's state bytes (RocksDB SST files) over the median partition's, with the largest partition's bytes (event logs only). The state's real size: a hot key with big values is one row, and RocksDB memory is mostly fixed per store instance. Bad: 4x and more on a partition of tens of kilobytes and up, batch after batch (the state_skewed signal).",
                [
                    (f"max by ({by_op}) ({p.sel(catalog.PARTITION_BYTES_SKEW, p.qo)})", "{{query}} / {{operator}} bytes skew"),
                ],
                "none",
                [(None, OK), (4, WARN), (10, BAD)],
                span=8,
            )
        )
        .with_panel(
            ts(
                ctx,
                "State per executor",
                "State partitions and state memory each executor holds over the query's operators (top executors). Bad: one executor far above the others (its loss moves most of the state; RocksDB memory can kill it).",
                [
                    (
                        f"max by ({p.by('query, executor')}) ({p.sel(catalog.EXECUTOR_STATE_PARTITIONS)})",
                        "{{query}} executor {{executor}} partitions",
                    ),
                    (
                        f"max by ({p.by('query, executor')}) ({p.sel(catalog.EXECUTOR_STATE_MEMORY)})",
                        "{{query}} executor {{executor}} bytes",
                    ),
                ],
                "short",
                [(None, OK)],
                span=8,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Costliest migrated partitions",
                "Load time of the latest move of the operator's costliest migrated partitions (top-K partitions; event logs only). Bad: the same partitions again and again, or seconds each.",
                [
                    (
                        f"max by ({by_op}, partition) ({p.sel(catalog.PARTITION_MIGRATION_LAST_LOAD, p.qo)})",
                        "{{query}} / {{operator}} partition {{partition}}",
                    )
                ],
                "s",
                [(None, OK), (t.restore_seconds / 5, WARN)],
                span=8,
                no_value="No partition migrated",
            )
        )
    )
