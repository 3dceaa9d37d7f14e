"""Rows dropped as late by the watermark, on recorded runs (scripts/record_incidents.py ``late_*``, real PySpark 4.3).

``late_future_record``: a windowed count whose watermark a row two hours in the future moved ahead of every later
row (the aggregation then counts 10 late *groups* a batch for 200 late rows). ``late_lagging_producer``: 5 % of a
deduplication's rows 60 s late against a 10 s delay. ``late_within_delay``: the same, 5 s late: nothing dropped.
``late_lagging_join``: the same lag on a stream-stream join's impressions (clicks filtered on the key, watermarks on
both sides); ``late_lagging_session``: on a session window over 100 keys. ``late_within_delay_join``,
``late_within_delay_session``: their twins 5 s late, nothing dropped.
"""

from __future__ import annotations

import io
import json
import os
import time
from typing import Any

import pytest

from bench import precision
from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.metrics import catalog
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.parse import parse_timestamp
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

FUTURE = os.path.join(precision.INCIDENTS, "late_future_record")
LAGGING = os.path.join(precision.INCIDENTS, "late_lagging_producer")
WITHIN = os.path.join(precision.INCIDENTS, "late_within_delay")
JOIN = os.path.join(precision.INCIDENTS, "late_lagging_join")
JOIN_WITHIN = os.path.join(precision.INCIDENTS, "late_within_delay_join")
SESSION = os.path.join(precision.INCIDENTS, "late_lagging_session")
SESSION_WITHIN = os.path.join(precision.INCIDENTS, "late_within_delay_session")
LATE_KINDS = (kinds.LATE_ROWS_DROPPED, kinds.LATE_ROWS_STOPPED)


def truth(scenario: str) -> dict[str, Any]:
    with open(os.path.join(scenario, "truth.json")) as f:
        return json.load(f)


def said(paths: list[str]) -> tuple[list[Any], Any]:
    signals: list = []
    result = replay(paths, Settings(http_enabled=False, placement="off"), on_signal=signals.append)
    (record,) = result.observer.tracker.snapshot()
    return [s for s in signals if s.kind in LATE_KINDS], record


def recorded(scenario: str) -> list[str]:
    return [precision.recording(r) for r in precision.run_dirs(scenario)]


def progress(scenario: str) -> list[dict[str, Any]]:
    with io.BufferedReader(open_decompressed(os.path.join(scenario, "run1", "progress.jsonl.zstd"))) as f:
        return [json.loads(line) for line in f if line.strip()]


def gauge(record: Any, spec: Any) -> float | None:
    return record.signal_gauges.get((spec, ()))


def test_a_record_from_the_future_is_found_at_the_first_batch_it_costs_by_the_watermark_ahead() -> None:
    """The aggregation's count (10 groups a batch, 0.2 % of the window's input rows then) would take six batches to
    reach the share, and at a higher input rate never: the watermark two hours ahead of the trigger time says it at
    the first batch that drops a row."""
    late = truth(FUTURE)["late_rows"][0]
    signals, record = said(recorded(FUTURE))
    (found,) = signals
    assert found.kind == kinds.LATE_ROWS_DROPPED and found.timestamp == late["from"]
    assert found.attributes["batch_id"] == late["first_batch_id"] and found.attributes["cause"] == "watermark_ahead"
    assert found.attributes["watermark_ahead_seconds"] == pytest.approx(late["watermark_ahead_seconds"], abs=0.01)
    assert found.attributes["operators"] == late["operators"] == ["stateStoreSave"]
    assert found.attributes["share"] < 0.01  # the groups counted: far below the rows lost
    assert gauge(record, catalog.LATE_ROWS_DROPPING) == 1.0 and gauge(record, catalog.WATERMARK_AHEAD) > 7000


def test_the_same_aggregation_replaying_old_rows_at_a_hundred_times_the_rate_is_found_by_its_late_groups(tmp_path) -> None:
    """The recorded progress with every batch's input rows a hundred times as many (the groups the aggregation
    counts stay as recorded) and its trigger times three hours later (the watermark no longer ahead of them: a
    source replaying old rows). The share of input rows stays below 1 %; most groups reaching the aggregation are
    late, so the episode is found, once, after the first batch that drops."""
    lines = []
    for p in progress(FUTURE):
        p["numInputRows"] = p["numInputRows"] * 100
        ts = parse_timestamp(p["timestamp"]) + 3 * 3600
        p["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(round(ts * 1000)) % 1000:03d}Z"
        lines.append(json.dumps(p))
    path = tmp_path / "progress.jsonl"
    path.write_text("\n".join(lines) + "\n")
    signals, record = said([str(path)])
    (found,) = signals
    assert found.attributes["cause"] == "most_groups_late" and "watermark_ahead_seconds" not in found.attributes
    assert found.attributes["share"] < 0.01 and found.attributes["late_groups_share"] >= 0.5
    first = truth(FUTURE)["late_rows"][0]["first_batch_id"]
    assert first < found.attributes["batch_id"] <= first + 15
    assert gauge(record, catalog.WATERMARK_AHEAD) == 0.0


def test_a_lagging_producer_is_found_at_the_first_batch_that_drops_its_rows() -> None:
    late = truth(LAGGING)["late_rows"][0]
    signals, record = said(recorded(LAGGING))
    (found,) = signals
    assert found.timestamp == late["from"] and found.attributes["batch_id"] == late["first_batch_id"]
    assert found.attributes["cause"] == "share" and found.attributes["operators"] == ["dedupe"]
    assert found.attributes["share"] >= 0.01 and "watermark_ahead_seconds" not in found.attributes
    assert gauge(record, catalog.LATE_ROWS_SHARE) == pytest.approx(0.05, abs=0.005)  # 10 of 200 rows a batch


def test_rows_late_within_the_watermark_delay_are_no_incident() -> None:
    assert truth(WITHIN)["clean"]
    signals, record = said(recorded(WITHIN))
    assert signals == []
    assert gauge(record, catalog.LATE_ROWS_SHARE) == 0.0 and gauge(record, catalog.LATE_ROWS_DROPPING) == 0.0
    assert gauge(record, catalog.WATERMARK_AHEAD) == 0.0


@pytest.mark.parametrize("value", [float("nan"), -5, 1e300, "many", True, None])
def test_a_count_that_is_no_count_is_left_out(tmp_path, value: Any) -> None:
    """The lagging producer's counts replaced by values no Spark writes: no signal from them, nothing raised."""
    lines = []
    for p in progress(LAGGING):
        for op in p["stateOperators"]:
            op["numRowsDroppedByWatermark"] = value
        lines.append(json.dumps(p, allow_nan=True))
    path = tmp_path / "progress.jsonl"
    path.write_text("\n".join(lines) + "\n")
    signals, record = said([str(path)])
    assert signals == [] and gauge(record, catalog.LATE_ROWS_DROPPING) == 0.0


def test_a_batch_spark_3_5_counted_no_input_for_stays_out_of_the_share() -> None:
    """``late_future_record_35`` (PySpark 3.5.8): Spark 3.5 counts no input rows for a query over a rate and a file
    source on most batches (it cannot match the sources' plans), yet the watermark drops rows there: rows came in,
    so that 0 is no count. Taken as one, the share of the input dropped read 100 % at the run's end (and 10 late
    rows in ten minutes of such batches would say `late_rows_dropped`, cause share, at any real rate). Now the
    share is over the batches whose input was counted, as this test computes it from the recorded progress."""
    scenario = os.path.join(precision.INCIDENTS, "late_future_record_35")
    rows = [p.get("progress", p) for p in progress(scenario)]
    uncounted = [p for p in rows if p["numInputRows"] == 0 and any(o.get("numRowsDroppedByWatermark", 0) > 0 for o in p["stateOperators"])]
    assert len(uncounted) > 50  # the recording shows the miscount this is about
    signals, record = said(recorded(scenario))
    dropped = [s for s in signals if s.kind == kinds.LATE_ROWS_DROPPED]
    assert len(dropped) == 1 and dropped[0].attributes["cause"] == "watermark_ahead"  # still found, by the watermark
    end = parse_timestamp(rows[-1]["timestamp"])
    window = [p for p in rows if end - parse_timestamp(p["timestamp"]) < Settings().late_rows_window_seconds and p["numInputRows"] > 0]
    counted = sum(o.get("numRowsDroppedByWatermark", 0) for p in window for o in p["stateOperators"])
    want = counted / sum(p["numInputRows"] for p in window) if window else 0.0
    assert gauge(record, catalog.LATE_ROWS_SHARE) == pytest.approx(want, abs=1e-3)
    assert gauge(record, catalog.LATE_ROWS_SHARE) < 1.0


def _dropped(p: dict[str, Any]) -> int:
    return sum(int(o.get("numRowsDroppedByWatermark", 0)) for o in p["stateOperators"])


def _windows(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each batch with the batches of the window that ends at it (``late_rows_window_seconds``)."""
    window = Settings().late_rows_window_seconds
    out = []
    for i, p in enumerate(rows):
        end = parse_timestamp(p["timestamp"])
        out.append((p, [q for q in rows[: i + 1] if end - parse_timestamp(q["timestamp"]) <= window]))
    return out


def _share(within: list[dict[str, Any]], part: Any) -> float:
    total = sum(map(part, within))
    return sum(map(_dropped, within)) / total if total else 0.0


def _reached(p: dict[str, Any]) -> int:
    """The rows that reached a join: those it dropped and those it stored."""
    return _dropped(p) + sum(int(o["numRowsUpdated"]) for o in p["stateOperators"])


def _first_reaching(rows: list[dict[str, Any]], share: float, part: Any) -> dict[str, Any]:
    """The first batch at which the window's dropped rows reach ``share`` of ``part`` (a batch's denominator)."""
    for p, within in _windows(rows):
        if sum(map(_dropped, within)) >= Settings().late_rows_min and _share(within, part) >= share:
            return p
    raise AssertionError("never reached")


def test_a_join_whose_impressions_lag_is_found_by_the_rows_that_reached_the_join() -> None:
    """The join drops exactly the late impressions that reach it: a third of them, Spark having copied the clicks'
    filter (``value % 3 == 0``) to the impressions through the key's equality, so the rows dropped stay below 1 % of
    the input rows (both sources', before the filter) in every window of the run: by them alone it was missed. Of
    the rows that reached the join (dropped plus stored) they are over 1 %: found, by that share, at the first batch
    whose window holds 1 % of them (the run's first batches, the startup's backlog read before any watermark, are in
    the window and dilute it)."""
    late = truth(JOIN)["late_rows"][0]
    assert late["batches_dropping_exactly_the_late_rows_reaching_the_join"] == late["batches_from_first_drop"]
    rows = progress(JOIN)
    assert all(_share(within, lambda p: p["numInputRows"]) < 0.01 for _, within in _windows(rows))  # never the policy's 1 %
    due = _first_reaching(rows, 0.01, _reached)
    signals, record = said(recorded(JOIN))
    (found,) = signals
    assert found.kind == kinds.LATE_ROWS_DROPPED and found.attributes["cause"] == "operator_share"
    assert found.attributes["batch_id"] == due["batchId"] and found.timestamp == parse_timestamp(due["timestamp"])
    assert late["from"] <= found.timestamp <= late["until"]
    assert found.attributes["operators"] == late["operators"] == ["symmetricHashJoin"]
    assert found.attributes["share"] < 0.01 <= found.attributes["operator_share"]
    # the gauge: the larger share of the window at the run's end (of the rows that reached the join; 5 % of the
    # third of the impressions that reach it, over those and a third of the clicks, is 2.5 % once past the startup)
    _, last = _windows(rows)[-1]
    assert gauge(record, catalog.LATE_ROWS_SHARE) == pytest.approx(_share(last, _reached), abs=1e-4)
    assert 0.01 < _share(last, _reached) < 0.025
    assert gauge(record, catalog.LATE_ROWS_DROPPING) == 1.0


def test_a_join_whose_impressions_lag_within_the_delay_is_no_incident() -> None:
    rows = progress(JOIN_WITHIN)
    assert truth(JOIN_WITHIN)["clean"] and all(_dropped(p) == 0 for p in rows) and all(p["stateOperators"] for p in rows)
    assert sum(p["numInputRows"] for p in rows) > 10_000  # it ran, and joined
    signals, record = said(recorded(JOIN_WITHIN))
    assert signals == []
    assert gauge(record, catalog.LATE_ROWS_SHARE) == 0.0 and gauge(record, catalog.LATE_ROWS_DROPPING) == 0.0


def test_a_session_window_counts_its_late_rows_and_is_found_by_their_share_of_the_input() -> None:
    """Spark 4.3 merges no sessions before the shuffle by default: the session window dropped and counted every late
    row sent (5 % of the input, over the 5 keys the lagging producer owns) against the sessions it updated (95 a
    batch), so the share of the input rows finds it, at the first batch whose window holds 1 % of them; its count
    is not weighed as an aggregation's groups (no ``late_groups_share``)."""
    late = truth(SESSION)["late_rows"][0]
    assert late["batches_dropping_exactly_the_late_rows_sent"] == late["batches_from_first_drop"]
    rows = progress(SESSION)
    due = _first_reaching(rows, 0.01, lambda p: p["numInputRows"])
    signals, record = said(recorded(SESSION))
    (found,) = signals
    assert found.kind == kinds.LATE_ROWS_DROPPED and found.attributes["cause"] == "share"
    assert found.attributes["batch_id"] == due["batchId"] and found.timestamp == parse_timestamp(due["timestamp"])
    assert late["from"] <= found.timestamp <= late["until"]
    assert found.attributes["operators"] == late["operators"] == ["sessionWindowStateStoreSaveExec"]
    assert "late_groups_share" not in found.attributes and "operator_share" not in found.attributes
    _, last = _windows(rows)[-1]  # 5 % of the input once past the startup's backlog
    assert gauge(record, catalog.LATE_ROWS_SHARE) == pytest.approx(_share(last, lambda p: p["numInputRows"]), abs=1e-4)
    assert 0.01 < gauge(record, catalog.LATE_ROWS_SHARE) < 0.05


def test_a_session_window_at_a_hundred_times_the_rate_with_a_trickle_of_late_rows_is_no_incident(tmp_path) -> None:
    """The recorded session window with a hundred times the input rows and ten times the late rows (0.5 % late: a
    trickle by the 1 % policy) against the same sessions updated (95 a batch: 100 keys, whatever the rate). Its late
    count is rows: weighed as an aggregation's late groups it read most arriving "groups" late (100 late rows against
    95 sessions a batch) and said ``late_rows_dropped``."""
    lines, late, arriving = [], 0, 0
    for p in progress(SESSION):
        p["numInputRows"] *= 100
        for o in p["stateOperators"]:
            o["numRowsDroppedByWatermark"] = o.get("numRowsDroppedByWatermark", 0) * 10
            late += o["numRowsDroppedByWatermark"]
            arriving += o["numRowsDroppedByWatermark"] + o["numRowsUpdated"]
        lines.append(json.dumps(p))
    assert late / arriving > 0.5  # what the groups rule would have read
    path = tmp_path / "progress.jsonl"
    path.write_text("\n".join(lines) + "\n")
    signals, record = said([str(path)])
    assert signals == []
    assert 0 < gauge(record, catalog.LATE_ROWS_SHARE) <= 0.005


def test_a_session_window_whose_rows_lag_within_the_delay_is_no_incident() -> None:
    rows = progress(SESSION_WITHIN)
    assert truth(SESSION_WITHIN)["clean"] and all(_dropped(p) == 0 for p in rows) and all(p["stateOperators"] for p in rows)
    signals, record = said(recorded(SESSION_WITHIN))
    assert signals == []
    assert gauge(record, catalog.LATE_ROWS_SHARE) == 0.0 and gauge(record, catalog.LATE_ROWS_DROPPING) == 0.0
