"""A live restart on real Spark with placement polling."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import pytest

from conftest import REQUIRE_REAL, ROOT, eventlog_dir, run_script
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings


@pytest.mark.slow
def test_live_restart_with_placement_polling(tmp_path: Any) -> None:
    """A real restart in a new process with Spark's UI on, so the live observer polls tasks: the aggregation's
    restore is ``task_times`` live, equal to what replaying the same run's event logs gives."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if REQUIRE_REAL:
            pytest.fail("Java is not installed")
        pytest.skip("Java is not installed")
    script = os.path.join(ROOT, "scripts", "scenario_job.py")
    ck, runs = str(tmp_path / "ck"), [str(tmp_path / "run1"), str(tmp_path / "run2")]
    for run in runs:
        run_script(
            [
                script,
                "--checkpoint",
                ck,
                "--out",
                run,
                "--event-log",
                "--batches",
                "5",
                "--partitions",
                "4",
                "--conf",
                "spark.ui.enabled=true",
            ]
        )
    with open(os.path.join(runs[1], "signals.jsonl")) as f:
        live = {s["attributes"]["operator"]: s["attributes"] for s in map(json.loads, f) if s["kind"] == "restore"}
    replayed = {
        e.attributes["operator"]: e.attributes
        for e in replay([eventlog_dir(r) for r in runs], Settings(http_enabled=False)).observer.signals.recent
        if e.kind == kinds.RESTORE
    }
    save = live["stateStoreSave"]
    assert (save["method"], save["batch_id"]) == ("task_times", replayed["stateStoreSave"]["batch_id"])
    if save["duration_seconds"] is None:  # a busy machine hid the restore (signals.restore.NOT_VISIBLE): replay sees the same tasks
        assert replayed["stateStoreSave"]["duration_seconds"] is None and save["duration_unknown"]
        assert save["first_batch_task_seconds"] <= save["steady_task_seconds"]
        return
    assert save["duration_seconds"] == pytest.approx(replayed["stateStoreSave"]["duration_seconds"], abs=0.05)
    assert save["duration_seconds"] < save["residual_estimate_seconds"]
