"""Rows the event-time watermark drops as too late: a query silently discarding part of its input.

Before a stateful operator (aggregation, deduplication, stream-stream join, session window) Spark filters out
the rows whose event time is at or below the watermark and counts them per batch in the operator's
``numRowsDroppedByWatermark``. Nothing fails and the output just misses them, so a query can discard a share
of its input for days. Two causes an operator meets: a producer that lags behind the watermark's delay (a
steady share, every batch), and one record from the future (a wrong clock, a unit mix-up) that moves the
watermark ahead of every later row (all of them are dropped until real time catches up with it; the
watermark then stands ahead of the batch's trigger time, ``spark_streaming_watermark_ahead_seconds``).

What the count means depends on the operator. Deduplication, joins and session windows count the rows they
drop (a session window merges no sessions before the shuffle unless configured to: recorded on 4.3, every late row
counted). An aggregation drops after the partial aggregation, so it counts *groups*, one per key and window of
each task: recorded, 200 late rows a batch over 10 keys counted 10. And the input rows (``numInputRows``) are
every source's rows before any filter, while an operator may be reached by a part of them: a join's filter on
one side's key Spark copies to the other through the equality (recorded: a third of each side reached the join,
its 5 % of late impressions read 0.8 % of the input). A deduplication's or join's own counts are rows, so the
rows that reached it are known: those dropped, those it stored (``numRowsUpdated``) and a deduplication's
duplicates. So four ways in, over ``late_rows_window_seconds`` of batches, each with at least ``late_rows_min``
counted:

- the rows (and groups) dropped reach ``late_rows_share`` of the input rows: a lower bound of the share of
  the input lost;
- the rows deduplications and joins dropped reach ``late_rows_share`` of the rows that reached them (a join
  stores every row it does not drop, but for one its state could already evict: nearly exact);
- the watermark stands more than ``AHEAD_TOLERANCE_SECONDS`` ahead of the trigger time: every row older than
  it is lost, whatever an aggregation's count says;
- an aggregation's late groups are at least ``MOST_GROUPS`` of the groups that reached it (late plus updated):
  most of what arrives is late (a source replaying old data, every producer behind), however few rows a group
  counts.

``late_rows_dropped`` when one holds, ``late_rows_stopped`` when none holds at half its level (no flapping at a
threshold) or no row was dropped in the window. A few late rows are the watermark doing its job, and a sparse
input drops one row of two now and then: hence a window, not a batch. The episode spans restarts (the
checkpoint keeps the watermark). Only queries with an event-time watermark are followed.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryRecord
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.alert_spec import WARNING, AlertSpec
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.model.spark_events import AGGREGATING_OPERATOR_NAMES, ROW_OPERATOR_NAMES
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.rule import Context, Rule

# a watermark this far ahead of the trigger time is an event from the future, not producers' clocks a little
# ahead of the driver's (the watermark is the newest event time minus the delay, so it is ahead only when an
# event came more than the delay early)
AHEAD_TOLERANCE_SECONDS = 60.0
MOST_GROUPS = 0.5  # share of an aggregation's arriving groups that were late: most of its input is late
_MAX_BATCHES = 1024  # per query: a window of fast batches stays bounded (then weighed over the latest 1,024)
_MAX_COUNT = 2**53  # a count above this is no count Spark made: left out rather than let it swamp the window
_MAX_OPERATORS = 16  # operator names kept per window entry (the attribute naming which operators dropped)
DUPLICATES = "numDroppedDuplicateRows"  # a deduplication's custom metric: rows that reached it and were duplicates
# the ``cause`` attribute: which way in
SHARE, OPERATOR_SHARE, AHEAD, GROUPS = "share", "operator_share", "watermark_ahead", "most_groups_late"


def _count(value: float | None) -> int:
    """A per-batch count as an integer (0 for a missing, negative, non-finite or absurd one): window sums of
    integers stay exact however many batches enter and leave."""
    if value is None or not math.isfinite(value) or value <= 0 or value > _MAX_COUNT:
        return 0
    return int(value)


Entry = tuple[float, int, int, int, int, int, int, int, tuple[str, ...]]


@dataclass
class _Window:
    # (trigger time, counted dropped, dropped where the input count is known, input rows, an aggregation's late
    # groups, its arriving groups, the rows a deduplication or join dropped, the rows that reached it, operators)
    batches: deque[Entry] = field(default_factory=lambda: deque(maxlen=_MAX_BATCHES))
    # dropped, dropped of known input, rows, late groups, arriving groups, operators' late rows, their arriving rows
    sums: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0, 0, 0])
    dropping: bool = False
    exported: tuple[float, float, float] | None = None  # the gauges' values last set: unchanged ones are not set again
    exported_to: QueryRecord | None = None  # on that record (a query the tracker forgot and admitted again has a new one)
    since: float | None = None  # the episode's first signal
    episode_rows: int = 0  # counted dropped since then

    def push(self, entry: Entry) -> None:
        if len(self.batches) == self.batches.maxlen:
            self.pop()
        self.batches.append(entry)
        sums = self.sums  # the seven counts, in place (integers: exact in any order)
        sums[0] += entry[1]
        sums[1] += entry[2]
        sums[2] += entry[3]
        sums[3] += entry[4]
        sums[4] += entry[5]
        sums[5] += entry[6]
        sums[6] += entry[7]

    def pop(self) -> None:
        self._take(self.batches.popleft())

    def _take(self, entry: Entry) -> None:
        sums = self.sums
        sums[0] -= entry[1]
        sums[1] -= entry[2]
        sums[2] -= entry[3]
        sums[3] -= entry[4]
        sums[4] -= entry[5]
        sums[5] -= entry[6]
        sums[6] -= entry[7]

    def back_to(self, ts: float) -> None:
        """A batch at ``ts``, not after the newest (logs concatenated or replayed twice, a restart repeating the times
        before it, a clock stepped back): the batches at or after it leave, newest first, so the window stays the
        seconds up to its newest batch in time order (as ``growth``'s windows do) rather than hold every copy."""
        while self.batches and ts <= self.batches[-1][0]:
            self._take(self.batches.pop())
        if self.since is not None and ts < self.since:
            self.since = ts

    def share(self) -> float:
        """Dropped over input rows, over the batches whose input count is known (0 when none is)."""
        known, rows = self.sums[1], self.sums[2]
        return min(1.0, known / rows) if rows > 0 else 0.0

    def operator_share(self) -> float:
        """The rows deduplications and joins dropped over the rows that reached them (0 when none did)."""
        late, arriving = self.sums[5], self.sums[6]
        return min(1.0, late / arriving) if arriving > 0 else 0.0

    def groups_share(self) -> float:
        late, arriving = self.sums[3], self.sums[4]
        return late / arriving if arriving > 0 else 0.0

    def operators(self) -> list[str]:
        return sorted({name for *_, names in self.batches for name in names})


class LateRows(Rule):
    """Per query with a watermark: the share of its input the watermark dropped, and the episodes of dropping."""

    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self._queries: dict[str, _Window] = {}

    def on_batch_end(self, ctx: Context) -> None:
        assert ctx.progress is not None
        self.batch(ctx.record, ctx.progress, ctx.ts, ctx.facts)

    def forget(self, query_id: str) -> None:
        self._queries.pop(query_id, None)

    def _cause(self, q: _Window, ahead: float, level: float) -> str | None:
        """Which way in holds at ``level`` (1 to begin, a half to last), or None."""
        if q.sums[0] == 0 or q.sums[0] < self.s.late_rows_min * level:
            return None
        if ahead > AHEAD_TOLERANCE_SECONDS:
            return AHEAD
        if q.share() >= self.s.late_rows_share * level:
            return SHARE
        if q.operator_share() >= self.s.late_rows_share * level:
            return OPERATOR_SHARE
        if q.groups_share() >= MOST_GROUPS * level:
            return GROUPS
        return None

    def batch(self, record: QueryRecord, p: QueryProgress, ts: float, facts: SignalFacts) -> None:
        wm = p.watermark
        q = self._queries.get(record.query_id)
        if wm is None and q is None:
            return  # no event-time watermark: nothing can be dropped by one
        if q is None:
            q = self._queries[record.query_id] = _Window()
        dropped = late_groups = arriving_groups = late_rows = arriving_rows = 0
        names: list[str] = []
        for op in p.operators:
            n = _count(op.rows_dropped_by_watermark) if op.rows_dropped_by_watermark else 0  # (0 and None count 0)
            if op.name in AGGREGATING_OPERATOR_NAMES:
                late_groups += n
                arriving_groups += n + _count(op.rows_updated)
            elif op.name in ROW_OPERATOR_NAMES and op.rows_updated is not None:
                # the rows that reached it: dropped, stored (and a deduplication's duplicates); without a count of
                # those stored it stays out (its dropped rows would read as all it was sent)
                late_rows += n
                arriving_rows += n + _count(op.rows_updated) + _count(op.custom.get(DUPLICATES))
            if n:
                dropped += n
                if len(names) < _MAX_OPERATORS:
                    names.append(op.name)
        rows = _count(p.input_rows)
        if q.batches and ts <= q.batches[-1][0]:
            q.back_to(ts)
        # rows were dropped, so rows came in: an input count of 0 is no count (Spark 3.5 gives up counting a
        # query whose sources' plans it cannot match, a union of a rate and a file source on 105 of 108 batches
        # recorded) and the batch stays out of the share rather than make it 100 %
        known = dropped if rows > 0 else 0
        q.push((ts, dropped, known, rows, late_groups, arriving_groups, late_rows, arriving_rows, tuple(names)))
        while q.batches and ts - q.batches[0][0] > self.s.late_rows_window_seconds:
            q.pop()
        if q.dropping:
            q.episode_rows += dropped
        ahead = wm - p.timestamp if wm is not None and wm > 0 and p.timestamp is not None and wm > p.timestamp else 0.0
        share = q.share()
        operator_share = q.operator_share()
        if not q.dropping:
            cause = self._cause(q, ahead, 1.0)
            if cause is not None:
                self._begin(q, record, p, ts, cause, share, operator_share, ahead, facts)
        elif self._cause(q, ahead, 0.5) is None:
            facts.signal(
                kinds.LATE_ROWS_STOPPED,
                record,
                p.run_id,
                ts,
                rows=float(q.episode_rows),
                share=round(share, 4),
                operator_share=round(operator_share, 4),
                dropping_seconds=round(ts - (q.since if q.since is not None else ts), 3),
                batch_id=p.batch_id,
            )
            q.dropping, q.since, q.episode_rows = False, None, 0
        # the gauge: the larger share, the one nearer the share of the input lost
        values = (max(share, operator_share), 1.0 if q.dropping else 0.0, ahead)
        if values != q.exported or q.exported_to is not record:  # most batches of most queries: 0, 0, 0 again
            q.exported, q.exported_to = values, record
            facts.set_many(
                record,
                (),
                ((catalog.LATE_ROWS_SHARE, values[0]), (catalog.LATE_ROWS_DROPPING, values[1]), (catalog.WATERMARK_AHEAD, ahead)),
            )

    def _begin(
        self,
        q: _Window,
        record: QueryRecord,
        p: QueryProgress,
        ts: float,
        cause: str,
        share: float,
        operator_share: float,
        ahead: float,
        facts: SignalFacts,
    ) -> None:
        q.dropping, q.since, q.episode_rows = True, ts, q.sums[0]
        attributes = {
            "cause": cause,
            "rows": float(q.sums[0]),
            "input_rows": float(q.sums[2]),
            "share": round(share, 4),
            "window_seconds": self.s.late_rows_window_seconds,
            "operators": q.operators(),
            "batch_id": p.batch_id,
        }
        if q.sums[6]:  # a deduplication's or join's: over the rows that reached it
            attributes["operator_share"] = round(operator_share, 4)
            attributes["operator_input_rows"] = float(q.sums[6])
        if q.sums[4]:
            attributes["late_groups_share"] = round(q.groups_share(), 4)  # an aggregation's: counted in groups
        if p.watermark is not None and p.watermark > 0:
            attributes["watermark"] = p.watermark
        if ahead > 0:
            attributes["watermark_ahead_seconds"] = round(ahead, 3)
        facts.signal(kinds.LATE_ROWS_DROPPED, record, p.run_id, ts, **attributes)


ALERTS = (
    AlertSpec(
        "SparkStreamingLateRowsDropped",
        "queries",
        "0m",
        WARNING,
        (kinds.LATE_ROWS_DROPPED,),
        ("late_rows",),
        summary="The watermark drops input rows as too late.",
        verdict_text=(
            ("late_rows", "Dropping late rows: the watermark drops input{by} as too late since {since}"),
            (
                "late_rows.stopped",
                "Dropped late rows: from {since} the watermark dropped input{by} as too late; the query stopped at {ended}",
            ),
        ),
    ),
)
LateRows.alerts = ALERTS
