"""The growth verdict on real recordings of every stateful operator, bounded and unbounded (issue 25).

The recordings (tests/fixtures/incidents/growth_*) are real Spark runs made by ``scripts/record_growth.py``;
each one's truth (bounded or not, per operator) was written by that script from how the pipeline was built
(``scripts/growth_queries.py``). They are replayed as a live observer would have seen them
(``bench/precision.py``) and the verdicts are held to that truth: right, on every operator and provider,
never flipping without new evidence, and said in the same words by the signal, the alert's gauge and the
browser.
"""

from __future__ import annotations

import glob
import os

import pytest

from bench import precision
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import operator_labels
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings
from spark_state_observer.signals.growth import SIZE, describe

GROWTH = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(precision.INCIDENTS, "growth_*", "truth.json")))
# operators whose state cannot be made unbounded: dropDuplicatesWithinWatermark needs a watermark and expires
# every key by it
BOUNDED_ONLY = {"dedupeWithinWatermark"}


@pytest.fixture(scope="module")
def recordings() -> list[precision.Replayed]:
    return precision.corpus(GROWTH)


def entries(rec: precision.Replayed) -> list[dict]:
    return list(rec.truth["growth"])


def test_every_operator_has_a_bounded_and_an_unbounded_recording(recordings: list[precision.Replayed]) -> None:
    """Fails when an operator lacks either shape (where Spark allows both), or a provider has no recording."""
    shapes: dict[str, set[bool]] = {}
    for rec in recordings:
        for g in entries(rec):
            # 3.5 names the session window operator defaultName (growth_session_no_watermark_35): the same operator
            shapes.setdefault(precision.PROGRESS_NAMES_35.get(g["operator"], g["operator"]), set()).add(g["bounded"])
    assert set(shapes) >= {
        "stateStoreSave",
        "dedupe",
        "dedupeWithinWatermark",
        "symmetricHashJoin",
        "sessionWindowStateStoreSaveExec",
        "applyInPandasWithState",
        "transformWithStateInPandasExec",
    }, shapes
    missing = {op: {True, False} - seen for op, seen in shapes.items() if op not in BOUNDED_ONLY and seen != {True, False}}
    assert not missing, f"operators lacking a bounded (True) or unbounded (False) recording: {missing}"
    assert {rec.truth["provider"] for rec in recordings} == {"rocksdb", "hdfs"}
    assert any(len(entries(rec)) > 1 for rec in recordings)  # chained stateful operators


def test_every_verdict_matches_the_truth(recordings: list[precision.Replayed]) -> None:
    wrong = []
    for rec in recordings:
        for g in entries(rec):
            said = [e.kind for e in precision.growth_verdicts(rec, g["operator"])]
            if g.get("grows_in", "rows") == "size" or g.get("bounded_first"):
                # fixed keys whose values grow: flat rows say bounded first, the size once it has shown its rise; a
                # state the watermark evicts: bounded while it keeps pace, unbounded once it stops
                expected = [kinds.STATE_BOUNDED, kinds.STATE_UNBOUNDED]
            else:
                expected = [kinds.STATE_BOUNDED if g["bounded"] else kinds.STATE_UNBOUNDED]
            if said != expected:  # given, right, and said once (or as above): no flip back and forth
                wrong.append((rec.name, g["operator"], said))
    assert not wrong


def test_the_issues_two_shapes(recordings: list[precision.Replayed]) -> None:
    """A session window holding 50 open sessions and a count over 100 fixed keys: flat, so bounded, once."""
    by_name = {r.name: r for r in recordings}
    (session,) = precision.growth_verdicts(by_name["growth_session_open"], "sessionWindowStateStoreSaveExec")
    assert session.kind == kinds.STATE_BOUNDED and session.attributes["rows_at_start"] == session.attributes["rows_at_end"] == 50
    assert session.attributes["evicted"] is False and session.attributes["watermark"] is True
    (keys,) = precision.growth_verdicts(by_name["growth_count_fixed_keys"], "stateStoreSave")
    assert keys.kind == kinds.STATE_BOUNDED and keys.attributes["rows_at_end"] == 100 and keys.attributes["watermark"] is False


def test_unbounded_verdicts_carry_their_evidence(recordings: list[precision.Replayed]) -> None:
    for rec in recordings:
        for g in entries(rec):
            for e in precision.growth_verdicts(rec, g["operator"]):
                a = e.attributes
                assert a["window_seconds"] >= Settings().growth_window_seconds * 0.4 and a["confidence"] in ("high", "medium", "low")
                assert a["evidence"] == describe(a)
                if e.kind == kinds.STATE_UNBOUNDED and a["basis"] == SIZE:  # the rows flat, the size rising
                    assert a["rows_at_end"] == a["rows_at_start"] and a["size_at_end"] > a["size_at_start"] and a["size_per_second"] > 0
                elif e.kind == kinds.STATE_UNBOUNDED:
                    assert a["rows_at_end"] > a["rows_at_start"] and a["rows_per_second"] > 0


def test_signal_gauge_and_browser_say_the_same(recordings: list[precision.Replayed]) -> None:
    """The alert fires on the gauge; the browser reads the signals: both come from the one verdict."""
    pytest.importorskip("streamlit")
    from spark_state_observer.browser.verdict import Facts, state_unbounded

    rec = next(r for r in recordings if not r.clean)
    seen: list = []
    result = replay([precision.recording(r) for r in rec.runs], Settings(http_enabled=False), on_signal=seen.append)
    (record,) = result.observer.tracker.snapshot()
    events = [{"kind": e.kind, "ts": e.timestamp, "run_id": e.run_id, "attributes": e.attributes} for e in seen]
    browser = state_unbounded(Facts(events=events, runs=[]))
    for g in entries(rec):
        (last,) = precision.growth_verdicts(rec, g["operator"])
        labels = next(labels for (spec, labels) in record.signal_gauges if spec is catalog.STATE_UNBOUNDED)
        assert labels == operator_labels(last.attributes["operator_index"], g["operator"])
        assert record.signal_gauges[(catalog.STATE_UNBOUNDED, labels)] == (1.0 if last.kind == kinds.STATE_UNBOUNDED else 0.0)
        assert browser is not None and last.attributes["evidence"] in browser.text


def test_windows_longer_than_the_growth_window_are_bounded_by_their_watermark(recordings: list[precision.Replayed]) -> None:
    """A count per key and 30-minute window (``growth_tumbling_long``): its keys pile up for the whole window, which
    the progress cannot tell from a state growing for ever, so by the rows alone it was called unbounded (as a
    listener, or a replay without the log's plans, still does). The plan says its key holds the watermarked event
    time: bounded while the watermark keeps pace. When the watermark stops (``growth_tumbling_long_stuck``: one of
    two inputs goes quiet under the min policy) nothing can close a window any more: unbounded. A watermark that
    is not in the key (``growth_count_new_keys_watermark``) evicts nothing: unbounded, the plan says so too."""
    by_name = {r.name: r for r in recordings}
    window = Settings().growth_window_seconds

    (long,) = precision.growth_verdicts(by_name["growth_tumbling_long"], "stateStoreSave")
    assert long.kind == kinds.STATE_BOUNDED and long.attributes["evicted_by"] == "watermark" and long.attributes["rows_removed"] == 0
    assert long.attributes["rows_at_end"] > long.attributes["rows_at_start"]  # still filling its first window
    assert "evicts its state by the event time" in long.attributes["evidence"]
    without_plans = precision.load(os.path.join(precision.INCIDENTS, "growth_tumbling_long"), Settings(http_enabled=False, placement="off"))
    assert [e.kind for e in precision.growth_verdicts(without_plans, "stateStoreSave")] == [kinds.STATE_UNBOUNDED]

    bounded, unbounded = precision.growth_verdicts(by_name["growth_tumbling_long_stuck"], "stateStoreSave")
    assert bounded.attributes["evicted_by"] == "watermark" and "evicted_by" not in unbounded.attributes
    assert unbounded.kind == kinds.STATE_UNBOUNDED and unbounded.attributes["watermark_delay_seconds"] > window / 2

    # sessions with a 30-minute gap: open for longer than the run, closed by the watermark once it passes their end
    (sessions,) = precision.growth_verdicts(by_name["growth_session_long_gap"], "sessionWindowStateStoreSaveExec")
    assert sessions.kind == kinds.STATE_BOUNDED and sessions.attributes["evicted_by"] == "watermark"

    # a join keeping half an hour of impressions for their clicks: its state cleanup is by the watermark
    (join,) = precision.growth_verdicts(by_name["growth_join_long_range"], "symmetricHashJoin")
    assert join.kind == kinds.STATE_BOUNDED and join.attributes["evicted_by"] == "watermark"

    (kept,) = precision.growth_verdicts(by_name["growth_count_new_keys_watermark"], "stateStoreSave")
    assert kept.kind == kinds.STATE_UNBOUNDED and kept.attributes["watermark"] is True and "evicted_by" not in kept.attributes
