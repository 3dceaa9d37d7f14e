"""How much memory and disk a query's RocksDB state stores need per executor, from the application's configuration.

A pure estimate, shared by ``spark-state-observer size`` (the what-if), the live per-executor metrics and the
browser. It exists because Spark says nothing about it ahead of time: each RocksDB state store instance keeps
its own memtables, block cache, index and filter blocks outside the JVM heap, so an executor's need grows with
partitions x operators x stores per operator / executors and lands in the container's ``memoryOverhead``, where
nothing in Spark checks it (until the container is killed).

The formula (sources: Spark's ``RocksDBConf`` and ``RocksDB.scala``, ``RocksDBMemoryManager.scala``; RocksDB's
wiki "Memory usage in RocksDB"; Confluent's "RocksDB memory sizing" for Kafka Streams, whose stores are built the
same way):

* per instance, unbounded (each instance its own ``LRUCache`` of ``blockCacheSizeMB`` and its own memtables):
  ``writeBufferSize x maxWriteBufferNumber`` (RocksDB's own 64 MiB and 2 where Spark passes -1)
  ``+ blockCacheSize`` ``+ index and filter blocks`` (outside the cache when unbounded: about 10 bits of bloom
  filter per key and one index entry per ``blockSizeKB`` block of SST data);
* per executor, unbounded: that x the instances the executor holds;
* per executor, bounded (``boundedMemoryUsage=true``): one shared ``LRUCache(maxMemoryUsageMB)`` with a strict
  limit, memtables charged to it through a ``WriteBufferManager(maxMemoryUsageMB x writeBufferCacheRatio)``, index
  and filters cached in it: the executor's total is ``min(unbounded, maxMemoryUsageMB)`` (Spark calls the limit
  soft: blocks pinned by iterators can exceed it);
* the budget: the executor's ``memoryOverhead`` (``spark.executor.memoryOverhead``, else
  ``max(memoryOverheadFactor x spark.executor.memory, spark.executor.minMemoryOverhead)``), the room outside the
  heap where RocksDB's native memory lives. ``spark.memory.offHeap.size`` is Spark's own off-heap pool, not
  RocksDB's (Spark 4.1+ counts RocksDB as unmanaged memory in its memory manager, SPARK-53001, but the container
  still needs the room).

The memtable and block-cache terms are ceilings: a store holding less data than its write buffers or cache uses
less (``expected``: each term capped by the store's SST bytes, the memtable at least one arena block, which a
written memtable allocates at once), which is what the measured table in docs/capacity.md compares against.

Bad input never raises: a value in odd units (``512m`` for a conf Spark reads as plain MB), a negative, zero or
absurd value, or ratios Spark would refuse, are replaced by Spark's default with a note, and the estimate is
marked ``assumed``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from spark_state_observer.model.spark_events import ENVIRONMENT, line_prefix

MIB = 1024 * 1024
ROCKSDB_PREFIX = "spark.sql.streaming.stateStore.rocksdb."
PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# RocksDB's own defaults, used where Spark passes -1 (ColumnFamilyOptions: write_buffer_size, max_write_buffer_number)
ROCKSDB_WRITE_BUFFER_BYTES = 64 * MIB
ROCKSDB_MAX_WRITE_BUFFERS = 2
BLOOM_BITS_PER_KEY = 10  # Spark's RocksDB tables use a 10-bit bloom filter
INDEX_BYTES_PER_BLOCK = 40  # one index entry per data block: a separator key plus offset and size, for keys of ~24 bytes
ARENA_BLOCK_MAX = MIB  # RocksDB caps the default arena block at 1 MiB
LARGEST_SANE_BYTES = 2**50  # a PiB: past that a value is a typo, not a configuration
# a stream-stream join keeps four stores per partition (keyToNumValues and keyWithIndexToValue per side)
STORES_PER_OPERATOR = {"symmetricHashJoin": 4}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b)?\s*$", re.IGNORECASE)
_SIZE_FACTOR = {"": 1, "k": 1024, "m": MIB, "g": 1024 * MIB, "t": 1024**2 * MIB, "p": 1024**3 * MIB}


@dataclasses.dataclass(frozen=True)
class StateConf:
    """The configuration values the estimate needs, resolved (defaults applied, units converted)."""

    provider: str  # "rocksdb" or "hdfs"
    write_buffer_bytes: int
    max_write_buffers: int
    block_cache_bytes: int
    block_bytes: int
    bounded: bool
    max_memory_bytes: int
    write_buffer_cache_ratio: float
    high_priority_pool_ratio: float
    executor_memory_bytes: int
    overhead_bytes: int
    offheap_bytes: int
    shuffle_partitions: int
    notes: tuple[str, ...] = ()

    @property
    def assumed(self) -> bool:
        """Whether a value had to be guessed (a note says which)."""
        return bool(self.notes)


@dataclasses.dataclass(frozen=True)
class Workload:
    """What the state holds: its shape, and (optionally) its size."""

    partitions: int
    operators: int = 1
    stores_per_operator: int = 1
    executors: int = 1
    rows: int | None = None  # state rows over all partitions and operators
    bytes_per_row: float | None = None  # SST bytes per row (key + value + RocksDB's per-entry overhead)
    instances: int | None = None  # store instances as Spark counted them (operators may differ in stores); else the product


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Per instance and per executor, in bytes; ``notes`` say what was assumed or looks wrong."""

    instances: int
    instances_per_executor: int
    instance_ceiling_bytes: int  # full memtables and cache, plus index and filters
    instance_expected_bytes: int  # the same, capped by the data the store holds (when rows are known)
    memory_bytes_per_executor: int  # unbounded: instances x ceiling
    memory_expected_bytes_per_executor: int
    memory_bound_bytes_per_executor: int  # bounded mode's cap, or the unbounded figure when not bounded
    budget_bytes: int  # the executor's memoryOverhead
    sst_bytes: int | None  # over all instances
    sst_bytes_per_executor: int | None
    dfs_bytes: int | None  # the newest version in the checkpoint (lower bound: older versions are retained too)
    bounded: bool
    provider: str
    notes: tuple[str, ...]

    @property
    def assumed(self) -> bool:
        return bool(self.notes)

    @property
    def budget_share(self) -> float | None:
        """The executor's RocksDB memory (bounded figure when bounded) as a share of its budget."""
        held = self.memory_bound_bytes_per_executor if self.bounded else self.memory_bytes_per_executor
        return held / self.budget_bytes if self.budget_bytes > 0 else None


def parse_size(text: str, default_unit: int) -> int | None:
    """Bytes in a Spark size string (``512m``, ``2g``, ``1024``: no suffix means ``default_unit``); None if not one."""
    m = _SIZE.match(text)
    if not m:
        return None
    number, suffix = float(m.group(1)), m.group(2).lower()
    factor = _SIZE_FACTOR[suffix] if suffix or m.group(3) else default_unit
    value = number * factor
    return int(value) if math.isfinite(value) else None


class _Reader:
    """Reads one conf value at a time, keeping a note for each value it had to replace."""

    def __init__(self, conf: Mapping[str, str]) -> None:
        self.conf = {str(k): str(v) for k, v in conf.items()}
        self.notes: list[str] = []

    def mb(self, key: str, default: int, minus_one_means: int | None = None, allow_zero: bool = False) -> int:
        """A conf Spark reads as a plain number of MB (``RocksDBConf``), in bytes; -1 (or less) means RocksDB's own default."""
        fallback = minus_one_means if default <= 0 and minus_one_means is not None else default * MIB
        text = self.conf.get(key)
        if text is None:
            return fallback
        stripped = text.strip()
        if stripped == "-1" and minus_one_means is not None:
            return minus_one_means
        if re.fullmatch(r"-?\d+", stripped):
            value = int(stripped)
            if value > 0 or (allow_zero and value == 0):
                return self._sane(key, text, value * MIB, fallback)
            why = "leaves RocksDB's default" if minus_one_means is not None else "is not a positive number of MB"
            return self._replace(key, text, fallback, why)
        size = parse_size(stripped, MIB)
        if size is not None:
            self.notes.append(
                f"{key}={text!r}: Spark reads this conf as a plain number of MB and would refuse the unit; read as {size // MIB} MB"
            )
            return self._sane(key, text, size, fallback)
        return self._replace(key, text, fallback, "is not a number")

    def _replace(self, key: str, text: str, fallback: int, why: str) -> int:
        self.notes.append(f"{key}={text!r} {why}; {fallback // MIB} MB assumed")
        return fallback

    def _sane(self, key: str, text: str, value: int, fallback: int) -> int:
        if value > LARGEST_SANE_BYTES:
            self.notes.append(f"{key}={text!r} is absurd (over a PiB); {fallback // MIB} MB assumed")
            return fallback
        return value

    def count(self, key: str, default: int, minus_one_means: int | None = None) -> int:
        text = self.conf.get(key)
        if text is None:
            return default if default > 0 or minus_one_means is None else minus_one_means
        stripped = text.strip()
        if stripped == "-1" and minus_one_means is not None:
            return minus_one_means
        if re.fullmatch(r"\d+", stripped) and 0 < int(stripped) <= 1_000_000:
            return int(stripped)
        fallback = default if default > 0 else (minus_one_means or 1)
        self.notes.append(f"{key}={text!r} is not a sensible positive count; {fallback} assumed")
        return fallback

    def ratio(self, key: str, default: float) -> float:
        return self._float(key, default, lambda v: 0.0 <= v < 1.0, "a ratio in [0, 1)")

    def flag(self, key: str, default: bool) -> bool:
        text = self.conf.get(key)
        if text is None:
            return default
        if text.strip().lower() in ("true", "false"):
            return text.strip().lower() == "true"
        self.notes.append(f"{key}={text!r} is not true or false; {str(default).lower()} assumed")
        return default

    def size(self, key: str, default_unit: int) -> int | None:
        """A Spark size conf (``spark.executor.memory`` style); None when unset or unreadable (noted)."""
        text = self.conf.get(key)
        if text is None:
            return None
        value = parse_size(text, default_unit)
        if value is None or value <= 0 or value > LARGEST_SANE_BYTES:
            self.notes.append(f"{key}={text!r} is not a size Spark accepts; ignored")
            return None
        return value

    def factor(self, key: str, default: float) -> float:
        return self._float(key, default, lambda v: 0.0 < v <= 100.0, "a positive factor")

    def _float(self, key: str, default: float, sensible: Callable[[float], bool], what: str) -> float:
        """``key`` as a number ``sensible`` accepts; else ``default``, with a note saying what was expected."""
        text = self.conf.get(key)
        if text is None:
            return default
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if sensible(value):
            return value
        self.notes.append(f"{key}={text!r} is not {what}; {default} assumed")
        return default


def read_conf(conf: Mapping[str, str]) -> StateConf:
    """The estimate's inputs from a Spark configuration (``spark.conf``, ``SparkListenerEnvironmentUpdate``, ``--conf``)."""
    r = _Reader(conf)
    provider = "rocksdb" if "RocksDB" in r.conf.get(PROVIDER_CONF, "") else "hdfs"
    write_buffer = r.mb(ROCKSDB_PREFIX + "writeBufferSizeMB", -1, minus_one_means=ROCKSDB_WRITE_BUFFER_BYTES)
    buffers = r.count(ROCKSDB_PREFIX + "maxWriteBufferNumber", -1, minus_one_means=ROCKSDB_MAX_WRITE_BUFFERS)
    cache = r.mb(ROCKSDB_PREFIX + "blockCacheSizeMB", 8, allow_zero=True)
    block_kb = r.count(ROCKSDB_PREFIX + "blockSizeKB", 4)
    bounded = r.flag(ROCKSDB_PREFIX + "boundedMemoryUsage", False)
    max_memory = r.mb(ROCKSDB_PREFIX + "maxMemoryUsageMB", 500)
    wb_ratio = r.ratio(ROCKSDB_PREFIX + "writeBufferCacheRatio", 0.5)
    hp_ratio = r.ratio(ROCKSDB_PREFIX + "highPriorityPoolRatio", 0.1)
    if bounded and wb_ratio + hp_ratio >= 1.0:
        r.notes.append(
            f"writeBufferCacheRatio {wb_ratio} + highPriorityPoolRatio {hp_ratio} >= 1: Spark refuses to open a bounded store "
            "(RocksDBMemoryManager); the defaults 0.5 and 0.1 assumed"
        )
        wb_ratio, hp_ratio = 0.5, 0.1
    executor_memory = r.size("spark.executor.memory", MIB) or 1024 * MIB
    overhead = r.size("spark.executor.memoryOverhead", MIB)
    if overhead is None:
        minimum = r.size("spark.executor.minMemoryOverhead", MIB) or 384 * MIB
        overhead = max(int(r.factor("spark.executor.memoryOverheadFactor", 0.1) * executor_memory), minimum)
    offheap = 0
    if r.flag("spark.memory.offHeap.enabled", False):
        offheap = r.size("spark.memory.offHeap.size", 1) or 0
    partitions = r.count("spark.sql.shuffle.partitions", 200)
    if provider == "hdfs" and PROVIDER_CONF in r.conf:
        r.notes.append("the state store provider is not RocksDB: its state lives on the JVM heap and this estimate does not apply")
    return StateConf(
        provider=provider,
        write_buffer_bytes=write_buffer,
        max_write_buffers=buffers,
        block_cache_bytes=cache,
        block_bytes=block_kb * 1024,
        bounded=bounded,
        max_memory_bytes=max_memory,
        write_buffer_cache_ratio=wb_ratio,
        high_priority_pool_ratio=hp_ratio,
        executor_memory_bytes=executor_memory,
        overhead_bytes=overhead,
        offheap_bytes=offheap,
        shuffle_partitions=partitions,
        notes=tuple(r.notes),
    )


def estimate(conf: StateConf, workload: Workload) -> Estimate:
    """Memory per instance and per executor, SST and DFS bytes, against the executor's budget."""
    notes = list(conf.notes)
    partitions, operators = max(workload.partitions, 0), max(workload.operators, 0)
    stores, executors = max(workload.stores_per_operator, 1), workload.executors
    if executors < 1:
        notes.append(f"{executors} executors: 1 assumed")
        executors = 1
    instances = workload.instances if workload.instances is not None and workload.instances >= 0 else partitions * operators * stores
    per_executor = math.ceil(instances / executors) if instances else 0
    rows = workload.rows if workload.rows is not None and workload.rows >= 0 else None
    bytes_per_row = workload.bytes_per_row if workload.bytes_per_row is not None and workload.bytes_per_row >= 0 else None
    if (workload.rows is not None and rows is None) or (workload.bytes_per_row is not None and bytes_per_row is None):
        notes.append("negative rows or bytes per row ignored")
    sst = int(rows * bytes_per_row) if rows is not None and bytes_per_row is not None else None
    rows_per_instance = rows / instances if rows is not None and instances else None
    sst_per_instance = sst / instances if sst is not None and instances else None
    ceiling, expected = instance_bytes(conf, rows_per_instance, sst_per_instance)
    unbounded = per_executor * ceiling
    expected_executor = per_executor * expected
    bound = bounded_bytes(conf, unbounded)
    if conf.bounded and conf.max_memory_bytes > conf.overhead_bytes:
        notes.append(
            f"the bounded limit ({conf.max_memory_bytes // MIB} MB) is above the executor's memoryOverhead "
            f"({conf.overhead_bytes // MIB} MB): the container can run out of room before RocksDB is held back"
        )
    return Estimate(
        instances=instances,
        instances_per_executor=per_executor,
        instance_ceiling_bytes=ceiling,
        instance_expected_bytes=expected,
        memory_bytes_per_executor=unbounded,
        memory_expected_bytes_per_executor=expected_executor,
        memory_bound_bytes_per_executor=bound,
        budget_bytes=conf.overhead_bytes,
        sst_bytes=sst,
        sst_bytes_per_executor=math.ceil(sst / executors) if sst is not None else None,
        dfs_bytes=sst,
        bounded=conf.bounded,
        provider=conf.provider,
        notes=tuple(notes),
    )


def instance_bytes(conf: StateConf, rows: float | None, sst_bytes: float | None) -> tuple[int, int]:
    """One store instance's memory: its ceiling (full write buffers and cache) and what a store holding ``rows`` rows in
    ``sst_bytes`` of SST files is expected to use (the write buffer and cache terms capped by its data)."""
    memtables = conf.write_buffer_bytes * conf.max_write_buffers
    index_filter = 0
    if rows is not None:
        index_filter += int(rows * BLOOM_BITS_PER_KEY / 8)
    if sst_bytes is not None:
        index_filter += int(sst_bytes / conf.block_bytes * INDEX_BYTES_PER_BLOCK)
    ceiling = memtables + conf.block_cache_bytes + index_filter
    if sst_bytes is None:
        return ceiling, ceiling
    memtable = max(min(memtables, sst_bytes), arena_block_bytes(conf))  # a written memtable holds at least one arena block
    return ceiling, int(memtable + min(conf.block_cache_bytes, sst_bytes)) + index_filter


def arena_block_bytes(conf: StateConf) -> int:
    """RocksDB's ``arena_block_size`` default: an eighth of the write buffer, at most 1 MiB; a memtable allocates in these."""
    return min(conf.write_buffer_bytes // 8, ARENA_BLOCK_MAX)


def bounded_bytes(conf: StateConf, executor_bytes: int) -> int:
    """An executor's RocksDB memory under ``boundedMemoryUsage`` (the shared cache's limit), or as is."""
    return min(executor_bytes, conf.max_memory_bytes) if conf.bounded else executor_bytes


def stores_per_operator(operator_name: str) -> int:
    """State stores each partition of an operator opens (a stream-stream join opens four)."""
    return STORES_PER_OPERATOR.get(operator_name, 1)


CONF_PREFIXES = (
    "spark.sql.streaming.stateStore.",
    "spark.executor.memory",  # also memoryOverhead and memoryOverheadFactor
    "spark.executor.minMemoryOverhead",
    "spark.memory.offHeap.",
    "spark.sql.shuffle.partitions",
)
SESSION_KEYS = (
    PROVIDER_CONF,
    *(
        ROCKSDB_PREFIX + k
        for k in (
            "writeBufferSizeMB",
            "maxWriteBufferNumber",
            "blockCacheSizeMB",
            "blockSizeKB",
            "boundedMemoryUsage",
            "maxMemoryUsageMB",
            "writeBufferCacheRatio",
            "highPriorityPoolRatio",
            "changelogCheckpointing.enabled",
        )
    ),
    "spark.sql.streaming.stateStore.minDeltasForSnapshot",
    "spark.sql.streaming.stateStore.maintenanceInterval",  # the normal snapshot lag (spark_state_observer.signals.snapshots)
    "spark.sql.shuffle.partitions",
)
"""The SQL confs the estimate reads, asked of a session one by one (``spark.conf``; a session has no list of them)."""
MAX_CONF_VALUE = 200  # characters kept of a value: a conf the estimate reads is short


def relevant(conf: Mapping[str, object]) -> dict[str, str]:
    """The entries of a Spark configuration the estimate reads (an application's conf holds hundreds, some secret)."""
    return {str(k): str(v)[:MAX_CONF_VALUE] for k, v in conf.items() if str(k).startswith(CONF_PREFIXES)}


ENVIRONMENT_PREFIX = line_prefix(ENVIRONMENT)


def spark_properties(event: Any) -> dict[str, str]:
    """``Spark Properties`` of a ``SparkListenerEnvironmentUpdate`` (an object; older logs: a list of pairs)."""
    props = event.get("Spark Properties") if isinstance(event, Mapping) else None
    if isinstance(props, dict):
        return {str(k): str(v) for k, v in props.items()}
    if isinstance(props, list):
        return {str(p[0]): str(p[1]) for p in props if isinstance(p, list) and len(p) == 2}
    return {}
