"""The browser's capacity views: per executor on the Placement page, footprint and what-if on the Checkpoint page."""

from __future__ import annotations

import json
import os

import pytest
from test_inspector import ROCKSDB, checkpoint, operator_metadata, rocksdb_zip, write
from test_ui import app, frames, texts

from conftest import FIXTURES
from spark_state_observer.offline.replay import replay

RUN = os.path.join(FIXTURES, "capacity", "e2_p8")


@pytest.fixture(scope="module")
def capacity_db(tmp_path_factory) -> str:
    db = str(tmp_path_factory.mktemp("capacity-ui") / "e2_p8.db")
    replay([os.path.join(RUN, "eventlog")], history=db)
    return db


def query_id() -> str:
    with open(os.path.join(RUN, "progress.jsonl")) as f:
        return json.loads(f.readline())["id"]


def test_placement_page_shows_rocksdb_memory_per_executor_and_the_what_if(monkeypatch, capacity_db) -> None:
    at = app(monkeypatch, capacity_db, page="Placement", query_id=query_id())
    assert not at.exception and "RocksDB memory per executor" in texts(at)
    table = next(f for f in frames(at) if "instances" in f.columns)
    assert set(table.executor) == {"0", "1"} and table.instances.sum() == 16  # 8 partitions x 2 operators
    assert set(table["share of budget"]) == {"283%"}  # 8 x 136 MiB against 384 MiB, Spark's defaults
    at.text_area(key="placement_capacity_conf").input("spark.executor.memoryOverhead=4g\nnonsense").run()
    table = next(f for f in frames(at) if "instances" in f.columns)
    assert set(table["share of budget"]) == {"27%"} and "Not KEY=VALUE" in texts(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["instances per executor"] == "8"
    # what to set, in words, against the expected use (issue 51): 8 x 136 MiB is far over 384 MiB of overhead
    assert "Expected use: " in texts(at) and "boundedMemoryUsage=true" in texts(at) and "maxMemoryUsageMB=268" in texts(at)
    at.number_input(key="placement_whatif_executors").set_value(4).run()
    assert {m.label: m.value for m in at.metric}["instances per executor"] == "4"
    at.text_area(key="placement_whatif_conf").input("spark.sql.streaming.stateStore.rocksdb.writeBufferSizeMB=64m").run()
    assert "Estimate marked as assumed" in texts(at)


def test_checkpoint_page_shows_the_footprint_and_the_what_if(monkeypatch, capacity_db, tmp_path) -> None:
    root = checkpoint(tmp_path / "ck", ROCKSDB, committed=2, planned=2)
    operator_metadata(root, 0, "dedupe", ["default"])
    for partition in (0, 1):
        part = root / "state" / "0" / str(partition)
        write(part / "2.zip", rocksdb_zip([1000]))
        write(part / "SSTs" / "000001-uuid.sst", b"x" * 1000)
        write(part / "3.changelog", b"c" * 100)
    at = app(monkeypatch, capacity_db, roots=[str(tmp_path)], page="Checkpoint")
    assert not at.exception and "Footprint in the checkpoint's storage" in texts(at)
    footprint = next(f for f in frames(at) if "versions kept" in f.columns)
    assert footprint["SSTs"].tolist() == ["2.0 kB"] and footprint["versions kept"].tolist() == [2]  # 2 SSTs of 1000 B; v2 and v3
    assert {m.label: m.value for m in at.metric}["instances per executor"] == "2"  # 2 partitions, 1 operator, 1 executor
