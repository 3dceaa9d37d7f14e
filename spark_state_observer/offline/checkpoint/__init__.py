"""Checkpoint inspector: what a streaming checkpoint holds, and how much work a restore would be.

Kafka Streams users read their state directory to understand recovery; this is the same for a Spark
checkpoint: ``layout`` scans it (offsets vs commits, operators and their stores, the state files of
both providers per partition), ``restore`` works out for each partition the snapshot a restart would
load and the files it would replay after it, and the estimate; ``footprint`` sums what each operator's
state takes in the checkpoint's storage; ``checksums`` verifies Spark's checksum files when asked; ``render`` prints the ``report``.
"""

from __future__ import annotations

from spark_state_observer.offline.checkpoint.checksums import ChecksumReport, verify
from spark_state_observer.offline.checkpoint.footprint import footprints
from spark_state_observer.offline.checkpoint.layout import local_path, scan
from spark_state_observer.offline.checkpoint.report import CheckpointReport
from spark_state_observer.offline.checkpoint.restore import estimate_restore


def inspect_checkpoint(path: str, rates: dict[str, float] | None = None) -> CheckpointReport:
    """Read the checkpoint at ``path``; ``rates`` (seconds_per_store, seconds_per_file,
    bytes_per_second) override the estimate's defaults, e.g. from ``restore.rates_from_history``."""
    report = scan(path)
    report.estimate = estimate_restore(report, rates)
    report.footprint = footprints(report)
    return report


def verify_checksums(path: str) -> ChecksumReport:
    """Every Spark checksum file of the checkpoint at ``path`` against its state file (reads them all)."""
    return verify(local_path(path))
