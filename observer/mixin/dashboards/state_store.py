"""State store & RocksDB: memory, cache, commit latency, compaction, write stalls, disk and snapshot lag."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from observer.mixin.dashboards.panels import BAD, OK, WARN, Context, dashboard, row, ts

COMMIT_PARTS = (
    ("spark_state_rocksdb_commit_flush_seconds_total", "flush"),
    ("spark_state_rocksdb_commit_checkpoint_seconds_total", "checkpoint"),
    ("spark_state_rocksdb_commit_file_sync_seconds_total", "file sync"),
    ("spark_state_rocksdb_commit_changelog_seconds_total", "changelog"),
    ("spark_state_rocksdb_commit_zip_upload_seconds_total", "zip upload"),
    ("spark_state_rocksdb_commit_compact_seconds_total", "compact"),
    ("spark_state_rocksdb_commit_write_batch_seconds_total", "write batch"),
    ("spark_state_rocksdb_commit_pause_seconds_total", "pause"),
)


def build(ctx: Context) -> db.Dashboard:
    p, t = ctx.p, ctx.t
    by_op = p.by("query, operator")
    rocksdb = p.qo + ', provider="rocksdb"'

    def rocksdb_per_batch(name: str) -> str:
        """Per-batch mean of a RocksDB counter, 0 on RocksDB operators that have not reported it yet."""
        return p.or_zero(p.per_batch(name), matchers=rocksdb)

    hits = p.rate("spark_state_rocksdb_block_cache_hits_total", p.operator, p.qo)
    misses = p.rate("spark_state_rocksdb_block_cache_misses_total", p.operator, p.qo)
    memory_steps = [(None, OK), (t.state_memory_budget_ratio * t.state_memory_budget_bytes, WARN), (t.state_memory_budget_bytes, BAD)]
    return (
        dashboard(ctx, "store", "Spark state / State store & RocksDB",
                  "State stores per operator: memory and pinned blocks, block cache, commit latency, compaction, write stalls, SST size, snapshot lag.")
        .with_row(row("Memory and disk"))
        .with_panel(ts(ctx, "State memory", "Memory of the operator's state stores, summed over partitions. Bad: near the RocksDB bound (boundedMemoryUsage) or the executor memory.",
                       [(f"sum by ({by_op}) ({p.sel('spark_state_memory_used_bytes', p.qo)})", "{{query}} / {{operator}}")],
                       "bytes", memory_steps, span=8, show_thresholds=True))
        .with_panel(ts(ctx, "RocksDB pinned blocks memory", "Block-cache memory pinned by iterators and index/filter blocks. Bad: a large share of the bound, or growing (open iterators, oversized indexes).",
                       [(f"sum by ({by_op}) ({p.sel('spark_state_rocksdb_pinned_blocks_memory_bytes', p.qo)})", "{{query}} / {{operator}}")],
                       "bytes", [(None, OK)], span=8))
        .with_panel(ts(ctx, "RocksDB SST size on local disk", "Live SST files on the executors' local disks, summed over partitions. Bad: close to the local disk size, or growing without bound.",
                       [(f"sum by ({by_op}) ({p.sel('spark_state_rocksdb_sst_size_bytes', p.qo)})", "{{query}} / {{operator}}")],
                       "bytes", [(None, OK)], span=8))
        .with_panel(ts(ctx, "Block cache hit ratio", "Share of RocksDB reads served by the block cache. Bad: below ~80% (reads go to disk; raise the cache or memory bound).",
                       [(f"{hits} / ({hits} + ({misses} or {hits} * 0))", "{{query}} / {{operator}}"),
                        (f"max by ({by_op}) (operator:spark_state_rocksdb_block_cache_hit_ratio:rate5m{{{p.qo}}})", "{{query}} / {{operator}} (5m, recorded)")],
                       "percentunit", [(None, BAD), (0.5, WARN), (0.8, OK)], span=12, show_thresholds=True))
        .with_panel(ts(ctx, "HDFS-backed store: current version size and cache misses", "HDFS provider only: size of the current state version, and versions rebuilt from files (a restore). Bad: cache misses rising within a run.",
                       [(f"sum by ({by_op}) ({p.sel('spark_state_hdfs_current_version_size_bytes', p.qo)})", "{{query}} / {{operator}} current version"),
                        (f"sum by ({by_op}) ({p.sel('spark_state_hdfs_loaded_map_cache_misses', p.qo)})", "{{query}} / {{operator}} cache misses")],
                       "bytes", [(None, OK)], span=12))
        .with_row(row("Commit"))
        .with_panel(ts(ctx, "RocksDB commit latency breakdown (per batch)", "Mean commit time per batch by step, summed over tasks, stacked (0: not reported by this Spark version or config). Bad: file sync / zip upload dominating (slow checkpoint storage), flush or compact rising.",
                       [(rocksdb_per_batch(name), "{{query}} / {{operator}} " + label) for name, label in COMMIT_PARTS],
                       "s", [(None, OK)], stack=True))
        .with_panel(ts(ctx, "Commit time per store instance", "Mean state-store commit time per store instance and batch (all providers). Bad: above the alert level; batches wait on commits.",
                       [(f"max by ({by_op}) (operator:spark_state_commit_seconds:per_instance_mean5m{{{p.qo}}})", "{{query}} / {{operator}}"),
                        (f"{p.per_batch('spark_state_commit_seconds_total')} / on ({p.operator}) max by ({p.operator}) ({p.sel('spark_state_store_instances', p.qo)})",
                         "{{query}} / {{operator}} (now)")],
                       "s", [(None, OK), (t.commit_seconds_per_instance / 2, WARN), (t.commit_seconds_per_instance, BAD)], show_thresholds=True))
        .with_row(row("Compaction and write stalls"))
        .with_panel(ts(ctx, "Compaction time per batch", "RocksDB compaction time per batch, background included. Bad: rising with write stalls (compaction cannot keep up).",
                       [(rocksdb_per_batch("spark_state_rocksdb_compaction_seconds_total"), "{{query}} / {{operator}}")],
                       "s", [(None, OK)], span=8))
        .with_panel(ts(ctx, "Compaction bytes per batch", "Bytes read and written by compaction per batch. Bad: written far above the state's size (write amplification).",
                       [(rocksdb_per_batch("spark_state_rocksdb_compaction_read_bytes_total"), "{{query}} / {{operator}} read"),
                        (rocksdb_per_batch("spark_state_rocksdb_compaction_written_bytes_total"), "{{query}} / {{operator}} written")],
                       "bytes", [(None, OK)], span=8))
        .with_panel(ts(ctx, "Write stalls per batch", "Time RocksDB writers waited for flush or compaction per batch (Spark's unit is suspect: compare relative values). Bad: anything above 0 for long.",
                       [(rocksdb_per_batch("spark_state_rocksdb_write_stall_seconds_total"), "{{query}} / {{operator}}")],
                       "s", [(None, OK), (t.write_stall_seconds_per_batch + 0.001, BAD)], span=8, show_thresholds=True))
        .with_panel(ts(ctx, "Bytes written and flushed per batch", "Bytes written by puts/deletes and by memtable flushes per batch. Bad: rising much faster than the input rows.",
                       [(rocksdb_per_batch("spark_state_rocksdb_written_bytes_total"), "{{query}} / {{operator}} written"),
                        (rocksdb_per_batch("spark_state_rocksdb_flush_written_bytes_total"), "{{query}} / {{operator}} flushed")],
                       "bytes", [(None, OK)]))
        .with_panel(ts(ctx, "Gets and puts per batch", "RocksDB get and put calls per batch. Bad: gets far above the input rows (a join or dedup scanning state).",
                       [(rocksdb_per_batch("spark_state_rocksdb_gets_total"), "{{query}} / {{operator}} gets"),
                        (rocksdb_per_batch("spark_state_rocksdb_puts_total"), "{{query}} / {{operator}} puts")],
                       "short", [(None, OK)]))
        .with_row(row("Snapshots"))
        .with_panel(ts(ctx, "Snapshot lag per partition", "Batches since each store instance last uploaded a snapshot (the most lagging partitions): about the changelog files a restart replays. Bad: far above minDeltasForSnapshot and growing (maintenance cannot keep up).",
                       [(f"max by ({p.by('query, operator, partition, store')}) ({p.sel('spark_state_snapshot_lag_batches', p.qo)})", "{{query}} / {{operator}} p{{partition}} {{store}}")],
                       "short", [(None, OK), (t.snapshot_lag_batches / 2, WARN), (t.snapshot_lag_batches, BAD)], show_thresholds=True))
        .with_panel(ts(ctx, "Store instances without a snapshot", "Store instances that have not uploaded a snapshot in this run, and stores forced to snapshot because their upload lagged. Bad: staying above 0 long after a start.",
                       [(f"sum by ({by_op}) ({p.sel('spark_state_snapshot_instances_without_upload', p.qo)})", "{{query}} / {{operator}} without upload"),
                        (rocksdb_per_batch("spark_state_rocksdb_forced_snapshots_total"), "{{query}} / {{operator}} forced per batch")],
                       "short", [(None, OK), (1, WARN)]))
    )
