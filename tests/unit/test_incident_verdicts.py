"""The verdict's first sentence names the incident and its figures, for the recorded incidents issue 51 found
told wrong or incompletely: a Kafka restart (its backlog at restart and when it caught up) and two executor
losses (each with its own time and reload). Through the browser's data layer and its pages (Streamlit's
script runner over the same app.py the server runs), on histories replayed from the recorded event logs."""

from __future__ import annotations

import glob
import json
import os
import time

import pytest

from conftest import FIXTURES, ROOT, eventlog_dir, progress_lines
from ui_text import as_shown

pytest.importorskip("streamlit")

from spark_state_observer.browser import data
from spark_state_observer.browser.verdict import headline
from spark_state_observer.history.browse import load_recent_events
from spark_state_observer.offline.replay import replay

KAFKA = sorted(glob.glob(os.path.join(FIXTURES, "kafka_restart", "run*")))
ISSUE51 = os.path.join(FIXTURES, "issue51")  # beside, not among, the fixtures every replay test reads (FIXTURES/*/run*)
TWICE = sorted(glob.glob(os.path.join(ISSUE51, "executor_loss_twice", "run*")))


@pytest.fixture(scope="module")
def kafka_db(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("kafka") / "h.db")
    replay([eventlog_dir(r) for r in KAFKA], history=path)
    return path


def recorded_backlog(run: str) -> int:
    """Records between the restart's offsets and the topic's latest, at its first batch that read the latest."""
    first = next(p for p in progress_lines(run) if p["sources"][0].get("latestOffset"))
    source = first["sources"][0]
    total = lambda offsets: sum(sum(parts.values()) for parts in offsets.values())  # noqa: E731
    return total(source["latestOffset"]) - total(source["startOffset"])


def query_of(run: str) -> str:
    return progress_lines(run)[0]["id"]


def app_page(history: str, page: str, query: str):
    from streamlit.testing.v1 import AppTest

    os.environ["SPARK_STATE_OBSERVER_UI_HISTORY"] = history
    os.environ["SPARK_STATE_OBSERVER_UI_CHECKPOINT_ROOTS"] = ""
    try:
        at = AppTest.from_file(os.path.join(ROOT, "spark_state_observer", "browser", "app.py"), default_timeout=120)
        at.query_params["page"] = page
        at.query_params["query"] = query
        at.run()
    finally:
        del os.environ["SPARK_STATE_OBSERVER_UI_HISTORY"], os.environ["SPARK_STATE_OBSERVER_UI_CHECKPOINT_ROOTS"]
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_kafka_restart_names_its_backlog_at_restart_and_when_it_caught_up(kafka_db) -> None:
    backlog = recorded_backlog(KAFKA[1])
    assert backlog > 500  # the producer kept writing while the query was down: a real backlog
    found = data.query_verdicts(kafka_db, (), query_of(KAFKA[1]), now=time.time())
    restart = next(v for v in found if v.kind == "restarted")
    assert restart.text.startswith("Restarted at ") and f"; Kafka backlog {backlog:,} records at restart, caught up in " in restart.text


def test_the_drilldown_of_a_kafka_query_has_its_offsets_per_partition(kafka_db) -> None:
    at = app_page(kafka_db, "Query drilldown", query_of(KAFKA[1]))
    assert "Kafka offsets" in [h.value for h in at.subheader]
    newest = progress_lines(KAFKA[1])[-1]["sources"][0]
    frames = [df.value for df in at.dataframe if "latest" in df.value.columns]
    assert frames, "no offsets table"
    table = frames[0]
    assert sorted(table.partition.tolist()) == sorted(int(p) for p in newest["endOffset"]["events"])
    ends = {int(p): f"{o:,}" for p, o in newest["endOffset"]["events"].items()}
    assert {int(r.partition): r.end for r in table.itertuples()} == ends
    caption = as_shown(" ".join(c.value for c in at.caption))
    assert f"Kafka backlog {recorded_backlog(KAFKA[1]):,} records at restart" in caption


@pytest.mark.skipif(not TWICE, reason="tests/fixtures/issue51/executor_loss_twice not recorded")
def test_two_executor_losses_each_name_their_own_time_and_reload(tmp_path) -> None:
    run = TWICE[0]
    with open(os.path.join(run, "run.json")) as f:
        truth = json.load(f)
    db = str(tmp_path / "h.db")
    replay([eventlog_dir(run)], history=db)
    qid = truth["query_id"]
    found = data.query_verdicts(db, (), qid, now=time.time())
    lost = sorted((v for v in found if v.kind == "executor_lost"), key=lambda v: v.since or 0)
    killed = [truth["killed_executor_id"], truth["second_kill"]["executor_id"]]
    assert [v.text.split(" lost at ")[0] for v in lost] == [f"Executor {e}" for e in killed], [v.text for v in lost]
    events = load_recent_events(db, qid)
    removed = events[events.kind == "executor_removed"]
    assert [v.since for v in lost] == removed.ts.tolist()
    # each loss's own reload: the first reload of its window no earlier loss took, its load time summed over operators
    reloads = events[events.kind == "store_reload"]
    costs = []
    for at in removed.ts:
        mine = reloads[(reloads.ts >= at - 120) & ~reloads.ts.isin([c for c, _ in costs])]
        first = mine.ts.min()
        costs.append((first, sum(a["load_seconds"] for a in mine[mine.ts == first].attributes)))
    assert costs[0][0] != costs[1][0]
    from spark_state_observer.browser import fmt

    for v, (_, seconds) in zip(lost, costs):
        assert v.text.endswith(f"; restore {fmt.duration(seconds)}"), v.text
    line = headline(found)
    assert all(v.text in line for v in lost), line  # the Queries page names both
    at = app_page(db, "Queries", qid)
    shown = " ".join(str(t.value.to_string()) for t in at.table) + " ".join(str(d.value.to_string()) for d in at.dataframe)
    assert all(f"Executor {e} lost at" in shown for e in killed), shown[:2000]


GROWN = sorted(glob.glob(os.path.join(ISSUE51, "kafka_restart_grown", "run*")))


@pytest.mark.skipif(not GROWN, reason="tests/fixtures/issue51/kafka_restart_grown not recorded")
def test_a_kafka_restart_onto_a_grown_topic_names_its_backlog_and_the_added_partitions(tmp_path) -> None:
    """The topic grew from 4 to 6 partitions while the query was stopped (scripts/record_kafka.py --grow-to 6):
    the restart's verdict names the backlog, new partitions' records included, and the partitions 4 → 6."""
    with open(os.path.join(ISSUE51, "kafka_restart_grown", "truth.json")) as f:
        truth = json.load(f)
    db = str(tmp_path / "h.db")
    replay([eventlog_dir(r) for r in GROWN], history=db)
    first = next(p for p in progress_lines(GROWN[1]) if p["sources"][0].get("latestOffset"))
    start, latest = first["sources"][0]["startOffset"]["events"], first["sources"][0]["latestOffset"]["events"]
    backlog = sum(o - start.get(p, 0) for p, o in latest.items())
    assert (len(start), len(latest)) == (truth["partitions"], truth["grown"]["to"]) == (4, 6)
    found = data.query_verdicts(db, (), query_of(GROWN[1]), now=time.time())
    restart = next(v for v in found if v.kind == "restarted")
    assert f"; Kafka backlog {backlog:,} records at restart" in restart.text, restart.text
    assert "; events partitions 4 → 6" in restart.text, restart.text
