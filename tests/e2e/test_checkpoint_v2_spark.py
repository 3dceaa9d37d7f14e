"""Split from tests/unit/test_checkpoint_v2.py: the tests of it that need real Spark."""

from __future__ import annotations

import os
import shutil

import pytest
from test_checkpoint_v2 import CHECKPOINT, V2

from conftest import progress_lines
from spark_state_observer.offline.checkpoint import inspect_checkpoint


@pytest.mark.slow
def test_the_state_readers_read_a_v2_checkpoint(spark, tmp_path) -> None:
    """Spark's readers look for v1 file names unless the session says v2; the reader sets it for the read only."""
    from spark_state_observer.offline import state_reader

    root = str(tmp_path / "ck")
    shutil.copytree(CHECKPOINT, root)
    before = spark.conf.get(state_reader.FORMAT_CONF, None)
    ops = state_reader.operators(spark, root)
    assert sorted(o["operatorName"] for o in ops) == ["dedupe", "stateStoreSave"]
    dedupe = next(o["operatorId"] for o in ops if o["operatorName"] == "dedupe")
    rows = state_reader.rows_per_partition(spark, root, operator_id=dedupe)
    by_batch = {p["batchId"]: p for p in progress_lines(os.path.join(V2, "run1"))}
    last = by_batch[inspect_checkpoint(CHECKPOINT).last_committed_batch]  # the batch the copied checkpoint ends with
    held = next(op["numRowsTotal"] for op in last["stateOperators"] if op["operatorName"] == "dedupe")
    assert sum(rows.values()) == held and set(rows) <= set(range(8))
    assert spark.conf.get(state_reader.FORMAT_CONF, None) == before
