"""Normalized listener events, the same across Spark 3.5, 4.0 and 4.1+ (``spark_state_observer.model.parse`` builds them).

Frozen dataclasses: the worker, the tracker, the signals and every sink share them without copying.
``assemble`` builds one without its ``__init__``, for the decoder's hot path.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from itertools import repeat
from typing import Any, Mapping, TypeVar

from spark_state_observer.model import kinds
from spark_state_observer.model.fields import HDFS_CACHE_MISSES, HDFS_CURRENT_VERSION_SIZE, ROCKSDB_PREFIX


@dataclass(frozen=True)
class InstanceMetric:
    """One per-store-instance metric (4.1+), e.g. ``SnapshotLastUploaded.partition_3_default``."""

    prefix: str
    partition: int
    store: str
    value: float | None  # None where Spark sent its -1 sentinel ("nothing yet")


@dataclass(frozen=True)
class OperatorProgress:
    index: int
    name: str
    rows_total: float | None
    rows_updated: float | None
    rows_removed: float | None
    updates_ms: float | None
    removals_ms: float | None
    commit_ms: float | None
    memory_bytes: float | None
    rows_dropped_by_watermark: float | None
    shuffle_partitions: float | None
    store_instances: float | None
    custom: Mapping[str, float]
    instances: tuple[InstanceMetric, ...]

    @cached_property
    def provider(self) -> str:
        """State store provider as told by its metric names: rocksdb, hdfs or unknown.

        Read of every operator of every batch by several consumers (the capacity rule, placement, the
        exporters, the history): found once per operator, on first read, from names that do not change (the
        model is frozen; ``custom`` is no one's to change). Kept in the instance's ``__dict__``, beside the
        fields: equality, hashing, ``repr`` and ``dataclasses.replace`` read the fields only.
        """
        if any(map(str.startswith, self.custom, repeat(ROCKSDB_PREFIX))):  # C loops: read for every operator and batch
            return "rocksdb"
        if HDFS_CACHE_MISSES in self.custom or HDFS_CURRENT_VERSION_SIZE in self.custom:
            return "hdfs"
        return "unknown"


@dataclass(frozen=True)
class SourceProgress:
    index: int
    description: str
    input_rows: float | None
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class SinkProgress:
    description: str
    output_rows: float | None  # None for DSv1 sinks, which report -1
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class QueryStarted:
    query_id: str
    run_id: str
    name: str | None
    timestamp: float | None
    job_tags: tuple[str, ...] = ()
    kind: str = kinds.STARTED


@dataclass(frozen=True)
class QueryProgress:
    query_id: str
    run_id: str
    name: str | None
    timestamp: float | None
    batch_id: int
    batch_duration_ms: float | None
    input_rows: float | None
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    duration_ms: Mapping[str, float]
    event_time: Mapping[str, float]
    operators: tuple[OperatorProgress, ...]
    sources: tuple[SourceProgress, ...]
    sink: SinkProgress | None
    problems: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    raw_text: str | None = field(default=None, repr=False, compare=False)  # Spark's JSON as received, when it came as text
    kind: str = kinds.PROGRESS

    @property
    def watermark(self) -> float | None:
        return self.event_time.get("watermark")


@dataclass(frozen=True)
class QueryIdle:
    query_id: str
    run_id: str
    timestamp: float | None
    kind: str = kinds.IDLE


@dataclass(frozen=True)
class QueryTerminated:
    query_id: str
    run_id: str
    exception: str | None
    error_class: str | None
    kind: str = kinds.TERMINATED
    # not Spark's event: the run was still open when its application ended (``kinds.APPLICATION_END``), with this
    # exit code (None: not logged, Spark before 4.0)
    with_application: bool = False
    exit_code: int | None = None


Event = QueryStarted | QueryProgress | QueryIdle | QueryTerminated


_T = TypeVar("_T")
_FIELD_COUNTS: dict[type, int] = {}
_new = object.__new__
_set = object.__setattr__


def assemble(cls: type[_T], state: dict[str, Any]) -> _T:
    """An instance of one of this module's frozen dataclasses with ``state`` as its fields (every one, defaults
    included): the same instance as ``cls(**state)`` (equal, frozen, hashable alike) without the ``object.__setattr__``
    per field that a frozen ``__init__`` makes: 0.6 against 2.1 µs for a ``QueryProgress``, ~5 µs an event with two
    operators. ``state`` becomes the instance's ``__dict__``: pass a fresh dict. No validation runs (these
    dataclasses have no ``__post_init__``); a wrong number of fields is a ``TypeError``, and
    tests/unit/test_decode.py compares what ``spark_state_observer.model.decode`` assembles with the reference parser's
    ``__init__``-built events, field by field, on every recorded event.
    """
    count = _FIELD_COUNTS.get(cls)
    if count is None:
        count = _FIELD_COUNTS[cls] = len(fields(cls))  # type: ignore[arg-type]
    if len(state) != count:
        raise TypeError(f"{cls.__name__} has {count} fields, got {sorted(state)}")
    obj = _new(cls)
    _set(obj, "__dict__", state)
    return obj
