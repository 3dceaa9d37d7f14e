"""Whether a query keeps up: watermark lag, and falling behind (input faster than processing for long).

Per-batch rates of a micro-batch query swing widely on a busy machine (one batch at half the input
rate, the next at twice), and input and processing rates of a query that keeps up differ by a fraction
of a percent over time. So both are averaged over ``falling_behind_window_seconds`` of batches (rows
over the time that produced them: input rows over the trigger intervals, rows over processing time),
and the query falls behind only when the input average stays above ``falling_behind_ratio`` x the
processing average for ``falling_behind_for_seconds`` (the window full); it catches up when that is no
longer so. On the recorded 30-minute clean run of a busy machine (batches of 1-89 s) the 300 s averages
differ by at most 1.2x, and never for 120 s above 1.1x.

A real-time run (``spark_state_observer.signals.real_time``) reads for a whole checkpoint interval per batch: both its rates
are its rows over that interval, equal whether it keeps up or not. It is judged by its backlog at each batch
boundary instead: behind once every batch for ``falling_behind_for_seconds`` ended with more records waiting
than it read (more than an interval's worth: a real-time query that keeps up ends a few records behind), caught
up at the first batch that did not.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryRecord
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.alert_spec import WARNING, AlertSpec
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.real_time import RealTimeBatch
from spark_state_observer.signals.rule import Context, Rule

_MAX_BATCHES = 1000  # per query: a window of fast batches is still bounded (then averaged over the latest 1000)
_ULP_BITS = 1074  # every finite double is an integer multiple of 2**-1074


def _exact(value: float) -> int:
    """``value`` as an integer count of 2**-1074: such sums of doubles are exact, whatever leaves them."""
    numerator, denominator = value.as_integer_ratio()  # the denominator is a power of two
    return numerator << (_ULP_BITS + 1 - denominator.bit_length())


@dataclass
class _Pace:
    # (batch start, input rows, seconds the rows took to arrive, seconds they took to process, and those three
    # as ``_exact`` integers: computed once as the batch enters, subtracted as they were added when it leaves)
    batches: deque[tuple[float, float, float, float, int, int, int]] = field(default_factory=lambda: deque(maxlen=_MAX_BATCHES))
    # The window's sums (rows, arriving, processing), kept as each batch enters and leaves instead of
    # re-summed at every batch (3 x up to 1,000 per event showed in the ingest profile). Exact integers,
    # not floats: a float running sum drifts, and a huge value that enters and leaves wipes out the rest.
    sums: list[int] = field(default_factory=lambda: [0, 0, 0])
    behind: bool = False
    first_at: float | None = None  # the run's first batch with rows: the window is full a window later
    above_since: float | None = None  # since when the averaged input has been above the ratio

    def push(self, start: float, rows: float, arriving: float, processing: float) -> None:
        if len(self.batches) == self.batches.maxlen:
            self.pop()
        exact_rows, exact_arriving, exact_processing = _exact(rows), _exact(arriving), _exact(processing)
        self.batches.append((start, rows, arriving, processing, exact_rows, exact_arriving, exact_processing))
        sums = self.sums
        sums[0] += exact_rows
        sums[1] += exact_arriving
        sums[2] += exact_processing

    def pop(self) -> None:
        batch = self.batches.popleft()
        sums = self.sums
        sums[0] -= batch[4]
        sums[1] -= batch[5]
        sums[2] -= batch[6]

    def back_to(self, start: float) -> None:
        """A batch that starts at ``start``, not after the newest: the batches at or after it leave, newest first, so
        the window stays the seconds up to its newest batch in time order (as ``growth``'s windows do)."""
        batches, sums = self.batches, self.sums
        while batches and start <= batches[-1][0]:
            batch = batches.pop()
            sums[0] -= batch[4]
            sums[1] -= batch[5]
            sums[2] -= batch[6]
        if self.first_at is not None and start < self.first_at:
            self.first_at = start
        if self.above_since is not None and start < self.above_since:
            self.above_since = start


class Pace(Rule):
    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self._queries: dict[str, _Pace] = {}

    def on_batch_end(self, ctx: Context) -> None:
        assert ctx.progress is not None
        self.batch(ctx.record, ctx.progress, ctx.ts, ctx.facts, ctx.real_time)

    def new_run(self, query_id: str, carried: dict[str, Any]) -> None:
        """A new run starts with a clean slate: Spark's rates restart with it."""
        self._queries[query_id] = _Pace()

    def forget(self, query_id: str) -> None:
        self._queries.pop(query_id, None)

    def batch(self, record: QueryRecord, p: QueryProgress, ts: float, facts: SignalFacts, real_time: RealTimeBatch | None = None) -> None:
        q = self._queries.get(record.query_id)
        if q is None:
            q = self._queries[record.query_id] = _Pace()
        wm = p.watermark
        if wm is not None and wm > 0 and p.timestamp is not None:
            facts.set(record, catalog.WATERMARK_LAG, (), max(0.0, p.timestamp - wm))
        if real_time is not None:
            self._real_time(record, p, q, real_time, ts, facts)
            return
        rows, inp, proc = float(p.input_rows or 0), p.input_rows_per_second, p.processed_rows_per_second
        if q.batches and ts <= q.batches[-1][0]:  # time went back (a clock stepped back): the window ends here
            q.back_to(ts)
        if rows > 0 and inp and proc and inp > 0 and proc > 0:
            q.push(ts, rows, rows / inp, rows / proc)
            q.first_at = ts if q.first_at is None else q.first_at
        while q.batches and ts - q.batches[0][0] > self.s.falling_behind_window_seconds:
            q.pop()
        verdict = self._behind(q, ts)
        if verdict is not None:
            above, input_rate, processed_rate = verdict
            q.above_since = (q.above_since if q.above_since is not None else ts) if above else None
            behind = q.above_since is not None and ts - q.above_since >= self.s.falling_behind_for_seconds
            if behind and not q.behind:
                facts.signal(
                    kinds.FALLING_BEHIND,
                    record,
                    p.run_id,
                    ts,
                    input_rows_per_second=round(input_rate, 1),
                    processed_rows_per_second=round(processed_rate, 1),
                    window_seconds=self.s.falling_behind_window_seconds,
                    behind_for_seconds=round(ts - (q.above_since or ts), 1),
                )
            elif not behind and q.behind:
                facts.signal(
                    kinds.CAUGHT_UP,
                    record,
                    p.run_id,
                    ts,
                    input_rows_per_second=round(input_rate, 1),
                    processed_rows_per_second=round(processed_rate, 1),
                )
            q.behind = behind
        facts.set(record, catalog.FALLING_BEHIND, (), 1.0 if q.behind else 0.0)

    def _real_time(self, record: QueryRecord, p: QueryProgress, q: _Pace, rt: RealTimeBatch, ts: float, facts: SignalFacts) -> None:
        """A real-time run's verdict: its backlog at each batch boundary against what the batch read."""
        if rt.backlog is None:
            return
        above = rt.backlog > max(rt.read, 1.0)
        q.above_since = (q.above_since if q.above_since is not None else ts) if above else None
        behind = q.above_since is not None and ts - q.above_since >= self.s.falling_behind_for_seconds
        if behind and not q.behind:
            facts.signal(
                kinds.FALLING_BEHIND,
                record,
                p.run_id,
                ts,
                mode="real_time",
                backlog_records=rt.backlog,
                read_records=rt.read,
                behind_for_seconds=round(ts - (q.above_since or ts), 1),
            )
        elif not behind and q.behind:
            facts.signal(kinds.CAUGHT_UP, record, p.run_id, ts, mode="real_time", backlog_records=rt.backlog, read_records=rt.read)
        q.behind = behind
        facts.set(record, catalog.FALLING_BEHIND, (), 1.0 if q.behind else 0.0)

    def _behind(self, q: _Pace, now: float) -> tuple[bool, float, float] | None:
        """(behind, input rate, processing rate) over the window; ``None`` until the window is full."""
        if not q.batches or q.first_at is None or now - q.first_at < 0.9 * self.s.falling_behind_window_seconds:
            return None
        rows, arriving, processing = q.sums
        if arriving <= 0 or processing <= 0:
            return None
        input_rate, processed_rate = rows / arriving, rows / processing  # exact integers: one rounding, in the division
        return input_rate > self.s.falling_behind_ratio * processed_rate, input_rate, processed_rate


ALERTS = (
    AlertSpec(
        "SparkStreamingQueryFallingBehind",
        "queries",
        "10m",
        WARNING,
        (kinds.FALLING_BEHIND,),
        ("falling_behind",),
        ("falling_behind_ratio", "falling_behind_window_minutes"),
        "Input arrives faster than it is processed.",
        verdict_text=(("falling_behind", "Falling behind: input {input} rows/s, processed {processed} rows/s"),),
    ),
    AlertSpec(
        "SparkStreamingWatermarkLagHigh",
        "queries",
        "15m",
        WARNING,
        thresholds=("watermark_lag_seconds",),
        summary="The watermark lags far behind.",
    ),
)
Pace.alerts = ALERTS
