"""Consumer lag of Spark's Kafka source, from the offsets in its progress: in records, in seconds, and source health.

Spark's Kafka source keeps its offsets in the checkpoint, not in a consumer group, so Kafka-side lag tools
(Burrow, kafka-lag-exporter) cannot see a Spark query. Each progress does carry, per source, ``startOffset``,
``endOffset`` and ``latestOffset`` as ``{topic: {partition: offset}}`` (JSON objects in ``progress.json``,
JSON strings in the event log; ``startOffset`` is ``null`` on a query's first batch). From them, per source:

- **lag in records** per partition: ``latest - end``, where ``latest`` is what the broker had when the batch
  was planned (fetched in the ``latestOffset`` phase, right after the progress ``timestamp``) and ``end`` is
  where the batch stopped reading. Without ``maxOffsetsPerTrigger`` (or ``maxBytesPerTrigger``) a batch reads
  to the latest and the lag is 0 in every progress; lag shows when a rate limit spreads a backlog over
  batches, e.g. after a restart. Totals per topic; per partition only the top K (label cardinality).
- **lag in seconds**, the figure an SLO is written in, estimated the way kafka-lag-exporter does: each
  partition keeps a bounded history of (latest offset, time it was seen); the age of the oldest unread record
  is ``now - t(end)``, with ``now`` when the batch read the latest offsets (``progress_time``) and ``t(end)``
  the time the latest offset passed ``end``, interpolated linearly between the two observations around it. The error is at most the time between those two observations
  (one trigger interval while the query runs). See ``OffsetHistory`` for start-up, idle partitions and restarts.
- **health findings**: lag growing over a window, a stuck partition (its end offset does not move while its
  latest does), partitions added, and offsets that went backwards or skipped (the data-loss risk
  ``failOnDataLoss`` guards against). Offsets skipped show as a batch that read fewer records than its
  offsets span (``_unread_findings``): Spark plans each batch from the previous one's end, so records deleted
  before the query read them (retention while it was down, ``failOnDataLoss=false``) never show as a jump in
  the offsets themselves.

Pure computation (no pyspark, no I/O), bounded memory; input comes from files and JVMs we do not control, so
nothing here raises on bad input: garbage yields fewer partitions, never an exception.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.signals.kafka_offsets import (
    DEFAULT_MAX_PARTITIONS,
    Offsets,
    as_offset,
    lag_records,
    parse_offsets,
    topic_totals,
)

RATE_SAMPLES = 20  # batches kept per topic for the read and produce rates of the catch-up forecast

# seconds_kind of a PartitionLag: how its lag in seconds was obtained
CAUGHT_UP = "caught_up"  # end >= latest: no unread record, 0 s
INTERPOLATED = "interpolated"  # between two observations of the latest offset
EXTRAPOLATED = "extrapolated"  # end is older than the history: back from its two oldest points at their rate
LOWER_BOUND = "lower_bound"  # one observation only: the record is at least as old as that observation
UNKNOWN = "unknown"
# offsets a batch spans but does not read (offsets_skipped): the batches a topic's usual share is taken over,
# the least share that counts, and the share that counts on a topic whose offsets are not all records
UNREAD_BASELINE_BATCHES = 16
UNREAD_MIN_SHARE = 0.01
UNREAD_GAPPED_TOPIC_SHARE = 0.5


# --- lag in seconds ----------------------------------------------------------------------------------


class OffsetHistory:
    """Bounded history of one partition's latest offset: points ``[offset, first_seen, last_seen]``, offsets increasing.

    ``first_seen``/``last_seen`` are the first and last observation at that offset: the records after
    ``offset`` were written between this point's ``last_seen`` and the next point's ``first_seen``, so an idle
    partition (latest not moving) does not stretch the interpolation over its idle time.

    - Start-up: with a single observation, an unread record's age has only a lower bound (``now - first_seen``);
      from two, offsets older than the history are extrapolated back at the rate of the two oldest points.
    - Idle partition: ``end == latest``, lag 0 s however long it has been idle.
    - After a restart (a new run of the same query, in the same observer or in a replay of both runs' logs),
      the history carries over and the gap while the query was down is interpolated across: the lag in
      seconds of the first batches is right if the producer kept a steady rate while the query was down.
      A new observer process starts with an empty history (start-up above).
    - The latest offset going back (topic deleted and recreated, truncated) resets the history.

    When full, the interior point whose removal leaves the smallest time gap goes: old offsets stay covered, at
    a coarser resolution.
    """

    def __init__(self, max_points: int = 64) -> None:
        self.max_points = max(3, max_points)
        self.points: list[list[float]] = []

    def observe(self, offset: int, t: float) -> None:
        """Record that the partition's latest offset was ``offset`` at time ``t`` (Unix seconds)."""
        if not math.isfinite(t):
            return
        if self.points and offset < self.points[-1][0]:
            self.points = []
        if self.points and offset == self.points[-1][0]:
            last = self.points[-1]
            last[2] = max(last[2], t)
            return
        if self.points and t < self.points[-1][2]:
            return  # an older observation of a newer offset: out of order, ignore
        self.points.append([float(offset), t, t])
        if len(self.points) > self.max_points:
            self._thin()

    def _thin(self) -> None:
        pts = self.points
        k = min(range(1, len(pts) - 1), key=lambda i: pts[i + 1][1] - pts[i - 1][2])
        del pts[k]

    def time_passed(self, end: int) -> tuple[float | None, str]:
        """When the latest offset passed ``end``, i.e. when the record at ``end`` was written, and how it was estimated."""
        pts = self.points
        if not pts:
            return None, UNKNOWN
        if end >= pts[-1][0]:
            return None, CAUGHT_UP
        j = bisect.bisect_right([p[0] for p in pts], end)
        target = end + 1.0  # the record at `end` exists once the latest offset is end + 1
        if j == 0:
            if len(pts) >= 2:
                (o0, _f0, l0), (o1, f1, _l1) = pts[0], pts[1]
                if f1 > l0 and o1 > o0:
                    return l0 - (o0 - target) * (f1 - l0) / (o1 - o0), EXTRAPOLATED
            return pts[0][1], LOWER_BOUND
        (oi, _fi, li), (oj, fj, _lj) = pts[j - 1], pts[j]
        return li + (target - oi) * (fj - li) / (oj - oi), INTERPOLATED


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (t, value) points; None for fewer than two distinct times."""
    if len(points) < 2:
        return None
    n = len(points)
    mt = sum(p[0] for p in points) / n
    mv = sum(p[1] for p in points) / n
    var = sum((p[0] - mt) ** 2 for p in points)
    if var <= 0:
        return None
    return sum((p[0] - mt) * (p[1] - mv) for p in points) / var


# --- catch-up forecast -------------------------------------------------------------------------------


def catch_up_seconds(backlog: float, read_rate: float | None, produce_rate: float | None, delay: float = 0.0) -> float | None:
    """Seconds until a query has read a ``backlog`` of records, None when it never will at these rates.

    The query starts reading ``delay`` seconds from now (a restore, a slow first batch); meanwhile the topic
    grows at ``produce_rate`` records/s, and once reading, the backlog shrinks at ``read_rate - produce_rate``.
    """
    if backlog == 0:
        return 0.0
    if read_rate is None or not math.isfinite(read_rate) or backlog < 0:
        return None
    produce = max(0.0, produce_rate or 0.0)
    delay = max(0.0, delay)
    if read_rate <= produce:
        return None
    return delay + (backlog + produce * delay) / (read_rate - produce)


class _Rates:
    """One topic's read and produce rates over its recent batches, for the catch-up forecast.

    The read rate is what the query reads per second of wall time *while behind* (a batch that started with
    unread records is bound by the query's capacity or its ``maxOffsetsPerTrigger``, not by the input): the rows
    the recent such batches read (three at least) over the wall time they span, each from the previous batch's end
    to its own. A sum over a span, not a median of each batch's pace: a processing-time trigger whose batch
    overran fires the next one at once, and that one ends after a fraction of the interval (Spark's
    ``ProcessingTimeExecutor`` waits only until the next multiple of the interval), so the pace of single batches
    alternates between too slow and several times too fast; a median of them overstated the pace up to 2.4x on
    a loaded machine, the span's sum counts each second once. The batch after a run's first is left out (it spans
    the first one's start-up); batches that started caught up only show the input rate, and a run's first batch
    spans the downtime, so neither counts. The produce rate is the growth of the topic's latest offsets over the
    recent batches.
    """

    def __init__(self) -> None:
        # (records read, seconds since the previous batch's end) of each recent batch that started behind
        self.reads: deque[tuple[float, float]] = deque(maxlen=RATE_SAMPLES)
        self.latest: deque[tuple[float, float]] = deque(maxlen=RATE_SAMPLES)

    def observe(self, t: float, latest_total: float, read: float | None, interval: float | None, was_behind: bool) -> None:
        if self.latest and latest_total < self.latest[-1][1]:
            self.latest.clear()  # the topic was recreated or truncated: rates from before mean nothing
        if not self.latest or t > self.latest[-1][0]:
            self.latest.append((t, latest_total))
        if was_behind and read is not None and interval is not None and interval > 0:
            self.reads.append((read, interval))

    def read_rate(self) -> float | None:
        """The read pace over the recent batches that started behind, once there are three of them."""
        if len(self.reads) < 3:
            return None
        return sum(read for read, _ in self.reads) / sum(seconds for _, seconds in self.reads)

    def produce_rate(self) -> float | None:
        if len(self.latest) < 2 or self.latest[-1][0] <= self.latest[0][0]:
            return None
        (t0, l0), (t1, l1) = self.latest[0], self.latest[-1]
        return max(0.0, (l1 - l0) / (t1 - t0))


# --- per source tracking -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    end: int
    latest: int
    records: int
    seconds: float | None
    seconds_kind: str


@dataclass(frozen=True)
class KafkaFinding:
    """One source health finding: kind is lag_growing, partition_stuck, partition_recovered, partitions_added,
    offsets_rewound, offsets_skipped or latest_went_back."""

    kind: str
    topic: str
    partitions: tuple[int, ...] = ()
    detail: Mapping[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        where = f"{self.topic}[{','.join(map(str, self.partitions))}]" if self.partitions else self.topic
        extra = ", ".join(f"{k}={v:g}" for k, v in self.detail.items())
        return f"kafka {self.kind} on {where}" + (f" ({extra})" if extra else "")


@dataclass(frozen=True)
class KafkaSnapshot:
    """The lag of one Kafka source after one batch."""

    t: float
    partitions: tuple[PartitionLag, ...]  # every tracked partition, by topic and partition
    top: tuple[PartitionLag, ...]  # the top-K by records (then seconds)
    topic_records: Mapping[str, int]
    topic_seconds: Mapping[str, float | None]
    topic_partitions: Mapping[str, int]
    stuck: frozenset[tuple[str, int]]
    growth: Mapping[str, float]  # topic -> lag slope in records/s, once the window has enough batches
    findings: tuple[KafkaFinding, ...]
    dropped_partitions: int = 0
    catch_up: Mapping[str, float] = field(default_factory=dict)  # topic -> forecast seconds until its lag is read
    read_rate: Mapping[str, float] = field(default_factory=dict)  # topic -> records/s the query reads while behind
    produce_rate: Mapping[str, float] = field(default_factory=dict)  # topic -> records/s written to the topic
    growing: frozenset[str] = frozenset()  # topics judged growing: from their lag_growing finding until growth stops


class KafkaLagTracker:
    """Lag and health of one Kafka source of one query, batch after batch (keep one per query and source index).

    Bounded: at most ``max_partitions`` partition histories of ``max_points`` points, ``growth`` keeps the
    topic totals of the last ``growth_window_seconds`` (at most ``max_window_points``).
    """

    def __init__(
        self,
        top_k: int = 10,
        max_points: int = 64,
        max_partitions: int = DEFAULT_MAX_PARTITIONS,
        growth_window_seconds: float = 120.0,
        growth_min_batches: int = 5,
        stuck_batches: int = 3,
        max_window_points: int = 1000,
    ) -> None:
        self.top_k = max(0, top_k)
        self.max_points = max_points
        self.max_partitions = max(1, max_partitions)
        self.growth_window = growth_window_seconds
        self.growth_min_batches = max(2, growth_min_batches)
        self.stuck_batches = max(2, stuck_batches)
        self.histories: dict[tuple[str, int], OffsetHistory] = {}
        self._prev_end: Offsets | None = None
        self._prev_latest: Offsets | None = None
        self._unmoved: dict[tuple[str, int], tuple[int, int, int]] = {}  # (end, latest at first sighting, batches)
        self._stuck: set[tuple[str, int]] = set()
        self._window: dict[str, deque[tuple[float, float]]] = {}
        self._max_window_points = max_window_points
        self._growing: set[str] = set()
        self.anomalies: dict[tuple[str, str], int] = {}  # (kind, topic) -> count, for the *_total counter
        self.partitions_added: dict[str, int] = {}
        self._rates: dict[str, _Rates] = {}
        self._prev_t: float | None = None
        self._prev_lag: dict[str, int] = {}
        self._run_start = True
        self._after_run_start = False  # the previous batch was its run's first (slow: consumer creation, codegen)
        self._unread_ratios: deque[float] = deque(maxlen=UNREAD_BASELINE_BATCHES)  # the last batches' share of offsets not read
        self._pending: list[KafkaFinding] = []  # found in a batch without a lag (a re-run), told with the next one

    def new_run(self) -> None:
        """The next batch is a new run's first: the time since the previous batch is downtime, not reading.

        Everything else (offset histories, rates, stuck and growth windows) carries over, so the lag in
        seconds after a restart is interpolated across the downtime and the forecast uses the rate seen before.
        """
        self._run_start = True

    def update(self, source: Mapping[str, Any], t: float, delay: float = 0.0) -> KafkaSnapshot | None:
        """Take one batch's source progress observed at ``t`` (``progress_time``); None if it has no usable offsets.

        ``delay``: seconds after ``t`` until the query reads past this batch (the batch's own duration), for
        the catch-up forecast.
        """
        try:
            return self._update(source, t, delay)
        except Exception:
            return None

    def _update(self, source: Mapping[str, Any], t: float, delay: float = 0.0) -> KafkaSnapshot | None:
        if not isinstance(source, Mapping) or not isinstance(t, (int, float)) or not math.isfinite(t):
            return None
        start = parse_offsets(source.get("startOffset"), self.max_partitions)
        end = parse_offsets(source.get("endOffset"), self.max_partitions)
        latest = parse_offsets(source.get("latestOffset"), self.max_partitions)
        unread = self._unread_findings(source.get("numInputRows"), start, end)
        if not latest:
            # a batch re-run after a restart (planned, not committed by the previous run) reports no latestOffset:
            # its lag is unknown, not 0; its end still counts for the next batch's continuity check
            if end:
                self._prev_end = end
            self._pending += unread
            return None
        findings, self._pending = self._pending + unread + self._offset_findings(start, end, latest), []
        lags = lag_records(end, latest)
        dropped = 0
        rows: list[PartitionLag] = []
        for (topic, p), records in sorted(lags.items()):
            key = (topic, p)
            hist = self.histories.get(key)
            if hist is None:
                if len(self.histories) >= self.max_partitions:
                    dropped += 1
                    continue
                hist = self.histories[key] = OffsetHistory(self.max_points)
            top = latest[topic][p]
            hist.observe(top, float(t))
            e = end.get(topic, {}).get(p, 0)
            passed, kind = hist.time_passed(e)
            seconds = 0.0 if kind == CAUGHT_UP else (max(0.0, t - passed) if passed is not None else None)
            rows.append(PartitionLag(topic, p, e, top, records, seconds, kind))
        findings += self._stuck_findings(rows)
        topic_records = topic_totals(lags)
        topic_seconds: dict[str, float | None] = {}
        topic_partitions: dict[str, int] = {}
        for row in rows:
            topic_partitions[row.topic] = topic_partitions.get(row.topic, 0) + 1
            if row.seconds is not None:
                prev = topic_seconds.get(row.topic)
                topic_seconds[row.topic] = row.seconds if prev is None else max(prev, row.seconds)
            else:
                topic_seconds.setdefault(row.topic, None)
        read = {topic: sum(max(0, o - start.get(topic, {}).get(p, o)) for p, o in partitions.items()) for topic, partitions in end.items()}
        growth, growth_findings = self._growth(float(t), topic_records, read)
        findings += growth_findings
        catch_up, read_rates, produce_rates = self._forecast(float(t), start, end, latest, topic_records, delay)
        ranked = sorted(rows, key=lambda r: (-r.records, -(r.seconds or 0.0), r.topic, r.partition))
        self._prev_end, self._prev_latest = end, latest
        return KafkaSnapshot(
            float(t),
            tuple(rows),
            tuple(ranked[: self.top_k]),
            topic_records,
            topic_seconds,
            topic_partitions,
            frozenset(self._stuck),
            growth,
            tuple(findings),
            dropped,
            catch_up,
            read_rates,
            produce_rates,
            frozenset(self._growing),
        )

    def _forecast(
        self, t: float, start: Offsets, end: Offsets, latest: Offsets, totals: Mapping[str, int], delay: float
    ) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        """Per topic: seconds until the current lag is read (0 when caught up, none when not draining), read and produce rates."""
        # a run's first batch spans the downtime, its second the first one's start-up: neither shows the pace
        interval = None if self._run_start or self._after_run_start or self._prev_t is None else t - self._prev_t
        forecasts: dict[str, float] = {}
        reads: dict[str, float] = {}
        produces: dict[str, float] = {}
        for topic, total in totals.items():
            rates = self._rates.get(topic)
            if rates is None:
                if len(self._rates) >= self.max_partitions:
                    continue
                rates = self._rates[topic] = _Rates()
            ends, starts = end.get(topic, {}), start.get(topic)
            read = float(sum(max(0, o - starts.get(p, o)) for p, o in ends.items())) if starts is not None else None
            rates.observe(t, float(sum(latest.get(topic, {}).values())), read, interval, self._prev_lag.get(topic, 0) > 0)
            read_rate, produce_rate = rates.read_rate(), rates.produce_rate()
            if read_rate is not None:
                reads[topic] = read_rate
            if produce_rate is not None:
                produces[topic] = produce_rate
            eta = catch_up_seconds(total, read_rate, produce_rate, delay) if total > 0 else 0.0
            if eta is not None:
                forecasts[topic] = eta
        self._prev_t, self._prev_lag = t, dict(totals)
        self._after_run_start, self._run_start = self._run_start, False
        return forecasts, reads, produces

    def _count(self, kind: str, topic: str) -> None:
        key = (kind, topic)
        if key in self.anomalies or len(self.anomalies) < 4 * self.max_partitions:
            self.anomalies[key] = self.anomalies.get(key, 0) + 1

    def _offset_findings(self, start: Offsets, end: Offsets, latest: Offsets) -> list[KafkaFinding]:
        """Partitions added, and offsets that did not continue where the previous batch left them."""
        found: list[KafkaFinding] = []
        prev_end, prev_latest = self._prev_end, self._prev_latest
        if prev_latest is None or prev_end is None:
            return found
        for topic, partitions in latest.items():
            known = prev_latest.get(topic)
            if known is not None:
                added = tuple(sorted(set(partitions) - set(known)))
                if added:
                    found.append(KafkaFinding("partitions_added", topic, added, {"topic_partitions": float(len(partitions))}))
                    self.partitions_added[topic] = self.partitions_added.get(topic, 0) + len(added)
            back = tuple(p for p, o in sorted(partitions.items()) if known is not None and p in known and o < known[p])
            if back:
                found.append(KafkaFinding("latest_went_back", topic, back))
                self._count("latest_went_back", topic)
        checks: tuple[tuple[str, Callable[[int, int], bool]], ...] = (
            ("offsets_rewound", lambda s, e: s < e),
            ("offsets_skipped", lambda s, e: s > e),
        )
        for kind, test in checks:
            for topic, partitions in start.items():
                before = prev_end.get(topic, {})
                hit = tuple(p for p, s in sorted(partitions.items()) if p in before and test(s, before[p]))
                if hit:
                    detail = {"records": float(sum(abs(partitions[p] - before[p]) for p in hit))}
                    found.append(KafkaFinding(kind, topic, hit, detail))
                    self._count(kind.replace("offsets_", ""), topic)
        return found

    def _unread_findings(self, read_rows: Any, start: Offsets, end: Offsets) -> list[KafkaFinding]:
        """Offsets in the batch's range that it did not read: records deleted before the query read them.

        Spark plans a batch from the previous batch's end, whatever the broker still holds; with
        ``failOnDataLoss=false`` the reader then skips what retention (or ``deleteRecords``) removed and the
        batch reads fewer records than its offsets span, its start offsets looking continuous. A topic whose
        offsets are not all records (transaction markers, aborted transactions read committed, compaction)
        shows such a share in every batch: a batch counts when its share is above twice the most of the last
        ``UNREAD_BASELINE_BATCHES``, and, on a topic that has shown any (or that this tracker has not seen
        before), above half its offsets (a transaction writes at least one record per marker).
        """
        read = as_offset(read_rows)
        if read is None or len(end) != 1:
            return []  # a source over several topics: its one row count cannot be told per topic
        ((topic, ends),) = end.items()
        starts = start.get(topic, {})
        if not ends or any(p not in starts for p in ends):
            return []  # a partition new in this batch: Spark reads it from its earliest, an offset not in the progress
        offsets = sum(max(0, o - starts[p]) for p, o in ends.items())
        if offsets <= 0:
            return []
        unread = offsets - read
        share = max(0.0, unread / offsets)
        usual = max(self._unread_ratios) if self._unread_ratios else None
        if unread <= max(len(ends), UNREAD_MIN_SHARE * offsets) or share <= max(
            2.0 * (usual or 0.0), 0.0 if usual == 0.0 else UNREAD_GAPPED_TOPIC_SHARE
        ):
            self._unread_ratios.append(share)  # the topic's usual share; a batch that lost records is not usual
            return []
        self._count("skipped", topic)
        detail = {"records": float(unread), "offsets": float(offsets), "records_read": float(read)}
        return [KafkaFinding("offsets_skipped", topic, tuple(sorted(ends)), detail)]

    def _stuck_findings(self, rows: Iterable[PartitionLag]) -> list[KafkaFinding]:
        """A partition is stuck when its end stayed put for ``stuck_batches`` batches while its latest moved past it."""
        found: dict[tuple[str, str], list[int]] = {}
        seen: set[tuple[str, int]] = set()
        for row in rows:
            key = (row.topic, row.partition)
            seen.add(key)
            prev = self._unmoved.get(key)
            if prev is None or prev[0] != row.end or row.records == 0:
                self._unmoved[key] = (row.end, row.latest, 1)
                if key in self._stuck:
                    self._stuck.discard(key)
                    found.setdefault(("partition_recovered", row.topic), []).append(row.partition)
                continue
            batches = prev[2] + 1
            self._unmoved[key] = (prev[0], prev[1], batches)
            if batches >= self.stuck_batches and row.latest > prev[1] and key not in self._stuck:
                self._stuck.add(key)
                found.setdefault(("partition_stuck", row.topic), []).append(row.partition)
        for key in [k for k in self._unmoved if k not in seen]:
            del self._unmoved[key]
            self._stuck.discard(key)
        return [KafkaFinding(kind, topic, tuple(ps)) for (kind, topic), ps in sorted(found.items())]

    def _growth(self, t: float, totals: Mapping[str, int], read: Mapping[str, int]) -> tuple[dict[str, float], list[KafkaFinding]]:
        """Least-squares slope of each topic's total lag over the window; lag_growing when it turns positive.

        ``read``: the offsets this batch read per topic. A lag that rose over the window by no more than one
        batch reads is a query at its rate limit whose backlog comes and goes with the producer's bursts."""
        slopes: dict[str, float] = {}
        found: list[KafkaFinding] = []
        for topic, total in totals.items():
            window = self._window.get(topic)
            if window is None:
                if len(self._window) >= self.max_partitions:
                    continue
                window = self._window[topic] = deque(maxlen=self._max_window_points)
            while window and t <= window[-1][0]:
                # not after the newest (logs concatenated or replayed twice, a clock stepped back): the window ends
                # here, in time order, as ``growth``'s windows do; the points at or after it leave
                window.pop()
            window.append((t, float(total)))
            while window and window[0][0] < t - self.growth_window:
                window.popleft()
            if len(window) < self.growth_min_batches:
                continue
            slope = _slope(list(window))
            if slope is None:
                continue
            slopes[topic] = slope
            # growing over the window, and still growing: not a backlog being read down after a jump; and behind
            # at every batch of the window's recent half (a query that keeps up reads to the latest, lag 0, at most
            # batches: one late batch's lag at the window's end is no growth), or a run's first batch finding the
            # backlog that grew while the query was down
            points = list(window)
            recent_half = points[len(points) // 2 :]
            recent = _slope(recent_half)
            behind = self._run_start or all(lag > 0 for _t, lag in recent_half)
            rise = window[-1][1] - window[0][1]
            growing = slope > 0 and rise > read.get(topic, 0) and (recent is None or recent >= 0) and behind
            if growing and topic not in self._growing:
                self._growing.add(topic)
                found.append(KafkaFinding("lag_growing", topic, (), {"records_per_second": slope, "lag_records": float(total)}))
            elif not growing:
                self._growing.discard(topic)
        return slopes, found


def metric_samples(snapshot: KafkaSnapshot, tracker: KafkaLagTracker | None = None) -> list[tuple[MetricSpec, Labels, float]]:
    """The snapshot as (spec, labels, value) samples of ``catalog.KAFKA_METRICS``; counters from the tracker when given.

    Labels are the spec's own (topic, partition, kind) in its order; the caller puts the query's and the
    source's before them.
    """
    out: list[tuple[MetricSpec, Labels, float]] = []
    # a lower bound (a new observer's first sight of a partition: 0 s) is not a lag in seconds: left out, and
    # with it its topic's largest lag, which that partition could exceed
    bounded = {row.topic for row in snapshot.partitions if row.seconds_kind == LOWER_BOUND}
    for row in snapshot.top:
        labels = (("topic", row.topic), ("partition", str(row.partition)))
        out.append((catalog.KAFKA_LAG_RECORDS, labels, float(row.records)))
        if row.seconds is not None and row.seconds_kind != LOWER_BOUND:
            out.append((catalog.KAFKA_LAG_SECONDS, labels, row.seconds))
    for topic, records in sorted(snapshot.topic_records.items()):
        t = (("topic", topic),)
        out.append((catalog.KAFKA_TOPIC_LAG_RECORDS, t, float(records)))
        seconds = snapshot.topic_seconds.get(topic)
        if seconds is not None and topic not in bounded:
            out.append((catalog.KAFKA_TOPIC_LAG_SECONDS, t, seconds))
        out.append((catalog.KAFKA_PARTITIONS, t, float(snapshot.topic_partitions.get(topic, 0))))
        out.append((catalog.KAFKA_STUCK_PARTITIONS, t, float(sum(1 for k in snapshot.stuck if k[0] == topic))))
        if topic in snapshot.growth:
            out.append((catalog.KAFKA_LAG_GROWTH, t, snapshot.growth[topic]))
        out.append((catalog.KAFKA_LAG_GROWING, t, 1.0 if topic in snapshot.growing else 0.0))
        forecast = snapshot.catch_up.get(topic)
        if forecast is not None:
            out.append((catalog.KAFKA_CATCH_UP_FORECAST, t, forecast))
    if tracker is not None:
        for (kind, topic), count in sorted(tracker.anomalies.items()):
            out.append((catalog.KAFKA_OFFSET_ANOMALIES, (("topic", topic), ("kind", kind)), float(count)))
        for topic, count in sorted(tracker.partitions_added.items()):
            out.append((catalog.KAFKA_PARTITIONS_ADDED, (("topic", topic),), float(count)))
    return out
