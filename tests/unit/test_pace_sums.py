"""The falling-behind rule keeps its window's sums as batches enter and leave: its decisions are those of
re-summing the window at every batch (the rule as it was), on every recorded fixture.

The rule is run through replay (the real pipeline) with the rule as it was beside it: at every batch both
must agree whether the averaged input is above the ratio, and give the same rates (to the 0.1 the
signals round them to). With the default ratio the recorded runs never fall behind, and only the
30-minute run fills the default window, so the runs are judged again at ratios that put the averages on
both sides (and close to it) and with a 20 s window, which the recordings of more than a few batches fill.
"""

from __future__ import annotations

import dataclasses
import glob
import math
import os
from typing import Any

import pytest

from bench.precision import recording, run_dirs
from conftest import FIXTURES
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings
from spark_state_observer.signals import pace
from spark_state_observer.signals.pace import Pace, _Pace

FOLDERS = sorted(
    {
        os.path.dirname(run)
        for run in glob.glob(os.path.join(FIXTURES, "**", "run*"), recursive=True)
        if os.path.isdir(run) and (os.path.isdir(os.path.join(run, "eventlog")) or glob.glob(os.path.join(run, "progress.jsonl*")))
    }
)


def _resummed(q: _Pace, now: float, settings: Settings) -> tuple[bool, float, float] | None:
    """The rule as it was: the window re-summed at every batch."""
    if not q.batches or q.first_at is None or now - q.first_at < 0.9 * settings.falling_behind_window_seconds:
        return None
    rows = sum(b[1] for b in q.batches)
    arriving, processing = sum(b[2] for b in q.batches), sum(b[3] for b in q.batches)
    if arriving <= 0 or processing <= 0:
        return None
    input_rate, processed_rate = rows / arriving, rows / processing
    return input_rate > settings.falling_behind_ratio * processed_rate, input_rate, processed_rate


def _judged(
    folder: str, ratios: tuple[float, ...], monkeypatch: pytest.MonkeyPatch, window: float | None = None
) -> dict[float, list[tuple[bool, bool]]]:
    """Replay a recorded folder's runs once; at every batch and for each ratio, (new decision, old decision) where the
    window was full. The window's sums do not depend on the ratio (only the decision does), so one replay judges
    every ratio on the same windows; the replay's own verdicts are those of the first ratio."""
    settings = Settings(
        http_enabled=False, falling_behind_ratio=ratios[0], falling_behind_window_seconds=window or Settings().falling_behind_window_seconds
    )
    decisions: dict[float, list[tuple[bool, bool]]] = {ratio: [] for ratio in ratios}
    kept = Pace._behind

    def both(self: Pace, q: _Pace, now: float) -> tuple[bool, float, float] | None:
        own = self.s
        try:
            for ratio in ratios:
                self.s = dataclasses.replace(own, falling_behind_ratio=ratio)
                verdict, before = kept(self, q, now), _resummed(q, now, self.s)
                assert (verdict is None) == (before is None), (folder, now)
                if verdict is not None and before is not None:
                    assert verdict[0] == before[0], (folder, ratio, now, verdict, before)
                    for new, old in zip(verdict[1:], before[1:]):
                        assert math.isclose(new, old, rel_tol=1e-12) and round(new, 1) == round(old, 1), (folder, now, verdict, before)
                    decisions[ratio].append((verdict[0], before[0]))
        finally:
            self.s = own
        return kept(self, q, now)

    monkeypatch.setattr(Pace, "_behind", both)
    replay([recording(run) for run in run_dirs(folder)], settings)
    monkeypatch.undo()
    return decisions


RATIOS = (Settings().falling_behind_ratio, 1.0, 0.99, 1.01)
_JUDGED: dict[tuple[str, float | None], dict[float, list[tuple[bool, bool]]]] = {}


def _every_ratio(folder: str, window: float | None, monkeypatch: pytest.MonkeyPatch) -> dict[float, list[tuple[bool, bool]]]:
    """``_judged`` at every ratio, once per folder and window in a test process (a replay is deterministic; the
    short-window test reads the decisions the per-folder tests made, or makes them)."""
    if (folder, window) not in _JUDGED:
        _JUDGED[folder, window] = _judged(folder, RATIOS, monkeypatch, window)
    return _JUDGED[folder, window]


def test_every_recorded_fixture_is_judged() -> None:
    assert len(FOLDERS) >= 20 and any("clean_busy_30min" in f for f in FOLDERS)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: os.path.relpath(f, FIXTURES))
def test_running_sums_decide_as_the_resummed_window(folder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for window in (None, 20.0):
        _every_ratio(folder, window, monkeypatch)


def test_the_busy_run_puts_the_averages_on_both_sides_of_the_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above is not vacuous: on the 30-minute busy run the window is full for most batches
    and, at a ratio of 1, the averaged input is sometimes above the processing and sometimes not."""
    decisions = _judged(os.path.join(FIXTURES, "incidents", "clean_busy_30min"), (1.0,), monkeypatch)[1.0]
    assert len(decisions) >= 10
    assert {new for new, _ in decisions} == {True, False}


def test_a_short_window_is_full_on_several_recordings(monkeypatch: pytest.MonkeyPatch) -> None:
    """(The failure recordings end after a batch or two: their window never fills.)"""
    judged = {folder: _every_ratio(folder, 20.0, monkeypatch)[1.0] for folder in FOLDERS}
    assert sum(len(d) >= 5 for d in judged.values()) >= 6, {os.path.basename(f): len(d) for f, d in judged.items()}
    assert sum(map(len, judged.values())) >= 200
    assert {new for d in judged.values() for new, _ in d} == {True, False}


def test_sums_stay_exact_when_a_huge_batch_enters_and_leaves() -> None:
    """A float running sum would lose the small batches to a huge one that entered and left; these do not."""
    q = _Pace()
    q.push(0.0, 1e300, 1e300, 1e300)
    for t in range(1, 4):
        q.push(float(t), 3.0, 0.1, 0.2)
    q.pop()
    assert [s / (1 << pace._ULP_BITS) for s in q.sums] == [9.0, math.fsum([0.1] * 3), math.fsum([0.2] * 3)]


def test_a_full_window_drops_its_oldest_from_the_sums() -> None:
    q = _Pace()
    for t in range(pace._MAX_BATCHES + 5):
        q.push(float(t), float(t) + 0.1 * (t % 3), 1.0, 2.0)
    kept: Any = list(q.batches)
    assert len(kept) == pace._MAX_BATCHES
    assert [s / (1 << pace._ULP_BITS) for s in q.sums] == [math.fsum(b[1] for b in kept), float(len(kept)), 2.0 * len(kept)]
    # each batch's exact amounts, kept as it entered and subtracted as it left: the window's sums re-summed
    assert q.sums == [sum(pace._exact(b[i]) for b in kept) for i in (1, 2, 3)]
