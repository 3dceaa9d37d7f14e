"""Rows the event-time watermark drops as too late: a query silently discarding part of its input.

Before a stateful operator (aggregation, deduplication, stream-stream join, session window) Spark filters out
the rows whose event time is at or below the watermark and counts them per batch in the operator's
``numRowsDroppedByWatermark``. Nothing fails and the output just misses them, so a query can discard a share
of its input for days. Two causes an operator meets: a producer that lags behind the watermark's delay (a
steady share, every batch), and one record from the future (a wrong clock, a unit mix-up) that moves the
watermark ahead of every later row (nearly all of them, until real time catches up with it; the watermark
then stands ahead of the batch's trigger time, ``spark_streaming_watermark_ahead_seconds``).

A few late rows are the watermark doing its job, and a query whose input is sparse drops one row of two now
and then, so a single batch's share says little: the rule weighs the rows dropped over
``late_rows_window_seconds`` of batches against the input rows of the same batches. ``late_rows_dropped``
when that share reaches ``late_rows_share`` and the rows ``late_rows_min``; ``late_rows_stopped`` when the
window's share falls below half of it (or no row is dropped), so a share hovering at the threshold does not
flap. An aggregation counts its rows after the partial aggregation (one per key, window and partition of
each task), so its count is a lower bound of the source rows dropped; deduplication and joins count rows.
The episode spans restarts: the watermark is kept in the checkpoint, and a restarted query drops alike.
Only queries with an event-time watermark are followed (no other query can drop a row by it).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from observer.metrics import catalog
from observer.metrics.tracker import QueryRecord
from observer.model import signal_kinds as kinds
from observer.model.events import QueryProgress
from observer.settings import Settings
from observer.signals.facts import SignalFacts

_MAX_BATCHES = 1024  # per query: a window of fast batches stays bounded (then weighed over the latest 1,024)
_MAX_COUNT = 2**53  # a count above this is no count Spark made: left out rather than let it swamp the window
_MAX_OPERATORS = 16  # operator names kept per window entry (the attribute naming which operators dropped)


def _count(value: float | None) -> int:
    """A per-batch row count as an integer (0 for a missing, negative, non-finite or absurd one): window sums of
    integers stay exact however many batches enter and leave."""
    if value is None or not math.isfinite(value) or value <= 0 or value > _MAX_COUNT:
        return 0
    return int(value)


@dataclass
class _Window:
    # (trigger time, rows dropped, input rows, names of the operators that dropped rows)
    batches: deque[tuple[float, int, int, tuple[str, ...]]] = field(default_factory=lambda: deque(maxlen=_MAX_BATCHES))
    dropped: int = 0
    rows: int = 0
    dropping: bool = False
    since: float | None = None  # the episode's first signal
    episode_rows: int = 0  # rows dropped since then

    def push(self, ts: float, dropped: int, rows: int, operators: tuple[str, ...]) -> None:
        if len(self.batches) == self.batches.maxlen:
            self.pop()
        self.batches.append((ts, dropped, rows, operators))
        self.dropped += dropped
        self.rows += rows

    def pop(self) -> None:
        _, dropped, rows, _ = self.batches.popleft()
        self.dropped -= dropped
        self.rows -= rows

    def share(self) -> float:
        if self.rows > 0:
            return min(1.0, self.dropped / self.rows)
        return 1.0 if self.dropped > 0 else 0.0

    def operators(self) -> list[str]:
        return sorted({name for *_, names in self.batches for name in names})


class LateRows:
    """Per query with a watermark: the share of its input the watermark dropped, and the episodes of dropping."""

    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self._queries: dict[str, _Window] = {}

    def forget(self, query_id: str) -> None:
        self._queries.pop(query_id, None)

    def batch(self, record: QueryRecord, p: QueryProgress, ts: float, facts: SignalFacts) -> None:
        wm = p.watermark
        q = self._queries.get(record.query_id)
        if wm is None and q is None:
            return  # no event-time watermark: nothing can be dropped by one
        if q is None:
            q = self._queries[record.query_id] = _Window()
        dropped = 0
        names: list[str] = []
        for op in p.operators:
            n = _count(op.rows_dropped_by_watermark)
            if n:
                dropped += n
                if len(names) < _MAX_OPERATORS:
                    names.append(op.name)
        q.push(ts, dropped, _count(p.input_rows), tuple(names))
        while q.batches and ts - q.batches[0][0] > self.s.late_rows_window_seconds:
            q.pop()
        if q.dropping:
            q.episode_rows += dropped
        share = q.share()
        ahead = wm - p.timestamp if wm is not None and wm > 0 and p.timestamp is not None and wm > p.timestamp else 0.0
        if not q.dropping and q.dropped > 0 and q.dropped >= self.s.late_rows_min and share >= self.s.late_rows_share:
            q.dropping, q.since, q.episode_rows = True, ts, q.dropped
            attributes = {
                "rows": float(q.dropped),
                "input_rows": float(q.rows),
                "share": round(share, 4),
                "window_seconds": self.s.late_rows_window_seconds,
                "operators": q.operators(),
                "batch_id": p.batch_id,
            }
            if wm is not None and wm > 0:
                attributes["watermark"] = wm
            if ahead > 0:
                attributes["watermark_ahead_seconds"] = round(ahead, 3)
            facts.signal(kinds.LATE_ROWS_DROPPED, record, p.run_id, ts, **attributes)
        elif q.dropping and (q.dropped == 0 or share < self.s.late_rows_share / 2):
            facts.signal(
                kinds.LATE_ROWS_STOPPED,
                record,
                p.run_id,
                ts,
                rows=float(q.episode_rows),
                share=round(share, 4),
                dropping_seconds=round(ts - (q.since if q.since is not None else ts), 3),
                batch_id=p.batch_id,
            )
            q.dropping, q.since, q.episode_rows = False, None, 0
        facts.set_many(
            record,
            (),
            (
                (catalog.LATE_ROWS_SHARE, share),
                (catalog.LATE_ROWS_DROPPING, 1.0 if q.dropping else 0.0),
                (catalog.WATERMARK_AHEAD, ahead),
            ),
        )
