"""The lost alert under promtool (the real binary): a driver lost recently pages, one whose last sign of life is
over a day old does not (a watcher started on a folder of old killed drivers' logs, issue 50).

The case is the generated one for ``SparkStreamingQueryLost`` (``alerts/tests/queries.yml``), given the
``spark_streaming_query_lost_since_timestamp_seconds`` series the watcher exports beside the lost state.
"""

from __future__ import annotations

import copy
import os
import subprocess
from typing import Any

import yaml

from conftest import ROOT, need
from spark_state_observer.mixin.rules import LOST_RECENT_SECONDS

ALERT = "SparkStreamingQueryLost"
LABELS = 'cluster="test-cluster", namespace="test-namespace", app="{app}", query="orders", query_id="orders-{app}"'


def generated_case() -> tuple[dict[str, Any], list[str]]:
    with open(os.path.join(ROOT, "alerts", "tests", "queries.yml")) as f:
        doc = yaml.safe_load(f)
    case = next(t for t in doc["tests"] if any(a["alertname"] == ALERT for a in t["alert_rule_test"]))
    return copy.deepcopy(case), [os.path.normpath(os.path.join(ROOT, "alerts", "tests", r)) for r in doc["rule_files"]]


def run(tmp_path: Any, case: dict[str, Any], rule_files: list[str]) -> subprocess.CompletedProcess:
    case["alert_rule_test"] = [a for a in case["alert_rule_test"] if a["alertname"] == ALERT]
    path = tmp_path / "lost.yml"
    path.write_text(yaml.safe_dump({"rule_files": rule_files, "evaluation_interval": "1m", "tests": [case]}))
    return subprocess.run([need("promtool"), "test", "rules", str(path)], capture_output=True, text=True, check=False)


def since(app: str, value: float) -> dict[str, str]:
    return {"series": "spark_streaming_query_lost_since_timestamp_seconds{" + LABELS.format(app=app) + "}", "values": f"{value:g}x20"}


def test_a_recent_loss_pages_and_one_over_a_day_old_does_not(tmp_path: Any) -> None:
    case, rule_files = generated_case()
    # at the evaluation (10 minutes into promtool's clock, which starts at 0): shop lost 5 minutes ago pages;
    # another application's query, lost two days before, shows lost but is left out
    case["input_series"] += [
        since("shop", 300),
        {"series": "spark_streaming_query_lifecycle{" + LABELS.format(app="old") + ', state="lost"}', "values": "1x20"},
        since("old", 600 - 2 * LOST_RECENT_SECONDS),
    ]
    result = run(tmp_path, case, rule_files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_same_loss_found_over_a_day_late_pages_no_one(tmp_path: Any) -> None:
    case, rule_files = generated_case()
    case["input_series"].append(since("shop", 600 - LOST_RECENT_SECONDS - 60))
    for test in case["alert_rule_test"]:
        if test["alertname"] == ALERT:
            test["exp_alerts"] = []
    result = run(tmp_path, case, rule_files)
    assert result.returncode == 0, result.stdout + result.stderr
