"""The browser's Kafka-lag verdict on the recorded Kafka runs (scripts/record_kafka_incidents.py, a real KRaft broker).

``kafka_lag_growing``: a producer at 30 records/s against a rate limit of 20/s; the observer's ``kafka_lag_growing``
came at its lag of 420 records. Its progress lines cut where the run was still open (a history while the incident
lasts), then whole. ``kafka_steady_rate_limited`` and ``kafka_steady_transactional``: clean, never a lag verdict.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

pytest.importorskip("streamlit")

from bench import precision
from spark_state_observer.browser.health import typical_interval
from spark_state_observer.browser.verdict import ANCHORS, SEVERITY, Facts, Verdict, kafka_lag_of, verdicts
from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.history.browse import load_recent_events, load_run_stats
from spark_state_observer.history.loaders import load_batch_series, load_progress_tail
from spark_state_observer.offline.replay import replay


def recorded_progress(scenario: str) -> list[str]:
    folder = os.path.join(precision.INCIDENTS, scenario, "run1")
    name = next(n for n in sorted(os.listdir(folder)) if n.startswith("progress.jsonl"))
    with open_decompressed(os.path.join(folder, name)) as f:
        return [line for line in f.read().decode().splitlines() if line.strip()]


def facts_after(tmp_path: Any, lines: list[str]) -> Facts:
    """A history of ``lines`` (the progress of one open run) and the facts the Queries page reads from it."""
    path = tmp_path / "progress.jsonl"
    path.write_text("\n".join(lines) + "\n")
    db = str(tmp_path / "history.db")
    replay([str(path)], history=db)
    qid = json.loads(lines[0])["id"]
    batches = load_batch_series(db, qid)
    (newest,) = load_progress_tail(db, qid, None, 1)
    last = float(batches.ts.max())
    return Facts(
        load_recent_events(db, qid).to_dict("records"),
        load_run_stats(db, qid).to_dict("records"),
        last,
        typical_interval(batches.ts.tolist()),
        last + 1.0,
        kafka_lag_of(newest),
    )


def behind(line: str) -> int:
    """Records behind the latest at a recorded batch, read here from its offsets as the broker's (not the observer's)."""
    (source,) = json.loads(line)["sources"]
    end, latest = (o if isinstance(o, dict) else json.loads(o) for o in (source["endOffset"], source["latestOffset"]))
    return sum(int(o) - int(end["events"].get(p, 0)) for p, o in latest["events"].items())


@pytest.mark.parametrize("share", [0.5, 1.0])
def test_a_growing_lag_reads_as_such_while_its_run_is_open(tmp_path, share: float) -> None:
    lines = recorded_progress("kafka_lag_growing")
    cut = lines[: int(len(lines) * share)]
    found = verdicts(facts_after(tmp_path, cut))
    top = found[0]
    assert top.kind == "kafka_lag" and [v.kind for v in found] == ["kafka_lag"]
    assert top.text == (
        f"Kafka lag growing: events {behind(cut[-1]):,} records behind the latest (420 when it began to grow at 10:46:42, "
        "growing 12.6 records/s then)"
    )
    assert top.level == "warning" and top.anchor == ANCHORS["kafka_lag"] == "sparkstreamingkafkalaggrowing"


@pytest.mark.parametrize(
    "scenario", [f"kafka_steady_{kind}{suffix}" for suffix in ("", "_40", "_35") for kind in ("rate_limited", "transactional")]
)
def test_a_query_that_keeps_up_with_its_topic_has_no_lag_verdict(tmp_path, scenario: str) -> None:
    facts = facts_after(tmp_path, recorded_progress(scenario))
    assert facts.kafka_lag == {"events": 0.0}
    assert [v.kind for v in verdicts(facts)] == ["healthy"]


def test_the_verdict_is_a_warning_between_falling_behind_and_a_lost_executor() -> None:
    assert SEVERITY["falling_behind"] < SEVERITY["kafka_lag"] < SEVERITY["executor_lost"]
    assert Verdict("kafka_lag", "").level == "warning" and Verdict("executor_lost", "").level == "info"


@pytest.mark.parametrize(
    "progress",
    [
        None,
        {},
        {"sources": "KafkaV2"},
        {"sources": [{"description": "KafkaV2[Subscribe[events]]", "endOffset": "not json", "latestOffset": {"events": {"0": 5}}}]},
        {"sources": [{"description": "KafkaV2[x]", "endOffset": {"events": {"0": -1}}, "latestOffset": {"events": {"0": "9" * 40}}}]},
        {"sources": [{"description": "FileStreamSource[/x]", "endOffset": {"logOffset": 3}}]},
    ],
)
def test_offsets_that_are_no_offsets_give_no_lag_and_raise_nothing(progress: Any) -> None:
    lag = kafka_lag_of(progress)
    assert all(isinstance(v, float) and v >= 0 for v in lag.values())
