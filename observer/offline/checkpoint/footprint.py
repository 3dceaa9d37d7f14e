"""What each operator's state takes in the checkpoint's storage: snapshots, changelogs, SSTs, retained versions.

A checkpoint's state grows with versions Spark keeps (``spark.sql.streaming.minBatchesToRetain``, 100) until
maintenance deletes the older ones: per partition, snapshots (HDFS ``.snapshot``, RocksDB ``.zip`` and the SSTs
they list), the delta or changelog files, and among those the ones after the newest snapshot, which a restore
replays. Summed per operator from the inspector's scan (``observer.offline.checkpoint.layout``), so the DFS
bytes a query needs are a reading, not a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from observer.offline.checkpoint.report import CheckpointReport

SNAPSHOT_KINDS = ("snapshot", "zip")
REPLAY_KINDS = ("delta", "changelog")


@dataclass
class Footprint:
    """One operator's state in the checkpoint, in bytes and files, over its partitions and stores."""

    operator_id: int
    name: str | None
    stores: int  # partition x store folders
    snapshot_files: int
    snapshot_bytes: int  # .snapshot / .zip files
    sst_files: int
    sst_bytes: int  # RocksDB SSTs/ (shared by the versions whose zips list them)
    replay_files: int
    replay_bytes: int  # every .delta / .changelog file kept
    since_snapshot_files: int  # those after each store's newest snapshot: what a restore replays
    since_snapshot_bytes: int
    retained_versions: int  # most versions any store keeps

    @property
    def total_bytes(self) -> int:
        return self.snapshot_bytes + self.sst_bytes + self.replay_bytes


def footprints(report: CheckpointReport) -> list[Footprint]:
    """Per operator, what its state files take (state files only: checksums and metadata are not counted)."""
    out = []
    for op in report.operators:
        fp = Footprint(op.operator_id, op.name, len(op.partitions), 0, 0, 0, 0, 0, 0, 0, 0, 0)
        for p in op.partitions:
            newest = p.newest_snapshot or 0
            versions = set()
            for f in p.files:
                versions.add(f.version)
                if f.kind in SNAPSHOT_KINDS:
                    fp.snapshot_files += 1
                    fp.snapshot_bytes += f.size
                elif f.kind in REPLAY_KINDS:
                    fp.replay_files += 1
                    fp.replay_bytes += f.size
                    if f.version > newest:
                        fp.since_snapshot_files += 1
                        fp.since_snapshot_bytes += f.size
            fp.sst_files += p.sst_files
            fp.sst_bytes += p.sst_bytes
            fp.retained_versions = max(fp.retained_versions, len(versions))
        out.append(fp)
    return out


def render_footprints(items: list[Footprint]) -> list[str]:
    """Lines for the inspector's text report."""
    return [
        f"  footprint of operator {f.operator_id} {f.name or '?'}: {f.total_bytes} B over {f.stores} stores "
        f"(snapshots {f.snapshot_files} files {f.snapshot_bytes} B, SSTs {f.sst_files} files {f.sst_bytes} B, "
        f"deltas/changelogs {f.replay_files} files {f.replay_bytes} B, {f.since_snapshot_files} files {f.since_snapshot_bytes} B "
        f"after the newest snapshots; up to {f.retained_versions} versions kept)"
        for f in items
    ]
