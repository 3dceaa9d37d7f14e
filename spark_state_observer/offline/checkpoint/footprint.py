"""What each operator's state takes in the checkpoint's storage: snapshots, changelogs, SSTs, retained versions.

A checkpoint's state grows with versions Spark keeps (``spark.sql.streaming.minBatchesToRetain``, 100) until
maintenance deletes the older ones: per partition, snapshots (HDFS ``.snapshot``, RocksDB ``.zip`` and the SSTs
they list), the delta or changelog files, and among those the ones after the newest snapshot, which a restore
replays. Summed per operator from the inspector's scan (``spark_state_observer.offline.checkpoint.layout``), so the DFS
bytes a query needs are a reading, not a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_state_observer.model.bounded import stored_json
from spark_state_observer.offline.checkpoint.report import CheckpointReport

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


@dataclass
class DiskForecast:
    """When the state's footprint reaches a budget, at the growth of the SST bytes the history recorded."""

    budget_bytes: int
    footprint_bytes: int
    growth_bytes_per_hour: float | None  # least squares over the recorded batches; None: too few points
    eta_seconds: float | None  # None: not growing (or unknown); 0: already over the budget
    batches: int
    message: str


MAX_FORECAST_BATCHES = 500  # the newest batches read (each row holds a progress document)


def disk_forecast(report: CheckpointReport, history_path: str, budget_bytes: int) -> DiskForecast:
    """Forecast from the query's ``rocksdbSstFileSize`` over time (its state's live size, which the checkpoint's
    SSTs follow); raises ``HistoryError`` when the history cannot be read."""
    from contextlib import closing

    from spark_state_observer.history.backend import open_backend

    footprint = sum(f.total_bytes for f in report.footprint)
    points: list[tuple[float, float]] = []
    if report.query_id:
        with closing(open_backend(history_path, readonly=True)) as backend:
            _, rows = backend.rows(
                "SELECT ts, progress FROM batches WHERE query_id = ? ORDER BY ts DESC LIMIT ?", (report.query_id, MAX_FORECAST_BATCHES)
            )
        for ts, text in rows:
            progress = stored_json(text, None)
            ops = progress.get("stateOperators") if isinstance(progress, dict) else None
            sizes = [
                o["customMetrics"].get("rocksdbSstFileSize")
                for o in ops or []
                if isinstance(o, dict) and isinstance(o.get("customMetrics"), dict)
            ]
            sizes = [s for s in sizes if isinstance(s, (int, float))]
            if sizes and isinstance(ts, (int, float)):
                points.append((float(ts), float(sum(sizes))))
    slope = _slope(points)
    if footprint >= budget_bytes:
        return DiskForecast(budget_bytes, footprint, slope and slope * 3600, 0.0, len(points), "the footprint is over the budget already")
    if slope is None:
        return DiskForecast(
            budget_bytes, footprint, None, None, len(points), "too few batches with SST sizes in the history for a forecast"
        )
    if slope <= 0:
        return DiskForecast(budget_bytes, footprint, slope * 3600, None, len(points), "the state is not growing: no forecast")
    eta = (budget_bytes - footprint) / slope
    return DiskForecast(budget_bytes, footprint, slope * 3600, eta, len(points), f"the budget is reached in about {eta / 3600:.1f} h")


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares growth per second; None for fewer than 3 points or no time spread."""
    if len(points) < 3:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread <= 0:
        return None
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / spread
