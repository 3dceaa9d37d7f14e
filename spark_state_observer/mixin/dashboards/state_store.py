"""State store & RocksDB: memory, cache, commit latency, compaction, write stalls, disk and snapshot lag."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.mixin.dashboards.panels import BAD, OK, WARN, Context, dashboard, row, ts
from spark_state_observer.mixin.promql import RATE
from spark_state_observer.mixin.rules import RECORDED_CACHE_HIT_RATIO, RECORDED_COMMIT_PER_INSTANCE

COMMIT_PARTS = (
    (catalog.by_key("rocksdbCommitFlushLatency"), "flush"),
    (catalog.by_key("rocksdbCommitCheckpointLatency"), "checkpoint"),
    (catalog.by_key("rocksdbCommitFileSyncLatencyMs"), "file sync"),
    (catalog.by_key("rocksdbChangeLogWriterCommitLatencyMs"), "changelog"),
    (catalog.by_key("rocksdbSaveZipFilesLatencyMs"), "zip upload"),
    (catalog.by_key("rocksdbCommitCompactLatency"), "compact"),
    (catalog.by_key("rocksdbCommitWriteBatchLatency"), "write batch"),
    (catalog.by_key("rocksdbCommitPauseLatency"), "pause"),
)


def build(ctx: Context) -> db.Dashboard:
    p, t = ctx.p, ctx.t
    by_op = p.by("query, operator")
    rocksdb = p.qo + ', provider="rocksdb"'

    def rocksdb_per_batch(name: MetricSpec) -> str:
        """Per-batch mean of a RocksDB counter, 0 on RocksDB operators that have not reported it yet."""
        return p.or_zero(p.per_batch(name), matchers=rocksdb)

    hits = p.rate(catalog.by_key("rocksdbReadBlockCacheHitCount"), p.operator, p.qo)
    misses = p.rate(catalog.by_key("rocksdbReadBlockCacheMissCount"), p.operator, p.qo)
    by_ex = p.by("executor")
    per_ex = 'executor!="total"'
    budget = p.sel(catalog.EXECUTOR_ROCKSDB_MEMORY_BUDGET, p.app, per_ex)
    memory_steps = [(None, OK), (t.state_memory_budget_ratio * t.state_memory_budget_bytes, WARN), (t.state_memory_budget_bytes, BAD)]
    return (
        dashboard(
            ctx,
            "store",
            "Spark state / State store & RocksDB",
            "State stores per operator: memory and pinned blocks, block cache, commit latency, compaction, write stalls, SST size, snapshot lag.",
        )
        .with_row(row("Memory and disk"))
        .with_panel(
            ts(
                ctx,
                "State memory",
                "Memory of the operator's state stores, summed over partitions. Bad: near the RocksDB bound (boundedMemoryUsage) or the executor memory.",
                [(f"sum by ({by_op}) ({p.sel(catalog.by_key('memoryUsedBytes'), p.qo)})", "{{query}} / {{operator}}")],
                "bytes",
                memory_steps,
                span=8,
                show_thresholds=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "RocksDB pinned blocks memory",
                "Block-cache memory pinned by iterators and index/filter blocks. Bad: a large share of the bound, or growing (open iterators, oversized indexes).",
                [(f"sum by ({by_op}) ({p.sel(catalog.by_key('rocksdbPinnedBlocksMemoryUsage'), p.qo)})", "{{query}} / {{operator}}")],
                "bytes",
                [(None, OK)],
                span=8,
            )
        )
        .with_panel(
            ts(
                ctx,
                "RocksDB SST size on local disk",
                "Live SST files on the executors' local disks, summed over partitions. Bad: close to the local disk size, or growing without bound.",
                [(f"sum by ({by_op}) ({p.sel(catalog.by_key('rocksdbSstFileSize'), p.qo)})", "{{query}} / {{operator}}")],
                "bytes",
                [(None, OK)],
                span=8,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Block cache hit ratio",
                "Share of RocksDB reads served by the block cache. Bad: below ~80% (reads go to disk; raise the cache or memory bound).",
                [
                    (f"{hits} / ({hits} + ({misses} or {hits} * 0))", "{{query}} / {{operator}}"),
                    (f"max by ({by_op}) ({RECORDED_CACHE_HIT_RATIO}{{{p.qo}}})", "{{query}} / {{operator}} (5m, recorded)"),
                ],
                "percentunit",
                [(None, BAD), (0.5, WARN), (0.8, OK)],
                span=12,
                show_thresholds=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "HDFS-backed store: current version size and cache misses",
                "HDFS provider only: size of the current state version, and versions rebuilt from files (a restore). Bad: cache misses rising within a run.",
                [
                    (
                        f"sum by ({by_op}) ({p.sel(catalog.by_key('stateOnCurrentVersionSizeBytes'), p.qo)})",
                        "{{query}} / {{operator}} current version",
                    ),
                    (
                        f"sum by ({by_op}) ({p.sel(catalog.by_key('loadedMapCacheMissCount'), p.qo)})",
                        "{{query}} / {{operator}} cache misses",
                    ),
                ],
                "bytes",
                [(None, OK)],
                span=12,
                no_value="No HDFS-backed state store in the selected queries",
            )
        )
        .with_row(row("Commit"))
        .with_panel(
            ts(
                ctx,
                "RocksDB commit latency breakdown (per batch)",
                "Mean commit time per batch by step, summed over tasks, stacked (0: not reported by this Spark version or config). Bad: file sync / zip upload dominating (slow checkpoint storage), flush or compact rising.",
                [(rocksdb_per_batch(name), "{{query}} / {{operator}} " + label) for name, label in COMMIT_PARTS],
                "s",
                [(None, OK)],
                stack=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Commit time per store instance",
                "Mean state-store commit time per store instance and batch (all providers). Bad: above the alert level; batches wait on commits.",
                [
                    (f"max by ({by_op}) ({RECORDED_COMMIT_PER_INSTANCE}{{{p.qo}}})", "{{query}} / {{operator}}"),
                    (
                        f"{p.per_batch(catalog.by_key('commitTimeMs'))} / on ({p.operator}) max by ({p.operator}) ({p.sel(catalog.by_key('numStateStoreInstances'), p.qo)})",
                        "{{query}} / {{operator}} (now)",
                    ),
                ],
                "s",
                [(None, OK), (t.commit_seconds_per_instance / 2, WARN), (t.commit_seconds_per_instance, BAD)],
                show_thresholds=True,
            )
        )
        .with_row(row("Compaction and write stalls"))
        .with_panel(
            ts(
                ctx,
                "Compaction time per batch",
                "RocksDB compaction time per batch, background included. Bad: rising with write stalls (compaction cannot keep up).",
                [(rocksdb_per_batch(catalog.by_key("rocksdbTotalCompactionLatencyMs")), "{{query}} / {{operator}}")],
                "s",
                [(None, OK)],
                span=8,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Compaction bytes per batch",
                "Bytes read and written by compaction per batch. Bad: written far above the state's size (write amplification).",
                [
                    (rocksdb_per_batch(catalog.by_key("rocksdbTotalBytesReadByCompaction")), "{{query}} / {{operator}} read"),
                    (rocksdb_per_batch(catalog.by_key("rocksdbTotalBytesWrittenByCompaction")), "{{query}} / {{operator}} written"),
                ],
                "bytes",
                [(None, OK)],
                span=8,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Write stalls per batch",
                "Time RocksDB writers waited for flush or compaction per batch (Spark's unit is suspect: compare relative values). Bad: anything above 0 for long.",
                [(rocksdb_per_batch(catalog.by_key("rocksdbWriterStallLatencyMs")), "{{query}} / {{operator}}")],
                "s",
                [(None, OK), (t.write_stall_seconds_per_batch + 0.001, BAD)],
                span=8,
                show_thresholds=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Bytes written and flushed per batch",
                "Bytes written by puts/deletes and by memtable flushes per batch. Bad: rising much faster than the input rows.",
                [
                    (rocksdb_per_batch(catalog.by_key("rocksdbTotalBytesWritten")), "{{query}} / {{operator}} written"),
                    (rocksdb_per_batch(catalog.by_key("rocksdbTotalBytesWrittenByFlush")), "{{query}} / {{operator}} flushed"),
                ],
                "bytes",
                [(None, OK)],
            )
        )
        .with_panel(
            ts(
                ctx,
                "Gets and puts per batch",
                "RocksDB get and put calls per batch. Bad: gets far above the input rows (a join or dedup scanning state).",
                [
                    (rocksdb_per_batch(catalog.by_key("rocksdbGetCount")), "{{query}} / {{operator}} gets"),
                    (rocksdb_per_batch(catalog.by_key("rocksdbPutCount")), "{{query}} / {{operator}} puts"),
                ],
                "short",
                [(None, OK)],
            )
        )
        .with_row(row("Snapshots"))
        .with_panel(
            ts(
                ctx,
                "Snapshot lag per partition",
                "Versions since each store instance last uploaded a snapshot, since the first one when it never did (the most lagging partitions): about the changelog files a restart replays. Bad: far above minDeltasForSnapshot and growing (maintenance cannot keep up).",
                [
                    (
                        f"max by ({p.by('query, operator, partition, store')}) ({p.sel(catalog.SNAPSHOT_LAG_BATCHES, p.qo)})",
                        "{{query}} / {{operator}} p{{partition}} {{store}}",
                    )
                ],
                "short",
                [(None, OK), (t.snapshot_lag_batches / 2, WARN), (t.snapshot_lag_batches, BAD)],
                show_thresholds=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Store instances without a snapshot",
                "Every store instance's snapshot health: never uploaded (from the checkpoint's listing where readable), beyond the normal lag, "
                "unknown (Spark reports the 5 most lagging), and stores forced to snapshot because their upload lagged. Bad: never uploaded or lagging staying above 0 long after a start.",
                [
                    (
                        f"sum by ({by_op}) ({p.sel(catalog.SNAPSHOT_INSTANCES_NEVER_UPLOADED, p.qo)})",
                        "{{query}} / {{operator}} never uploaded",
                    ),
                    (f"sum by ({by_op}) ({p.sel(catalog.SNAPSHOT_INSTANCES_LAGGING, p.qo)})", "{{query}} / {{operator}} lagging"),
                    (f"sum by ({by_op}) ({p.sel(catalog.SNAPSHOT_INSTANCES_UNKNOWN, p.qo)})", "{{query}} / {{operator}} unknown"),
                    (rocksdb_per_batch(catalog.by_key("rocksdbForceSnapshotCount")), "{{query}} / {{operator}} forced per batch"),
                ],
                "short",
                [(None, OK), (1, WARN)],
            )
        )
        .with_panel(
            ts(
                ctx,
                "Auto-repaired snapshots",
                "Snapshots Spark found corrupt while loading a store and skipped for an older one (auto-repair, 4.2+; absent before). Bad: any (SparkStateSnapshotAutoRepaired): the checkpoint's storage lost or damaged a file.",
                [
                    (
                        f"sum by ({by_op}) (increase({p.sel(catalog.by_key(key), p.qo)}[{RATE}]))",
                        "{{query}} / {{operator}} " + provider,
                    )
                    for key, provider in (("rocksdbNumSnapshotsAutoRepaired", "RocksDB"), ("numSnapshotsAutoRepaired", "HDFS"))
                ],
                "none",
                [(None, OK), (1, BAD)],
                bars=True,
                no_value="None: no snapshot was found corrupt and skipped",
            )
        )
        .with_row(row("RocksDB memory and disk per executor"))
        .with_panel(
            ts(
                ctx,
                "RocksDB memory per executor against its budget",
                "Per executor (top executors): the RocksDB memory its stores need by the application's configuration and data (estimate), what they can grow to with full write buffers and caches (ceiling), what Spark reports (event logs only), and the budget (memoryOverhead). Bad: estimate or report near the budget (SparkStateRocksDBMemoryNearBudget; the container can be killed); a ceiling above it means the state can outgrow the executor.",
                [
                    (
                        f"max by ({by_ex}) ({p.sel(catalog.EXECUTOR_ROCKSDB_MEMORY_ESTIMATE, p.app, per_ex)})",
                        "executor {{executor}} estimate",
                    ),
                    (
                        f"max by ({by_ex}) ({p.sel(catalog.EXECUTOR_ROCKSDB_MEMORY_CEILING, p.app, per_ex)})",
                        "executor {{executor}} ceiling",
                    ),
                    (
                        f"max by ({by_ex}) ({p.sel(catalog.EXECUTOR_ROCKSDB_MEMORY_REPORTED, p.app, per_ex)})",
                        "executor {{executor}} reported",
                    ),
                    (f"max by ({by_ex}) ({p.sel(catalog.EXECUTOR_ROCKSDB_MEMORY_BUDGET, p.app, per_ex)})", "executor {{executor}} budget"),
                ],
                "bytes",
                [(None, OK)],
                span=12,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Share of the budget per executor",
                "Estimated and reported RocksDB memory over each executor's memoryOverhead. Bad: above the alert's share; in bounded mode Spark's per-instance report is a share of the shared total (SPARK-53002).",
                [
                    (
                        f"max by ({by_ex}) ({p.sel(catalog.EXECUTOR_ROCKSDB_MEMORY_ESTIMATE, p.app, per_ex)}) / max by ({by_ex}) ({budget})",
                        "executor {{executor}} estimate",
                    ),
                    (
                        f"max by ({by_ex}) ({p.sel(catalog.EXECUTOR_ROCKSDB_MEMORY_REPORTED, p.app, per_ex)}) / max by ({by_ex}) ({budget})",
                        "executor {{executor}} reported",
                    ),
                ],
                "percentunit",
                [(None, OK), (t.rocksdb_memory_budget_ratio / 2, WARN), (t.rocksdb_memory_budget_ratio, BAD)],
                span=12,
                show_thresholds=True,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Store instances and SST bytes per executor",
                "State store instances each executor holds over the application's queries, and the local SST bytes of its stores (each operator's SST size shared out by partitions). Bad: one executor far above the others.",
                [
                    (f"max by ({by_ex}) ({p.sel(catalog.EXECUTOR_STORE_INSTANCES, p.app, per_ex)})", "executor {{executor}} instances"),
                    (f"max by ({by_ex}) ({p.sel(catalog.EXECUTOR_ROCKSDB_SST, p.app, per_ex)})", "executor {{executor}} SST bytes"),
                ],
                "short",
                [(None, OK)],
                span=12,
            )
        )
        .with_panel(
            ts(
                ctx,
                "Implausible RocksDB memory reports",
                "Batches whose reported RocksDB memory cannot be right, by reason: above_budget (orders of magnitude over the executor's room), zero_with_rows, bounded_division (bounded mode splits the shared total evenly, once per run). Bad: above_budget or zero_with_rows: trust the estimate, not memoryUsedBytes.",
                [
                    (
                        f"sum by ({by_op}, reason) (increase({p.sel(catalog.ROCKSDB_MEMORY_IMPLAUSIBLE, p.qo)}[{RATE}]))",
                        "{{query}} / {{operator}} {{reason}}",
                    )
                ],
                "none",
                [(None, OK), (1, WARN)],
                span=12,
                bars=True,
                no_value="None: every RocksDB memory report was plausible",
            )
        )
    )
