"""Snapshot health of every store instance, and the ``snapshot_lagging`` signal.

A restart replays, per store instance, every changelog (or delta) file written since that instance's last
uploaded snapshot. Spark 4.1+ reports ``SnapshotLastUploaded.partition_<p>_<store>`` for only the few most
lagging instances (``numStateStoreInstanceMetricsToReport``, 5), and -1 for one that never uploaded. What
that tells, and what it does not:

- the most lagging instance is always reported (-1 sorts first), so the largest lag is exact from the
  progress alone: ``batchId + 1 - SnapshotLastUploaded``, or for -1 the versions since the first one;
- an instance left out lags no more than the least lagging reported one; if that one has uploaded, every
  instance left out has uploaded too; if all reported are -1, the ones left out are unknown;
- -1 means "not in this provider instance's life": after a restart it says nothing of the snapshots the
  previous run left, so the lag of a -1 is counted from this run's first batch unless the run starts the
  checkpoint (batch 0), a lower bound either way; a -1 after an upload within the run is a reloaded provider,
  counted from that upload (remembered per instance, bounded).
- except where the restart's own restore tells more: RocksDB with changelog checkpointing loads a restarted
  store from its newest snapshot and replays one changelog per version since, and the first batch reports
  the files replayed (``rocksdbNumReplayChangelogFiles``, summed over the stores loaded from the checkpoint,
  ``rocksdbNumLoadedFromDfs``). Their mean per store, ``k``, puts the snapshot the average store restored from
  at ``batchId - k``, and the -1 instances' lag is counted from there (the most lagging store lags at least
  the mean, so it stays a lower bound). A job that restarts often before any snapshot is uploaded (a job
  scheduled with ``Trigger.AvailableNow``, whose short runs end before maintenance uploads one) replays
  more each time; this sees it from the progress alone. Operators that load their store twice per task (an
  aggregation, a session window) report the cheap second load, no files: counted from the first batch.

Where the checkpoint can be listed (``checkpoint``: query and run id -> a local checkpoint root; the
listener's attach asks the query, the watcher and replay read it from the run's recorded plans), ``spark_state_observer.model.checkpoint_listing`` gives the exact state of
every instance and the files a restore would replay; it is listed at most every ``snapshot_scan_seconds``
per query, on the worker thread.

Without ``SnapshotLastUploaded`` (Spark before 4.1) the listing is the only view, and it ages: maintenance may
have uploaded a snapshot of any version committed since, so an instance's lag is the one its last listing showed
(``_as_listed``), never the versions since then added to it.

Normal is up to ``snapshot_lag_batches`` (covering ``minDeltasForSnapshot``) plus a maintenance interval's
worth of batches (``spark.sql.streaming.stateStore.maintenanceInterval`` over the recent batch period):
maintenance uploads at most once an interval. ``snapshot_lagging`` is raised when an operator's largest lag
goes beyond that, once until it comes back within it.
"""

from __future__ import annotations

import logging
import math
import re
import statistics
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Callable, NamedTuple

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryRecord, operator_labels
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.model.alert_spec import WARNING, AlertSpec
from spark_state_observer.model.checkpoint_listing import MAX_INSTANCES, InstanceSnapshots, Listing, list_snapshots, local_root
from spark_state_observer.model.events import OperatorProgress, QueryProgress
from spark_state_observer.model.fields import ROCKSDB_LOADED_FROM_DFS, ROCKSDB_REPLAY_FILES, SNAPSHOT_LAST_UPLOADED
from spark_state_observer.model.signal_kinds import SNAPSHOT_LAGGING
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts as Facts
from spark_state_observer.signals.rule import Context, Rule

log = logging.getLogger(__name__)

MAINTENANCE_CONF = "spark.sql.streaming.stateStore.maintenanceInterval"
DEFAULT_MAINTENANCE_SECONDS = 60.0
PERIODS_KEPT = 16  # batch periods per query for the median
MAX_PARTITIONS_TOLD = 10  # instances named in a signal, most lagging first
PROGRESS = "progress"
CHECKPOINT = "checkpoint"
CheckpointLocator = Callable[[str, "str | None"], "str | None"]
"""(query id, run id) -> the run's checkpoint location (None when unknown); called on the worker thread."""
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|min|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, None: 0.001, "m": 60.0, "min": 60.0, "h": 3600.0}


def maintenance_seconds(conf: Mapping[str, str]) -> float:
    """Spark's maintenance interval (a time conf: a bare number is milliseconds); its default if unreadable."""
    m = _DURATION.match(str(conf.get(MAINTENANCE_CONF, "")))
    if not m:
        return DEFAULT_MAINTENANCE_SECONDS
    return max(0.001, float(m[1]) * _UNIT_SECONDS[m[2]])


class Instance(NamedTuple):
    """One store instance's snapshot state (a tuple: two are built per instance and batch on the hot path)."""

    partition: int
    store: str
    lag: float
    never_uploaded: bool
    replay_files: int | None  # from the checkpoint's listing only


@dataclass
class _Query:
    run_id: str | None = None
    run_base: int = 0  # the version a -1 instance's lag is counted from
    periods: deque[float] = field(default_factory=lambda: deque(maxlen=PERIODS_KEPT))
    last_ts: float | None = None
    listing: Listing | None = None
    listed_at: float | None = None
    uploaded: dict[tuple[int, int, str], float] = field(default_factory=dict)  # newest upload the run reported per instance
    lagging: set[int] = field(default_factory=set)  # operators told lagging, until they are within normal again
    allowed: float | None = None  # ``allowed_lag`` for this batch (its periods and interval), computed at most once
    shown: dict[int, set[Labels]] = field(default_factory=dict)  # per operator: the per-instance series exported last
    # per (operator, partition, store): the operator's labels and the instance's series labels built from them
    instance_labels: dict[tuple[int, int, str], tuple[Labels, Labels]] = field(default_factory=dict)
    restart_batch: int | None = None  # a restarted run's first batch id, while its operators are judged
    restored_base: dict[int, float] = field(default_factory=dict)  # per operator: the version its restore replayed from
    pending: dict[int, tuple[QueryProgress, OperatorProgress, float]] = field(
        default_factory=dict
    )  # per operator: its batch not judged yet


class SnapshotHealth(Rule):
    """Per operator of each progress: every instance's snapshot lag, the counts, the signal."""

    def __init__(self, settings: Settings, checkpoint: CheckpointLocator | None = None) -> None:
        self.s = settings
        self.checkpoint = checkpoint
        self.maintenance_seconds = DEFAULT_MAINTENANCE_SECONDS
        self._queries: dict[str, _Query] = {}

    def set_conf(self, conf: Mapping[str, str]) -> None:
        self.maintenance_seconds = maintenance_seconds(conf)
        for q in self._queries.values():
            q.allowed = None

    def forget(self, query_id: str) -> None:
        self._queries.pop(query_id, None)

    def on_batch(self, ctx: Context) -> None:
        assert ctx.progress is not None
        self.batch(ctx.record, ctx.progress, ctx.ts, ctx.first_of_run)

    def on_operator(self, ctx: Context, op: OperatorProgress, labels: Labels) -> None:
        assert ctx.progress is not None
        self.operator(ctx.record, ctx.progress, op, ctx.ts, ctx.facts, ctx.evaluate, labels)

    def settle(self, ctx: Context) -> None:
        """Judge the operators' latest batches the cadence held back (taking a batch twice changes nothing)."""
        q = self._queries.get(ctx.record.query_id)
        if q is not None:
            for p, op, ts in list(q.pending.values()):
                self.operator(ctx.record, p, op, ts, ctx.facts)

    def batch(self, record: QueryRecord, p: QueryProgress, ts: float, first_of_run: bool) -> None:
        """Once per progress, before its operators: the run's base version, the batch period, the listing."""
        q = self._queries.get(record.query_id)
        if q is None:  # (not ``setdefault``: that would build a ``_Query`` at every batch)
            q = self._queries[record.query_id] = _Query()
        if first_of_run or q.run_id != p.run_id:
            q.run_id, q.run_base = p.run_id, 0 if p.batch_id == 0 else p.batch_id
            q.last_ts = None
            q.uploaded.clear()
            q.restored_base.clear()
            q.pending.clear()  # a run that ended unseen: its batches are not this run's
            q.restart_batch = p.batch_id if p.batch_id > 0 else None  # its operators' restores are judged once
        elif q.last_ts is not None and ts > q.last_ts:
            q.periods.append(ts - q.last_ts)
        q.last_ts = ts
        q.allowed = None  # the periods may have moved
        if self.checkpoint is not None and (q.listed_at is None or ts - q.listed_at >= self.s.snapshot_scan_seconds or ts < q.listed_at):
            q.listed_at = ts
            q.listing = self._list(record.query_id, p.run_id)

    def _list(self, query_id: str, run_id: str | None) -> Listing | None:
        assert self.checkpoint is not None
        try:
            location = self.checkpoint(query_id, run_id)
            root = local_root(location) if location else None
            if root is None:
                return None
            listing, problems = list_snapshots(root)
        except Exception as exc:  # a checkpoint that cannot be listed only costs the exact view
            log.debug("spark-state-observer: checkpoint of %s not listed: %r", query_id, exc)
            return None
        if problems:
            log.debug("spark-state-observer: checkpoint of %s: %s", query_id, "; ".join(problems[:3]))
        return listing or None

    def allowed_lag(self, query_id: str) -> float:
        """The largest lag that is normal: the setting plus a maintenance interval's worth of batches."""
        q = self._queries.get(query_id)
        if q is not None and q.allowed is not None:
            return q.allowed  # every operator of a batch asks: the median of the periods once
        period = statistics.median(q.periods) if q is not None and q.periods else None
        per_interval = self.maintenance_seconds / period if period else 0.0
        allowed = self.s.snapshot_lag_batches + per_interval
        if q is not None:
            q.allowed = allowed
        return allowed

    def operator(
        self,
        record: QueryRecord,
        p: QueryProgress,
        op: OperatorProgress,
        ts: float,
        facts: Facts,
        evaluate: bool = True,
        labels: Labels | None = None,
    ) -> None:
        """Take one batch of ``op``: its instances' uploads at once; their lags, ranking and the signal when
        ``evaluate`` (the cadence). ``labels``: the operator's (the engine's, kept while the label budget holds)."""
        q = self._queries.get(record.query_id)
        if q is None:
            return
        listing = q.listing
        any_reported, newest = _reported(op)
        listed = {k[1:]: v for k, v in listing.items() if k[0] == op.index} if listing else {}
        if not any_reported and not listed:
            return  # Spark before 4.1, an HDFS store before 4.1, or a stateless batch: nothing is known
        if q.restart_batch == p.batch_id:
            _restored_base(q, op, p.batch_id)
        _keep_newest(q.uploaded, op.index, newest)
        if not evaluate:  # the common batch: the uploads kept, the rest waits for the cadence
            q.pending[op.index] = (p, op, ts)
            return
        q.pending.pop(op.index, None)
        total = int(op.store_instances) if op.store_instances and math.isfinite(op.store_instances) else None
        version = p.batch_id + 1
        base = q.restored_base.get(op.index, q.run_base)
        if listed:
            source = CHECKPOINT
            if any_reported:
                instances = [_from_listing(part, store, s, version, newest.get((part, store))) for (part, store), s in listed.items()]
            else:  # Spark before 4.1 reports no upload: what the listing saw is what is known
                instances = [_as_listed(part, store, s, version) for (part, store), s in listed.items()]
            unknown = max(0, (total or 0) - len(instances))
        else:
            source = PROGRESS
            # a -1 after an upload this run is a reloaded provider: the checkpoint holds that upload
            instances = [
                _instance(
                    Instance,
                    (
                        m.partition,
                        m.store,
                        float(
                            version - (m.value if m.value is not None else max(base, q.uploaded.get((op.index, m.partition, m.store), 0)))
                        ),
                        m.value is None,
                        None,
                    ),
                )
                for m in op.instances
                if m.prefix == SNAPSHOT_LAST_UPLOADED
            ]
        never = sum(map(_never_uploaded, instances))  # bools: the count of the never uploaded
        if source == PROGRESS:
            # all never uploaded: the count is the instances' (a non-empty list: some were reported)
            unknown = max(0, (total or len(instances)) - len(instances)) if never == len(instances) else 0
        allowed = self.allowed_lag(record.query_id)
        largest = max(map(_lag, instances))
        # most lagging first; sorted once, the lagging ones are a stable filter of it and the series its top K
        ranked = sorted(instances, key=_rank)
        lagging = [i for i in ranked if i.lag > allowed]
        if labels is None:
            labels = operator_labels(op.index, op.name)
        replay = sum(i.replay_files or 0 for i in instances) if source == CHECKPOINT else None
        facts.set_many(
            record,
            labels,
            (
                (catalog.SNAPSHOT_MAX_LAG_BATCHES, largest),
                (catalog.SNAPSHOT_INSTANCES_NEVER_UPLOADED, float(never)),
                (catalog.SNAPSHOT_INSTANCES_UNKNOWN, float(unknown)),
                (catalog.SNAPSHOT_INSTANCES_LAGGING, float(len(lagging))),
                (catalog.SNAPSHOT_RESTORE_REPLAY_FILES, None if replay is None else float(replay)),
            ),
        )
        self._instance_series(record, q, op.index, labels, ranked, facts)
        if largest <= allowed:
            q.lagging.discard(op.index)
            return
        if op.index in q.lagging:
            return
        q.lagging.add(op.index)
        facts.signal(
            SNAPSHOT_LAGGING,
            record,
            p.run_id,
            ts,
            batch_id=p.batch_id,
            operator_id=op.index,
            operator_name=op.name,
            max_lag_batches=largest,
            allowed_lag_batches=round(allowed, 1),
            instances=total,
            instances_lagging=len(lagging),
            instances_never_uploaded=never,
            instances_unknown=unknown,
            replay_files=replay,
            source=source,
            partitions=[
                {
                    "partition": i.partition,
                    "store": i.store,
                    "lag_batches": i.lag,
                    "never_uploaded": i.never_uploaded,
                    "replay_files": i.replay_files,
                }
                for i in lagging[:MAX_PARTITIONS_TOLD]
            ],
        )

    def _instance_series(self, record: QueryRecord, q: _Query, op_index: int, labels: Labels, ranked: list[Instance], facts: Facts) -> None:
        """The top-K most lagging instances' lag (``ranked``: most lagging first); a series that leaves the top K is removed."""
        now: set[Labels] = set()
        for i in ranked[: self.s.partition_top_k]:
            key = (op_index, i.partition, i.store)
            known = q.instance_labels.get(key)
            if known is not None and known[0] == labels:
                il = known[1]
            else:
                il = labels + (("partition", str(i.partition)), ("store", i.store))
                if len(q.instance_labels) >= MAX_INSTANCES:
                    q.instance_labels.clear()  # bounded: instances long out of the top K go
                q.instance_labels[key] = (labels, il)
            now.add(il)
            facts.set(record, catalog.SNAPSHOT_LAG_BATCHES, il, i.lag)
        shown = q.shown.get(op_index)
        if shown:
            for gone in shown - now:
                facts.set(record, catalog.SNAPSHOT_LAG_BATCHES, gone, None)
        q.shown[op_index] = now


_instance = tuple.__new__  # ``Instance(...)`` without its generated ``__new__``: one per reported instance and batch
_lag, _never_uploaded = itemgetter(2), itemgetter(3)  # an instance's lag and whether it never uploaded, as C calls


def _reported(op: OperatorProgress) -> tuple[bool, dict[tuple[int, str], float]]:
    """Whether any instance of ``op`` reported its last upload, and the reported versions per (partition, store):
    an instance's latest report counts."""
    reported = False
    newest: dict[tuple[int, str], float] = {}
    for m in op.instances:
        if m.prefix == SNAPSHOT_LAST_UPLOADED:
            reported = True
            if m.value is not None:
                newest[(m.partition, m.store)] = m.value
    return reported, newest


def _keep_newest(uploaded: dict[tuple[int, int, str], float], index: int, newest: dict[tuple[int, str], float]) -> None:
    """Each instance's newest upload this run, for at most ``MAX_INSTANCES`` instances."""
    for (part, store), value in newest.items():
        key = (index, part, store)
        if key in uploaded or len(uploaded) < MAX_INSTANCES:
            uploaded[key] = max(value, uploaded.get(key, value))


def _restored_base(q: _Query, op: OperatorProgress, batch_id: int) -> None:
    """At a restarted run's first batch: the version ``op``'s stores restored from, on average, where its
    restore says (the changelog files it replayed per store loaded from the checkpoint)."""
    files = op.custom.get(ROCKSDB_REPLAY_FILES)
    loaded = op.custom.get(ROCKSDB_LOADED_FROM_DFS) or op.store_instances
    if files is None or not loaded or not (0 < files < math.inf and 0 < loaded < math.inf):
        return
    q.restored_base[op.index] = float(max(0, batch_id - math.floor(files / loaded)))


def _rank(i: Instance) -> tuple[float, int, str]:
    """Most lagging first, then by partition and store."""
    return (-i.lag, i.partition, i.store)


def _as_listed(partition: int, store: str, s: InstanceSnapshots, version: int) -> Instance:
    """An instance as listed, where the progress reports no upload (Spark before 4.1: no ``SnapshotLastUploaded``).
    Maintenance uploads in the background: a snapshot of any version committed since the listing may be in the
    checkpoint already, and nothing says whether it is. So those versions are not counted as lag (counted, clean
    Spark 3.5 runs with 1 s batches and maintenance every 5 s read 26 versions behind between two listings 30 s
    apart); the listing's own lag is exact as of the listing, and the next one is never more than
    ``snapshot_scan_seconds`` away. A listing newer than the batch (replayed against the checkpoint a run
    left) is brought back to the batch, as ``_from_listing`` does."""
    if version >= s.last_version:
        return Instance(partition, store, float(s.lag), s.newest_snapshot is None, s.replay_files)
    return _from_listing(partition, store, s, version, None)


def _from_listing(partition: int, store: str, s: InstanceSnapshots, version: int, reported: float | None) -> Instance:
    """An instance as listed, brought up to this batch: versions committed since the listing add to its
    lag and its replay, and a newer upload the progress reports counts over the listed one."""
    newest = max(s.newest_snapshot or 0, int(reported) if reported is not None and math.isfinite(reported) else 0)
    lag = max(0, version - newest)
    since_listing = max(0, version - s.last_version)
    replay = s.replay_files + since_listing if newest == (s.newest_snapshot or 0) else lag
    return Instance(partition, store, float(lag), newest == 0, min(replay, lag))  # never more files than versions since


ALERTS = (
    AlertSpec(
        "SparkStateSnapshotUploadLagging",
        "state",
        # the signal judges the lag (snapshot_lag_batches plus a maintenance interval's batches); the alert reads its
        # judgement, so both fire at the same lag; a minute rides out a scrape that saw it alone
        "1m",
        WARNING,
        (SNAPSHOT_LAGGING,),
        ("snapshot_lagging",),
        summary="State snapshots are not uploaded: a restart would replay many files.",
        verdict_text=(("snapshot_lagging", "Snapshots lagging: {operator} at {at}"),),
    ),
)
SnapshotHealth.alerts = ALERTS
