"""State store & RocksDB: memory, cache, commit latency, compaction, write stalls, disk and snapshot lag."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from alerts.config import THRESHOLDS as T
from dashboards.panels import dashboard, row, ts
from dashboards.promql import OPERATOR, QO, or_zero, per_batch, rate, sel

OK, WARN, BAD = "green", "orange", "red"
BY_OP = "query, operator"
ROCKSDB = QO + ', provider="rocksdb"'
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


def _rocksdb_per_batch(name: str) -> str:
    """Per-batch mean of a RocksDB counter, 0 on RocksDB operators that have not reported it yet."""
    return or_zero(per_batch(name), matchers=ROCKSDB)


def build() -> db.Dashboard:
    hits = rate("spark_state_rocksdb_block_cache_hits_total", OPERATOR, QO)
    misses = rate("spark_state_rocksdb_block_cache_misses_total", OPERATOR, QO)
    return (
        dashboard("spark-state-store", "Spark state / State store & RocksDB",
                  "State stores per operator: memory and pinned blocks, block cache, commit latency, compaction, write stalls, SST size, snapshot lag.")
        .with_row(row("Memory and disk"))
        .with_panel(ts("State memory", "Memory of the operator's state stores, summed over partitions. Bad: near the RocksDB bound (boundedMemoryUsage) or the executor memory.",
                       [(f"sum by ({BY_OP}) ({sel('spark_state_memory_used_bytes', QO)})", "{{query}} / {{operator}}")],
                       "bytes", [(None, OK), (T["state_memory_budget_ratio"] * T["state_memory_budget_bytes"], WARN), (T["state_memory_budget_bytes"], BAD)],
                       span=8, show_thresholds=True))
        .with_panel(ts("RocksDB pinned blocks memory", "Block-cache memory pinned by iterators and index/filter blocks. Bad: a large share of the bound, or growing (open iterators, oversized indexes).",
                       [(f"sum by ({BY_OP}) ({sel('spark_state_rocksdb_pinned_blocks_memory_bytes', QO)})", "{{query}} / {{operator}}")],
                       "bytes", [(None, OK)], span=8))
        .with_panel(ts("RocksDB SST size on local disk", "Live SST files on the executors' local disks, summed over partitions. Bad: close to the local disk size, or growing without bound.",
                       [(f"sum by ({BY_OP}) ({sel('spark_state_rocksdb_sst_size_bytes', QO)})", "{{query}} / {{operator}}")],
                       "bytes", [(None, OK)], span=8))
        .with_panel(ts("Block cache hit ratio", "Share of RocksDB reads served by the block cache. Bad: below ~80% (reads go to disk; raise the cache or memory bound).",
                       [(f"{hits} / ({hits} + ({misses} or {hits} * 0))", "{{query}} / {{operator}}"),
                        (f"max by ({BY_OP}) (operator:spark_state_rocksdb_block_cache_hit_ratio:rate5m{{{QO}}})", "{{query}} / {{operator}} (5m, recorded)")],
                       "percentunit", [(None, BAD), (0.5, WARN), (0.8, OK)], span=12, show_thresholds=True))
        .with_panel(ts("HDFS-backed store: current version size and cache misses", "HDFS provider only: size of the current state version, and versions rebuilt from files (a restore). Bad: cache misses rising within a run.",
                       [(f"sum by ({BY_OP}) ({sel('spark_state_hdfs_current_version_size_bytes', QO)})", "{{query}} / {{operator}} current version"),
                        (f"sum by ({BY_OP}) ({sel('spark_state_hdfs_loaded_map_cache_misses', QO)})", "{{query}} / {{operator}} cache misses")],
                       "bytes", [(None, OK)], span=12))
        .with_row(row("Commit"))
        .with_panel(ts("RocksDB commit latency breakdown (per batch)", "Mean commit time per batch by step, summed over tasks, stacked (0: not reported by this Spark version or config). Bad: file sync / zip upload dominating (slow checkpoint storage), flush or compact rising.",
                       [(_rocksdb_per_batch(name), "{{query}} / {{operator}} " + label) for name, label in COMMIT_PARTS],
                       "s", [(None, OK)], stack=True))
        .with_panel(ts("Commit time per store instance", "Mean state-store commit time per store instance and batch (all providers). Bad: above the alert level; batches wait on commits.",
                       [(f"max by ({BY_OP}) (operator:spark_state_commit_seconds:per_instance_mean5m{{{QO}}})", "{{query}} / {{operator}}"),
                        (f"{per_batch('spark_state_commit_seconds_total')} / on ({OPERATOR}) max by ({OPERATOR}) ({sel('spark_state_store_instances', QO)})", "{{query}} / {{operator}} (now)")],
                       "s", [(None, OK), (T["commit_seconds_per_instance"] / 2, WARN), (T["commit_seconds_per_instance"], BAD)], show_thresholds=True))
        .with_row(row("Compaction and write stalls"))
        .with_panel(ts("Compaction time per batch", "RocksDB compaction time per batch, background included. Bad: rising with write stalls (compaction cannot keep up).",
                       [(_rocksdb_per_batch("spark_state_rocksdb_compaction_seconds_total"), "{{query}} / {{operator}}")],
                       "s", [(None, OK)], span=8))
        .with_panel(ts("Compaction bytes per batch", "Bytes read and written by compaction per batch. Bad: written far above the state's size (write amplification).",
                       [(_rocksdb_per_batch("spark_state_rocksdb_compaction_read_bytes_total"), "{{query}} / {{operator}} read"),
                        (_rocksdb_per_batch("spark_state_rocksdb_compaction_written_bytes_total"), "{{query}} / {{operator}} written")],
                       "bytes", [(None, OK)], span=8))
        .with_panel(ts("Write stalls per batch", "Time RocksDB writers waited for flush or compaction per batch (Spark's unit is suspect: compare relative values). Bad: anything above 0 for long.",
                       [(_rocksdb_per_batch("spark_state_rocksdb_write_stall_seconds_total"), "{{query}} / {{operator}}")],
                       "s", [(None, OK), (T["write_stall_seconds_per_batch"] + 0.001, BAD)], span=8, show_thresholds=True))
        .with_panel(ts("Bytes written and flushed per batch", "Bytes written by puts/deletes and by memtable flushes per batch. Bad: rising much faster than the input rows.",
                       [(_rocksdb_per_batch("spark_state_rocksdb_written_bytes_total"), "{{query}} / {{operator}} written"),
                        (_rocksdb_per_batch("spark_state_rocksdb_flush_written_bytes_total"), "{{query}} / {{operator}} flushed")],
                       "bytes", [(None, OK)]))
        .with_panel(ts("Gets and puts per batch", "RocksDB get and put calls per batch. Bad: gets far above the input rows (a join or dedup scanning state).",
                       [(_rocksdb_per_batch("spark_state_rocksdb_gets_total"), "{{query}} / {{operator}} gets"),
                        (_rocksdb_per_batch("spark_state_rocksdb_puts_total"), "{{query}} / {{operator}} puts")],
                       "short", [(None, OK)]))
        .with_row(row("Snapshots"))
        .with_panel(ts("Snapshot lag per partition", "Batches since each store instance last uploaded a snapshot (the most lagging partitions): about the changelog files a restart replays. Bad: far above minDeltasForSnapshot and growing (maintenance cannot keep up).",
                       [(f"max by (query, operator, partition, store) ({sel('spark_state_snapshot_lag_batches', QO)})", "{{query}} / {{operator}} p{{partition}} {{store}}")],
                       "short", [(None, OK), (T["snapshot_lag_batches"] / 2, WARN), (T["snapshot_lag_batches"], BAD)], show_thresholds=True))
        .with_panel(ts("Store instances without a snapshot", "Store instances that have not uploaded a snapshot in this run, and stores forced to snapshot because their upload lagged. Bad: staying above 0 long after a start.",
                       [(f"sum by ({BY_OP}) ({sel('spark_state_snapshot_instances_without_upload', QO)})", "{{query}} / {{operator}} without upload"),
                        (_rocksdb_per_batch("spark_state_rocksdb_forced_snapshots_total"), "{{query}} / {{operator}} forced per batch")],
                       "short", [(None, OK), (1, WARN)]))
    )
