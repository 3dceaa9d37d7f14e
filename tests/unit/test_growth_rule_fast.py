"""The growth rule's per-batch pass (issue 32) against the pass it replaced, on every recorded run.

``Growth.operator`` now reads the window's O(1) rates every batch and its trend only when the answer can
matter: a state already judged bounded asks only whether the window rises (``GrowthWindow.rising``),
which needs no scatter and no second half unless each third is a row above the one before. ``_Reference``
is the pass as it was (the rates and the whole trend every batch, as the removed ``verdict`` built
them). Both are fed every recorded progress event, at the defaults and at a short window with few
batches (so verdicts are reached, kept and changed, bounded and unbounded, many times over), and their
gauges and signals must be equal after every batch.
No recording turns a bounded state unbounded, so each bounded run is also followed by the recorded
unbounded growth, as one operator of one query (times shifted to follow on): the verdict changes back.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from recorded_progress import recorded_runs

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryRecord, operator_labels
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.events import OperatorProgress, QueryProgress
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.growth import Growth, _Operator, _watermark_delay, describe
from spark_state_observer.signals.growth_window import RISING, GrowthWindow


class _Reference(Growth):
    """``Growth.operator`` before issue 32's session 8, as it was."""

    def operator(self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, ts: float, facts: SignalFacts) -> None:
        if op.rows_total is None:
            return
        key = (record.query_id, op.index, op.name)
        state = self._operators.get(key)
        if state is None:
            window = GrowthWindow(self.s.growth_window_seconds, self.s.growth_min_batches)
            state = self._operators[key] = _Operator(window, ts, operator_labels(op.index, op.name))
        state.window.add(ts, op.rows_total, op.memory_bytes or 0.0, op.rows_updated or 0.0, op.rows_removed or 0.0)
        state.ever_evicted = state.ever_evicted or bool(op.rows_removed)
        rows_rate, bytes_rate, ratio, rows_eta, bytes_eta = state.window.rates(self.s.state_rows_budget, self.s.state_memory_budget_bytes)
        trend = state.window.trend()
        labels = operator_labels(op.index, op.name)
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
        watermark, delay = p.watermark is not None, _watermark_delay(p)
        unbounded = None if trend is None or trend.shape is None else trend.shape == RISING
        state.rising_since = (ts if state.rising_since is None else state.rising_since) if unbounded else None
        rising_for = 0.0 if state.rising_since is None else ts - state.rising_since
        if unbounded and watermark and not state.ever_evicted and ts - state.first_seen < (delay or 0.0) + self.s.growth_window_seconds:
            unbounded = None  # a watermarked state still filling its first windows
        elif unbounded and state.ever_evicted and rising_for < self.s.growth_window_seconds:
            unbounded = None
        if unbounded is None or unbounded == state.unbounded:
            if state.unbounded is not None:
                facts.set(record, catalog.STATE_UNBOUNDED, labels, 1.0 if state.unbounded else 0.0)
            return
        window = state.window
        if trend is None:
            return
        state.unbounded = unbounded
        facts.set(record, catalog.STATE_UNBOUNDED, labels, 1.0 if unbounded else 0.0)
        last = window.points[-1]
        first = next(p for p in window.points if p[0] >= last[0] - trend.span_seconds - 1e-9)
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


RECORDED = recorded_runs()
_BOUNDED = ("incidents/clean_busy_90s/run1", "incidents/clean_busy_30min/run1", "snapshot_health/normal/run1", "kafka_restart/run2")
_RISING = "incidents/unbounded_growth/run1"


def _spliced() -> list[tuple[str, list[QueryProgress]]]:
    """Each bounded run, then the rising one continuing its first stateful operator's state."""
    runs = dict(RECORDED)
    rising = [p for p in runs[f"{_RISING}/progress.jsonl"] if p.timestamp is not None]
    out = []
    for name in _BOUNDED:
        before = [p for p in runs[f"{name}/progress.jsonl"] if p.timestamp is not None]
        op = next(o for p in before for o in p.operators if o.rows_total is not None)
        shift = before[-1].timestamp - rising[0].timestamp + 1.0
        after = [
            dataclasses.replace(
                p,
                query_id=before[-1].query_id,
                run_id=before[-1].run_id,
                timestamp=p.timestamp + shift,
                operators=tuple(dataclasses.replace(o, index=op.index, name=op.name) for o in p.operators[:1]),
            )
            for p in rising
        ]
        out.append((f"{name}+{_RISING}", before + after))
    return out


@pytest.mark.parametrize(
    "settings",
    [
        Settings(http_enabled=False),
        Settings(
            http_enabled=False, growth_window_seconds=15.0, growth_min_batches=3, state_rows_budget=1e6, state_memory_budget_bytes=1e9
        ),
    ],
    ids=["defaults", "short_window_with_budgets"],
)
def test_rising_only_when_bounded_equals_the_reference_on_every_recorded_run(settings: Settings) -> None:
    kinds_seen: set[str] = set()
    bounded_batches = turned_unbounded = 0
    for name, events in RECORDED + _spliced():
        fast, reference = Growth(settings), _Reference(settings)
        records: dict[str, QueryRecord] = {}
        for n, p in enumerate(events):
            record = records.setdefault(p.query_id, QueryRecord(p.query_id))
            ts = p.timestamp or float(n)
            for op in p.operators:
                got, want = SignalFacts(), SignalFacts()
                fast.operator(record, p, op, ts, got)
                reference.operator(record, p, op, ts, want)
                assert got.updates == want.updates, (name, n, op.index)
                assert got.signals == want.signals, (name, n, op.index)
                kinds_seen |= {s.kind for s in got.signals}
                turned_unbounded += any(s.kind == kinds.STATE_UNBOUNDED for s in got.signals) and "+" in name
                bounded_batches += any(state.unbounded is False for state in fast._operators.values())
    assert bounded_batches > 100  # the bounded state's path was taken, not only the full trend's
    assert turned_unbounded  # and it turned a bounded verdict unbounded
    if settings.growth_window_seconds == 15.0:
        assert {kinds.STATE_UNBOUNDED, kinds.STATE_BOUNDED} <= kinds_seen  # verdicts changed both ways
