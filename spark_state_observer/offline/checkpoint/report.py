"""The checkpoint inspector's report: what a checkpoint holds and what a restore would cost, as data.

Built by ``spark_state_observer.offline.checkpoint.layout`` (the scan) and ``.restore`` (the work and the estimate);
printed by ``.render`` or as JSON; shown by the browser.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


class CheckpointError(ValueError):
    """The path is not a readable streaming checkpoint; the message says what is missing."""


@dataclass
class StateFile:
    version: int
    kind: str  # delta, snapshot (HDFS) / zip, changelog (RocksDB)
    size: int
    unique_id: str | None = None


@dataclass
class RestoreWork:
    target_version: int
    snapshot_version: int | None
    snapshot_bytes: int
    replay_files: int
    replay_bytes: int
    missing_files: int = 0

    @property
    def bytes(self) -> int:
        return self.snapshot_bytes + self.replay_bytes


@dataclass
class PartitionState:
    partition: int
    store: str
    provider: str
    files: list[StateFile]
    sst_files: int = 0
    sst_bytes: int = 0
    newest_snapshot: int | None = None
    latest_version: int | None = None
    restore: RestoreWork | None = None


@dataclass
class OperatorState:
    operator_id: int
    name: str | None
    stores: list[str]
    num_partitions: int | None
    partitions: list[PartitionState] = field(default_factory=list)


@dataclass
class RestoreEstimate:
    stores: int
    files: int
    bytes: int
    seconds: float
    basis: str  # "history" or "defaults"
    slowest_partition: str | None
    skew: float | None  # slowest partition's work over the median partition's
    measured_restores: int = 0  # restores of the query Spark measured, whose rate refined the defaults (basis "history")

    def described(self) -> str:
        """Which estimate this is, for a page that shows it: the inspector's at its default rates, or that
        estimate refined by the restores the history measured (one estimate per checkpoint, said which)."""
        if self.basis == "history":
            many = "a restore" if self.measured_restores == 1 else f"{self.measured_restores or 'the'} restores"
            return f"the inspector's estimate, refined by the history: its rate per store from {many} Spark measured for this query"
        return "the inspector's estimate at its default rates: the history holds no restore of this query that Spark measured"


@dataclass
class CheckpointReport:
    path: str
    query_id: str | None
    last_planned_batch: int | None
    last_committed_batch: int | None
    uncommitted_batch: int | None
    batch_watermark_ms: int | None
    batch_timestamp_ms: int | None
    provider: str | None
    shuffle_partitions: int | None
    sources: list[str]
    operators: list[OperatorState]
    estimate: RestoreEstimate | None
    problems: list[str]
    footprint: list[Any] = field(default_factory=list)  # per operator: ``spark_state_observer.offline.checkpoint.footprint.Footprint``
    checkpoint_format_version: int | None = None  # 1 or 2, from the commit log's first line; None without commits
    checksums: Any = None  # ``spark_state_observer.offline.checkpoint.checksums.ChecksumReport`` when verified (``--verify-checksums``)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str)
