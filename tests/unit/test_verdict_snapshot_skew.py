"""Snapshot lag and state skew reach the browser's verdict (issue 51): the recordings of a store that never
uploaded a snapshot and of a hot key, replayed into a history, read as their incident with its figures and the
runbook section that holds the fix, as the alerts that read the same signals do."""

from __future__ import annotations

import glob
import os

import pytest
from test_ui_verdict import facts_of

from conftest import FIXTURES
from incident_truth import screenshots_module
from spark_state_observer.history.browse import load_recent_events
from spark_state_observer.offline.replay import replay

pytest.importorskip("streamlit")
from spark_state_observer.browser.verdict import verdicts

SHOTS = screenshots_module()


def _replayed(tmp_path, scenario: str, kind: str) -> tuple[str, str]:
    """The history of the replayed recording, and the query that got a ``kind`` signal."""
    base = os.path.join(FIXTURES, *scenario.split("/"))
    paths = sorted(glob.glob(os.path.join(base, "run*", "eventlog", "*"))) or sorted(glob.glob(os.path.join(base, "eventlog", "*")))
    db = str(tmp_path / "history.db")
    replay(paths, SHOTS._keep_everything(), history=db)
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT DISTINCT query_id FROM events WHERE kind = ?", (kind,)).fetchall()
    assert rows, f"{scenario} has no {kind} signal"
    return db, rows[0][0]


def test_a_store_without_snapshots_reads_snapshots_lagging_with_its_lag(tmp_path) -> None:
    db, qid = _replayed(tmp_path, "snapshot_health/never_uploaded", "snapshot_lagging")
    found = verdicts(facts_of(db, qid))
    lagging = next(v for v in found if v.kind == "snapshot_lagging")
    signal = next(e for e in load_recent_events(db, qid).to_dict("records") if e["kind"] == "snapshot_lagging")
    lag = signal["attributes"]["max_lag_batches"]
    assert lagging.text.startswith("Snapshots lagging: ") and f"{lag:,.0f} versions without an uploaded snapshot" in lagging.text
    assert lagging.anchor == "sparkstatesnapshotuploadlagging" and lagging.level == "warning"
    assert found[0].kind != "healthy"


def test_a_hot_key_reads_state_skewed_with_its_partition(tmp_path) -> None:
    db, qid = _replayed(tmp_path, "skew/bytes", "state_skewed")
    skewed = next(v for v in verdicts(facts_of(db, qid)) if v.kind == "state_skewed")
    signal = next(e for e in load_recent_events(db, qid).to_dict("records") if e["kind"] == "state_skewed")
    assert skewed.text.startswith(
        f"State skewed by key: {signal['attributes']['operator_name']} partition {signal['attributes']['partition']}"
    )
    assert f"{signal['attributes']['share']:.0%} of the state's bytes" in skewed.text
    assert skewed.anchor == "sparkstateskewed"
