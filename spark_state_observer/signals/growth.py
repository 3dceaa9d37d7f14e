"""State growth and eviction over a sliding window: the unbounded/bounded verdict from the state's trend.

A state is unbounded when its rows (or, where Spark does not count rows, its bytes) keep rising over a
window long enough to tell; not when nothing is evicted. A session window whose sessions stay open, or a
count over 100 fixed keys, never evicts and is bounded: it is flat. A state that evicts and still rises is
unbounded. "Keeps rising" is judged on the window's thirds (by time): each third's mean above the one
before by more than the state's own scatter about its trend (at least one row), so a saw-tooth of windows
opening and closing is flat, and a ramp that reached its plateau (the first batches filling 100 keys) is
neither until the plateau fills a window. "Long enough to tell" is half the growth window and several
batches; with a watermark and nothing evicted yet, also the watermark's delay plus a whole growth window
(an operator's window or gap shorter than ``growth_window_seconds`` has filled by then). A state the
watermark, a TTL or a timeout does evict must rise for a second whole window: on a busy machine its
batches slow down, the watermark lags (or a batch holds more processing time before a TTL expires it) and
the state swells for a minute or two (the 30-minute clean recording; a transformWithStateInPandas with a
3 s TTL in the clean hour, called unbounded 5 times in an hour before this applied to TTLs), then shrinks.
Bounded needs the whole window, or its second half alone, not above where it was (flat or falling).

A state's rows can stay flat while it still grows: a fixed set of keys whose values keep what they saw (every
row of a key in a ``GroupState`` list, a ``ListState`` appended to without a TTL). Where Spark reports the
state's own size, a size window is kept beside the rows': the HDFS-backed map's current version
(``stateOnCurrentVersionSizeBytes``, exact), a point every ``SIZE_EVERY`` of the growth window so it costs
little; RocksDB's SST bytes (``rocksdbSstFileSize``) only in a batch that compacted
(``rocksdbTotalBytesWrittenByCompaction``): between compactions they hold every version written since (a fixed
set of keys updated each batch piles up SST files, then a compaction drops them: 7 KB to 12 KB in 14 s with the
rows flat, ``kafka_restart``), after one they are close to the live data. A state whose rows are flat and whose
size has risen for a second whole window is unbounded on its size (``basis=size``), and stays so until its size
is flat again. A RocksDB store that compacts less than three times a window is not judged on its size.

The verdict has hysteresis: it changes only when the evidence does (a rising window turns it unbounded, a
flat one bounded, anything in between keeps it), so it never flips back and forth. Each verdict carries
its evidence (rows at the window's start and end, rate, evicted or not, watermark) and a confidence; the
signal, the ``spark_state_unbounded`` gauge behind the alert and the browser's text (``describe``) all
come from it.

The rates keep running sums, so the fit costs O(1) per batch; so do the trend's thirds (running totals,
``GrowthWindow``), and the window's points (a few hundred at most) are read only when the state's scatter
decides the verdict. A window stays in time order whatever the order of the times it is given (a point
earlier than the newest drops the points at or after its time), so this holds for logs concatenated or replayed twice
and for a clock stepped back too; a rise or a first sighting said to be later than the newest batch then
counts from that batch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryRecord, operator_labels
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.alert_spec import WARNING, AlertSpec
from spark_state_observer.model.events import OperatorProgress, QueryProgress
from spark_state_observer.model.fields import HDFS_CURRENT_VERSION_SIZE, ROCKSDB_COMPACTION_WRITTEN, ROCKSDB_SST_BYTES
from spark_state_observer.model.plan_eviction import EvictionLocator
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.growth_window import FLAT, RISING, GrowthWindow, Trend
from spark_state_observer.signals.rule import Context, Rule

WATERMARK = "watermark"  # ``evicted_by`` of a verdict on a state the plan says the watermark evicts by key
SIZE = "size"  # the basis of a verdict on the state's own size in bytes, its rows flat
SIZE_EVERY = 1.0 / 24  # of the growth window: the size window's points are at least this far apart (5 s of 120 s)
# points a size trend needs, one a third: RocksDB's come at compactions, every 4 snapshots (40 batches at Spark's
# default of a snapshot every 10)
SIZE_MIN_POINTS = 3


def describe(attributes: Mapping[str, Any]) -> str:
    """The verdict's evidence in words: the signal carries it, the browser shows it (one text for both)."""
    basis = attributes.get("basis", "rows")
    start, end = attributes.get(f"{basis}_at_start"), attributes.get(f"{basis}_at_end")
    rate = attributes.get(f"{basis}_per_second")
    if start is None or end is None:
        return ""
    span = float(attributes.get("window_seconds") or 0.0)
    moved = f"{basis} {_number(start)} → {_number(end)} in {span:.0f} s" + (f" ({float(rate):+,.1f}/s)" if rate is not None else "")
    if basis == SIZE:  # the rows stayed flat: say so beside the size
        moved = f"state size {_number(start)} → {_number(end)} bytes in {span:.0f} s" + (
            f" ({float(rate):+,.1f} B/s)" if rate is not None else ""
        )
        moved += f" while rows stayed at {_number(attributes.get('rows_at_end') or 0)}"
    removed = float(attributes.get("rows_removed") or 0.0)
    evicted = f"{_number(removed)} rows evicted" if removed else "nothing evicted"
    delay = attributes.get("watermark_delay_seconds")
    # the watermark's distance behind the newest event: the withWatermark delay while it advances, growing while it is stuck
    watermark = (
        f"watermark {float(delay):.0f} s behind the newest event"
        if delay is not None
        else ("watermark" if attributes.get("watermark") else "no watermark")
    )
    if attributes.get("evicted_by") == WATERMARK:  # the plan's state key holds the watermarked event time
        watermark += ", which evicts its state by the event time (the plan says so) and keeps pace"
    return f"{moved}, {evicted}, {watermark}; confidence {attributes.get('confidence', 'medium')}"


def _number(value: Any) -> str:
    return f"{float(value):,.0f}"


OperatorKey = tuple[str, int, str]  # query id, operator index, operator name


class _Operator:
    """One operator's window, verdict so far, and what its watermark and evictions showed since it was first seen."""

    __slots__ = (
        "delay",
        "ever_evicted",
        "first_seen",
        "labels",
        "least_delay",
        "on_size",
        "pending",
        "rising_since",
        "size",
        "size_rising_since",
        "size_trend",
        "unbounded",
        "window",
    )

    def __init__(self, window: GrowthWindow, first_seen: float, labels: Labels) -> None:
        self.window = window
        self.labels = labels  # ``operator_labels`` of its index and name: the key it is kept under
        self.unbounded: bool | None = None
        self.first_seen = first_seen
        self.ever_evicted = False
        self.rising_since: float | None = None  # since when every window has shown a rise
        self.size: GrowthWindow | None = None  # the state's own size in bytes, sampled (``SIZE_EVERY``), where Spark reports it
        self.size_rising_since: float | None = None  # since when every size window has shown a rise
        self.on_size = False  # the verdict is unbounded on the size, the rows flat
        self.delay: float | None = None  # the watermark's distance behind the newest event, latest batch that had both
        self.least_delay: float | None = None  # its least since first seen: the ``withWatermark`` delay, or near it
        self.pending: tuple[QueryProgress, OperatorProgress, float] | None = None  # its latest batch not judged yet
        self.size_trend: Trend | None = None  # the size window's trend at a point taken since the last verdict

    def watch_delay(self, delay: float | None) -> None:
        if delay is not None:
            self.delay = delay
            self.least_delay = delay if self.least_delay is None else min(self.least_delay, delay)

    def keeps_pace(self, slack: float) -> bool:
        """The watermark follows the newest events as closely as it ever did, within ``slack`` seconds: a state
        evicted by it holds a bounded span of event time. A watermark that stopped (an input gone quiet, under
        ``multipleWatermarkPolicy=min``) or falls behind draws away from the newest events."""
        return self.delay is not None and self.least_delay is not None and self.delay - self.least_delay <= slack


class Growth(Rule):
    """Per operator: growth rates, eviction ratio, budget forecasts and the unbounded/bounded verdict.

    ``eviction`` (the plans, ``spark_state_observer.model.plan_eviction``: the event log's, or the live run's for the listener)
    tells an operator whose state the watermark evicts by its key: while that watermark keeps pace, neither its rows
    nor its size rising is growth (its windows or session gaps may be longer than the growth window: a count per
    user and hour fills for an hour). Without it (Spark Connect, progress lines alone, placement off) every operator
    is judged on its trend alone."""

    def __init__(self, settings: Settings, eviction: EvictionLocator | None = None) -> None:
        self.s = settings
        self.eviction = eviction
        self._operators: dict[OperatorKey, _Operator] = {}
        # per query, its operators' states as shared with the runs before and after (``RunState.carried``)
        self._carried: dict[str, dict[tuple[int, str], _Operator]] = {}

    def forget(self, query_id: str) -> None:
        for key in [k for k in self._operators if k[0] == query_id]:
            del self._operators[key]
        self._carried.pop(query_id, None)

    def forget_operator(self, key: OperatorKey) -> None:
        """An operator (name) the query's label budget dropped."""
        self._operators.pop(key, None)
        self._carried.get(key[0], {}).pop(key[1:], None)

    def on_operator(self, ctx: Context, op: OperatorProgress, labels: Labels) -> None:
        if op.rows_total is not None:  # (``operator`` returns at once otherwise)
            assert ctx.progress is not None
            self.operator(ctx.record, ctx.progress, op, ctx.ts, ctx.facts, ctx.evaluate)

    def settle(self, ctx: Context) -> None:
        """Judge the query's operators on their latest batch, where the cadence held it back."""
        for (query_id, _, _), state in self._operators.items():
            if query_id == ctx.record.query_id and state.pending is not None:
                p, op, ts = state.pending
                self._judge(ctx.record, p, op, ts, ctx.facts, state, settling=True)

    def new_run(self, query_id: str, carried: dict[str, Any]) -> None:
        self.carry(query_id, carried)
        for (qid, _, _), state in self._operators.items():
            if qid == query_id:
                state.pending = None  # the batch of a run that ended unseen: not judged in this one

    def carry(self, query_id: str, carried: dict[str, Any]) -> None:
        """Keep ``query_id``'s operator states in ``carried`` (``RunState.carried``): a run in another application
        that takes the query over judges its state's growth over the runs before it too, as one observer of all
        of them (a replay of their logs) does; the state itself outlives the runs in the checkpoint."""
        shared: dict[tuple[int, str], _Operator] = carried.setdefault("growth", {})
        self._carried[query_id] = shared
        for (qid, index, name), state in self._operators.items():
            if qid == query_id:
                shared.setdefault((index, name), state)
        for (index, name), state in shared.items():
            self._operators[(query_id, index, name)] = state

    def operator(
        self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, ts: float, facts: SignalFacts, evaluate: bool = True
    ) -> None:
        """Take one batch of ``op``: its window at once; the rates, forecasts and verdict when ``evaluate`` (the cadence),
        and at the run's end (``settle``) where the cadence held its latest batch back."""
        rows = op.rows_total
        if rows is None:
            return
        key = (record.query_id, op.index, op.name)
        state = self._operators.get(key)
        if state is None:
            window = GrowthWindow(self.s.growth_window_seconds, self.s.growth_min_batches)
            state = self._operators[key] = _Operator(window, ts, operator_labels(op.index, op.name))
            shared = self._carried.get(record.query_id)
            if shared is not None:
                shared[(op.index, op.name)] = state
        removed = op.rows_removed
        state.window.add(ts, rows, op.memory_bytes or 0.0, op.rows_updated or 0.0, removed or 0.0)
        if ts < state.first_seen or (state.rising_since is not None and ts < state.rising_since):
            # time went back (the window dropped what came after): the state was seen, and rose, from here on
            state.first_seen = min(state.first_seen, ts)
            state.rising_since = None if state.rising_since is None else ts
        if removed:
            state.ever_evicted = True
        event_time = p.event_time
        watermark = event_time.get("watermark")
        if watermark is not None and not watermark <= 0:  # (``_watermark_delay`` is None otherwise)
            state.watch_delay(_watermark_delay(p))
        if evaluate or (state.unbounded is None and watermark is not None and self._closing(state, p, op, ts)):
            self._judge(record, p, op, ts, facts, state)
            return
        state.pending = (p, op, ts)
        custom = op.custom
        if HDFS_CURRENT_VERSION_SIZE in custom or (custom.get(ROCKSDB_COMPACTION_WRITTEN) or 0) > 0:
            size_trend = self._size(state, op, ts)  # its window takes a point when one is due (rarely: ``SIZE_EVERY``)
            if size_trend is not None:
                state.size_trend = size_trend  # for the next verdict

    def _judge(
        self,
        record: QueryRecord,
        p: QueryProgress,
        op: OperatorProgress,
        ts: float,
        facts: SignalFacts,
        state: _Operator,
        settling: bool = False,
    ) -> None:
        """The verdict on the operator's window at its batch ``p``: unbounded, bounded, or no change (hysteresis).
        ``settling``: ``p`` was taken already (its size too), and judged now that its run ended."""
        state.pending = None
        window, labels = state.window, state.labels
        watermark, delay = p.watermark is not None, _watermark_delay(p)
        # the rates and forecasts: set with the verdict, every ``evaluate_seconds`` and at the run's end
        rows_rate, bytes_rate, ratio, rows_eta, bytes_eta = window.rates(self.s.state_rows_budget, self.s.state_memory_budget_bytes)
        facts.set_many(
            record,
            labels,
            (
                (catalog.ROWS_GROWTH_RATE, rows_rate),
                (catalog.MEMORY_GROWTH_RATE, bytes_rate),
                (catalog.EVICTION_RATIO, ratio),
                (catalog.ROWS_BUDGET_ETA, rows_eta),
                (catalog.MEMORY_BUDGET_ETA, bytes_eta),
            ),
        )
        trend: Trend | None = None
        if state.unbounded is False:
            # a bounded state changes only on a rising window, and flat or in between reads alike below (falsy,
            # then no change): ask only whether it rises, which rarely needs the scatter or the second half
            unbounded: bool | None = True if window.rising() else None
        else:
            trend = window.trend()
            unbounded = None if trend is None or trend.shape is None else trend.shape == RISING
        state.rising_since = (ts if state.rising_since is None else state.rising_since) if unbounded else None
        rising_for = 0.0 if state.rising_since is None else ts - state.rising_since
        by_watermark = watermark and self._evicted_by_watermark(state, p, op)
        if by_watermark:
            # bounded by construction while the watermark keeps pace, however long its windows (sessions) fill: said
            # once the window can tell anything, whatever its trend
            if state.unbounded is not False and trend is None:
                trend = window.trend()
            unbounded = False if trend is not None else None
        elif (
            unbounded
            and watermark
            and not state.ever_evicted
            and ts - state.first_seen < (state.least_delay or 0.0) + self.s.growth_window_seconds
        ):
            unbounded = None  # a watermarked state still filling its first windows: too early to tell
        elif unbounded and state.ever_evicted and rising_for < self.s.growth_window_seconds:
            # a state that evicts (a watermark, a TTL, a timeout) swells while batches slow down (the watermark
            # lags, more event or processing time is held before eviction): growth only when the rise lasts a
            # second whole window
            unbounded = None
        size_trend = None if settling else self._size(state, op, ts)
        size_trend, state.size_trend = size_trend or state.size_trend, None
        if unbounded is not True and not by_watermark and (state.unbounded is False or unbounded is False or state.on_size):
            # rows flat (or a bounded verdict that no rising window changed): the size decides while it rises, for a
            # second whole window (SST files come and go with compactions)
            rising_for = ts - state.size_rising_since if state.size_rising_since is not None else 0.0
            if size_trend is not None and size_trend.shape == RISING and rising_for >= self.s.growth_window_seconds:
                unbounded, trend = True, size_trend
            elif state.on_size:  # unbounded on its size until its size is flat
                unbounded = False if size_trend is not None and size_trend.shape == FLAT else None
        if unbounded is None or unbounded == state.unbounded:
            if state.unbounded is not None:
                facts.set(record, catalog.STATE_UNBOUNDED, labels, 1.0 if state.unbounded else 0.0)
            return  # hysteresis: only new evidence changes the verdict
        if trend is None:
            trend = window.trend()
        if trend is None:  # never: a verdict comes from a trend
            return
        state.unbounded, state.on_size = unbounded, trend.basis == SIZE
        facts.set(record, catalog.STATE_UNBOUNDED, labels, 1.0 if unbounded else 0.0)
        last = window.points[-1]
        first = next(p for p in window.points if p[0] >= last[0] - trend.span_seconds - 1e-9)  # where the judged span starts
        evidence: dict[str, Any] = {
            "basis": trend.basis,
            "rows_at_start": first[1],
            "rows_at_end": last[1],
            "bytes_at_start": first[2],
            "bytes_at_end": last[2],
            "window_seconds": round(trend.span_seconds, 1),
            "batches": trend.batches,
            "rows_per_second": round(rows_rate, 3),
            "bytes_per_second": round(bytes_rate, 3),
            "evicted": window.removed > 0,
            "rows_removed": window.removed,
            "eviction_ratio": round(ratio, 3),
            "watermark": watermark,
            "watermark_delay_seconds": None if delay is None else round(delay, 1),
            "confidence": self._confidence(trend),
        }
        if by_watermark:
            evidence["evicted_by"] = WATERMARK
        if trend.basis == SIZE:
            evidence.update(
                size_at_start=trend.start,
                size_at_end=trend.end,
                size_per_second=round((trend.end - trend.start) / trend.span_seconds, 3),
            )
        facts.signal(
            kinds.STATE_UNBOUNDED if unbounded else kinds.STATE_BOUNDED,
            record,
            p.run_id,
            ts,
            operator=op.name,
            operator_index=op.index,
            rows=op.rows_total,
            **evidence,
            evidence=describe(evidence),
        )

    def _closing(self, state: _Operator, p: QueryProgress, op: OperatorProgress, ts: float) -> bool:
        """A state the watermark evicts by key, with no verdict yet, whose window spans enough to tell anything:
        its bounded verdict needs only that, so it is judged at every batch until it has one, not at the next
        evaluation (the window's trend can show at one batch and not at the next: the verdict would wait a period more)."""
        points = state.window.points
        return ts - points[0][0] >= self.s.growth_window_seconds * 0.4 and self._evicted_by_watermark(state, p, op)

    def _evicted_by_watermark(self, state: _Operator, p: QueryProgress, op: OperatorProgress) -> bool:
        """The plan says the watermark evicts this operator's state by its key, and the watermark keeps pace (within
        half a growth window of the least delay it had)."""
        if self.eviction is None or not self.eviction(p.query_id, p.run_id, op.index, op.name):
            return False
        return state.keeps_pace(self.s.growth_window_seconds / 2)

    def _size(self, state: _Operator, op: OperatorProgress, ts: float) -> Trend | None:
        """The state's size window, fed a point when one is due: its trend (basis ``size``), or None where Spark
        reports no size or the window cannot tell yet; ``size_rising_since`` follows it as ``rising_since`` does."""
        custom = op.custom
        size = custom.get(HDFS_CURRENT_VERSION_SIZE)
        sampled = size is not None
        if size is None and (custom.get(ROCKSDB_COMPACTION_WRITTEN) or 0) > 0:
            size = custom.get(ROCKSDB_SST_BYTES)  # just compacted: close to the live data
        if size is None or not math.isfinite(size) or size < 0:
            return None
        window = state.size
        if window is None:
            window = state.size = GrowthWindow(self.s.growth_window_seconds, SIZE_MIN_POINTS)
        points = window.points
        if sampled and points and 0.0 <= ts - points[-1][0] < self.s.growth_window_seconds * SIZE_EVERY:
            return None  # judged when a point is added (at once when time went back: the window drops what came after)
        window.add(ts, float(size), 0.0, 0.0, 0.0)
        if state.size_rising_since is not None and ts < state.size_rising_since:
            state.size_rising_since = ts
        trend = window.trend()
        if trend is None:
            return None
        if trend.shape == RISING:
            state.size_rising_since = ts if state.size_rising_since is None else state.size_rising_since
        else:
            state.size_rising_since = None
        return Trend(trend.shape, SIZE, *trend[2:])

    def _confidence(self, trend: Trend) -> str:
        """high: twice the span and batches a verdict needs, on rows; low: on bytes (RocksDB's include caches)."""
        if trend.basis == "bytes":
            return "low"
        if trend.basis == SIZE:
            return "medium"  # a size that rose for two windows; its rows tell nothing
        if trend.span_seconds >= self.s.growth_window_seconds and trend.batches >= 2 * self.s.growth_min_batches:
            return "high"
        return "medium"


def _watermark_delay(p: QueryProgress) -> float | None:
    """The watermark's distance behind the batch's newest event time: its delay (plus up to a trigger)."""
    watermark, newest = p.event_time.get("watermark"), p.event_time.get("max")
    if watermark is None or newest is None or watermark <= 0:
        return None
    return max(0.0, newest - watermark)


ALERTS = (
    AlertSpec(
        "SparkStateUnbounded",
        "state",
        # the signal already asks for growth over its whole window: a long ``for`` on top only delays it past the
        # end of a job shorter than the window plus the watcher's grace, where it can never fire
        "0m",
        WARNING,
        (kinds.STATE_UNBOUNDED,),
        ("state_unbounded",),
        summary="State keeps growing.",
        verdict_text=(("state_unbounded", "State unbounded: {operators}"),),
    ),
    AlertSpec(
        "SparkStateBudgetExhaustionForecast",
        "state",
        "15m",
        WARNING,
        thresholds=("budget_eta_hours",),
        summary="State will reach its budget soon.",
    ),
)
Growth.alerts = ALERTS
