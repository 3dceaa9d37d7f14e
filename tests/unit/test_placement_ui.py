"""The browser's placement page on a history replayed from the recorded kill run (tests/fixtures/placement/kill),
reached from the drilldown."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from test_placement import scenario
from test_ui import app, chart_titles, frames, texts

from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings


@pytest.fixture(scope="module")
def kill_db(tmp_path_factory) -> str:
    _, eventlog = scenario("kill")
    db = str(tmp_path_factory.mktemp("placement-ui") / "kill.db")
    replay([eventlog], Settings.from_env({}), history=db)
    return db


def test_drilldown_links_to_the_placement_map(monkeypatch, kill_db) -> None:
    truth, _ = scenario("kill")
    at = app(monkeypatch, kill_db, page="Query drilldown", query_id=truth["query_id"])
    button = next(b for b in at.button if b.key == "to_placement")
    assert "2 batches with moves" in button.label  # one partition_migrated signal per operator in batch 5
    button.click().run()
    assert at.session_state["page"] == "Placement" and not at.exception


def test_placement_map_colours_executors_and_marks_the_kill(monkeypatch, kill_db) -> None:
    truth, _ = scenario("kill")
    at = app(monkeypatch, kill_db, page="Placement", query_id=truth["query_id"])
    titles = chart_titles(at)
    assert [t for t in titles if t.startswith("Placement map")] == [
        "Placement map: operator 0 stateStoreSave",
        "Placement map: operator 1 dedupe",
    ]
    assert sum(t.startswith("State memory per partition") for t in titles) == 2  # the skew view per operator
    maps = [e for e in at.get("vega_lite_chart") if "layer" in json.loads(e.proto.spec)]
    cells = [row for e in maps for d in e.proto.datasets for row in pa.ipc.open_stream(d.data.data).read_all().to_pylist()]
    batches = {row["batch_id"] for row in cells}
    assert len(batches) > truth["last_batch"] and len(cells) == 2 * len(batches) * truth["shuffle_partitions"]  # every cell of both maps
    killed = truth["killed"]["executor_id"]
    marked = {(row["batch_id"], row["partition"]) for row in cells if row.get("moved")}
    assert len(marked) >= 2 and all(b == truth["killed"]["last_batch_before"] + 1 for b, _ in marked)
    assert {row["executor"] for row in cells} >= {"0", killed}
    moves = frames(at)[-1]
    assert len(moves) == 4 and set(moves["from"]) == {killed} and set(moves.cause) == {"its executor was removed"}
    assert {m.label: m.value for m in at.metric}["partition moves"] == "4"
    assert "Skew in batch" in texts(at)


def test_placement_page_shows_state_bytes_per_partition(monkeypatch, tmp_path) -> None:
    """The recorded bytes-skew run (tests/fixtures/skew/bytes): the bytes chart, its hot partition first, and the
    bytes skew in the caption beside rows and memory."""
    import os
    import sqlite3

    from conftest import FIXTURES

    run = os.path.join(FIXTURES, "skew", "bytes")
    with open(os.path.join(run, "truth.json")) as f:
        hot = json.load(f)["hot_partition"]
    db = str(tmp_path / "skew.db")
    replay([os.path.join(run, "eventlog")], Settings.from_env({}), history=db)
    with sqlite3.connect(db) as conn:
        query_id, batch = conn.execute("SELECT query_id, MAX(batch_id) FROM placements").fetchone()
        sizes = dict(conn.execute("SELECT partition, sst_bytes FROM placements WHERE batch_id = ?", (batch,)).fetchall())
    assert max(sizes, key=lambda p: sizes[p] or 0) == hot
    at = app(monkeypatch, db, page="Placement", query_id=query_id)
    assert not at.exception
    assert any(t.startswith("State bytes (SST) per partition") for t in chart_titles(at))
    bars = [e for e in at.get("vega_lite_chart") if "State bytes (SST)" in e.proto.spec]
    rows = [row for e in bars for d in e.proto.datasets for row in pa.ipc.open_stream(d.data.data).read_all().to_pylist()]
    assert rows and rows[0]["partition"] == hot  # largest first
    caption = next(line for line in texts(at).splitlines() if "Skew in batch" in line)
    assert "the median by bytes" in caption


def test_the_placement_map_has_one_row_per_partition(monkeypatch, kill_db) -> None:
    """Issue 51: the map collapsed into one line. A fixed height is the whole chart's in Streamlit, and the axis
    and legend took all of it; the rows now each get a height of their own (a Vega-Lite step), as many as partitions."""
    truth, _ = scenario("kill")
    at = app(monkeypatch, kill_db, page="Placement", query_id=truth["query_id"])
    maps = [json.loads(e.proto.spec) for e in at.get("vega_lite_chart") if "layer" in json.loads(e.proto.spec)]
    assert maps
    for spec in maps:
        assert spec["height"] == {"step": 24}  # 6 partitions: the tallest row
        assert spec["layer"][0]["encoding"]["y"]["field"] == "partition"
