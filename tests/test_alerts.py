"""The alert and recording rules: current with their generator, valid for promtool, unit-tested per
alert (fires on a bad series, silent on a healthy one), documented in the runbook, built from registry
metric names only; and the example Alertmanager configuration is valid for amtool."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import yaml

from conftest import ROOT, need

sys.path.insert(0, ROOT)  # the alerts package lives beside observer/, outside the wheel

from alerts import generate
from alerts.config import RUNBOOK_BASE_URL

ALERTS = os.path.join(ROOT, "alerts")
RULE_FILES = [os.path.join(ALERTS, "rules.yml"), os.path.join(ALERTS, "recording.yml")]
UNIT_TESTS = sorted(os.path.join(ALERTS, "tests", n) for n in os.listdir(os.path.join(ALERTS, "tests")) if n.endswith(".yml"))


def rules(path: str) -> list[dict]:
    with open(path) as f:
        return [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]


ALERT_RULES = rules(RULE_FILES[0])
RECORDED = {r["record"] for r in rules(RULE_FILES[1])}


def test_committed_rules_are_current() -> None:
    for name, text in generate.rule_files().items():
        with open(os.path.join(ALERTS, name)) as f:
            assert f.read() == text, f"alerts/{name} is stale: run python -m alerts.generate"


def test_promtool_check_rules() -> None:
    result = subprocess.run([need("promtool"), "check", "rules", *RULE_FILES], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERT_RULES)} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    result = subprocess.run([need("promtool"), "test", "rules", *UNIT_TESTS], capture_output=True, text=True, cwd=ALERTS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_unit_test_that_fires_and_a_healthy_series() -> None:
    tested: dict[str, list] = {}
    for path in UNIT_TESTS:
        with open(path) as f:
            for case in yaml.safe_load(f)["tests"]:
                series = [s["series"] for s in case["input_series"]]
                for check in case["alert_rule_test"]:
                    tested.setdefault(check["alertname"], []).append((series, check["exp_alerts"]))
    for rule in ALERT_RULES:
        cases = tested.get(rule["alert"])
        assert cases, f"{rule['alert']} has no promtool unit test in alerts/tests/"
        fired = [labels for series, expected in cases for labels in expected]
        assert fired, f"{rule['alert']}: no test case where it fires"
        firing = {str(e["exp_labels"].get("query", e["exp_labels"].get("instance"))) for e in fired}
        all_series = " ".join(s for series, _ in cases for s in series)
        silent = set(re.findall(r'(?:query|instance)="([^"]+)"', all_series)) - firing
        assert silent, f"{rule['alert']}: no healthy series that stays silent"


def test_every_alert_has_severity_annotations_and_a_runbook_section() -> None:
    with open(os.path.join(ALERTS, "runbook.md")) as f:
        sections = {m.lower() for m in re.findall(r"^## (\S+)\s*$", f.read(), re.M)}
    for rule in ALERT_RULES:
        name = rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        annotations = rule["annotations"]
        assert annotations["summary"] and annotations["description"], name
        if not name.startswith("SparkStateObserver"):
            assert "{{ $labels.query }}" in annotations["summary"] + annotations["description"], name
        assert annotations["runbook_url"] == f"{RUNBOOK_BASE_URL}#{name.lower()}"
        assert name.lower() in sections, f"alerts/runbook.md has no section '## {name}'"
        assert re.fullmatch(r"\d+[smh]", rule["for"]), name


def test_every_metric_name_in_the_rules_is_in_the_registry() -> None:
    used = set()
    for rule in ALERT_RULES + rules(RULE_FILES[1]):
        expr = re.sub(r'"[^"]*"', '""', rule["expr"])
        for token in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr):
            if ":" in token:
                assert token in RECORDED, f"{token} is not a recording rule"
            elif token.startswith("spark_"):
                assert generate.metric(token) == token
                used.add(token)
    assert {"spark_state_observer_events_dropped_total", "spark_state_snapshot_lag_batches", "spark_state_unbounded"} <= used


def test_example_alertmanager_config_is_valid() -> None:
    amtool = need("amtool")
    result = subprocess.run([amtool, "check-config", os.path.join(ALERTS, "alertmanager.example.yml")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
