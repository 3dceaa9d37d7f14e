"""The exported alert rules under promtool and amtool (real binaries): they load, their generated unit tests pass,
raised thresholds silence what the defaults fire on, and the Alertmanager example is valid."""

from __future__ import annotations

import glob
import os
import subprocess

import pytest
import yaml
from test_alerts import CONFIGS, CUSTOM, exported, rules_of  # noqa: F401  (exported: the module's fixture)

from conftest import ROOT, need
from spark_state_observer.mixin.config import MixinConfig, config_from_mapping, load_config
from spark_state_observer.mixin.export import artefacts, write
from spark_state_observer.mixin.rule_tests import build_cases, case_document
from spark_state_observer.mixin.rules import alerting_rules

# alerts whose series values follow a threshold that mixin-custom.yaml moves
MOVED = {
    "SparkStreamingQueryCrashLooping",
    "SparkStreamingQueryFallingBehind",
    "SparkStreamingKafkaLagSecondsHigh",
    "SparkStreamingWatermarkLagHigh",
    "SparkStateRestoreTooLong",
    "SparkStateRestoreSlow",
    "SparkStateBudgetExhaustionForecast",
    "SparkStateMemoryNearBudget",
    "SparkStateCommitLatencyHigh",
    "SparkStateRocksDBWriteStalls",
}


def promtool(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([need("promtool"), *args], capture_output=True, text=True, cwd=cwd, check=False)


@pytest.mark.parametrize("which", CONFIGS)
def test_promtool_check_rules(exported, which: str) -> None:
    _, directory = exported[which]
    alerts = os.path.join(directory, "alerts")
    result = promtool("check", "rules", os.path.join(alerts, "rules.yml"), os.path.join(alerts, "recording.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules_of(directory, 'rules.yml'))} rules found" in result.stdout


@pytest.mark.parametrize("which", CONFIGS)
def test_generated_promtool_unit_tests_pass(exported, which: str) -> None:
    _, directory = exported[which]
    alerts = os.path.join(directory, "alerts")
    tests = sorted(glob.glob(os.path.join(alerts, "tests", "*.yml")))
    assert len(tests) == 3
    result = promtool("test", "rules", *tests, cwd=alerts)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == 3


def test_raised_thresholds_silence_what_the_defaults_fire_on(tmp_path, exported) -> None:
    """The default configuration's bad series, labelled for the custom configuration, fire nothing there:
    the thresholds moved (the custom configuration's own bad series do fire: the generated tests)."""
    custom, directory = exported["custom"]
    rules = {r["alert"]: r for r in alerting_rules(custom)}
    tests = []
    for case in build_cases(custom, values=MixinConfig().thresholds):
        if case.alert not in MOVED:
            continue
        bad = case.firing[0][0]  # the bad application's series only (not the observer's own flags)
        case.series = [s for s in case.series if all(s[1].get(k) == v for k, v in bad.items())]
        assert case.series, case.alert
        case.firing, case.quiet_at = [], []
        tests.append(case_document(case, rules[case.alert]))
    assert len(tests) == len(MOVED)
    path = tmp_path / "moved.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "rule_files": [os.path.join(directory, "alerts", n) for n in ("rules.yml", "recording.yml")],
                "evaluation_interval": "1m",
                "tests": tests,
            }
        )
    )
    result = promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(c.firing for c in build_cases(MixinConfig()) if c.alert in MOVED), "under the defaults these series fire"


@pytest.mark.parametrize("which", CONFIGS)
def test_alertmanager_example_is_valid_and_groups_by_identity(tmp_path, which: str) -> None:
    config = MixinConfig() if which == "default" else load_config(CUSTOM)
    path = os.path.join(ROOT, "alerts", "alertmanager.example.yml")
    if which == "custom":
        path = str(tmp_path / "alertmanager.yml")
        with open(path, "w") as f:
            f.write(artefacts(config)["alerts/alertmanager.example.yml"])
    result = subprocess.run([need("amtool"), "check-config", path], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    with open(path) as f:
        route = yaml.safe_load(f)["route"]
    assert route["group_by"] == ["alertname", *config.identity_labels, "query"]


EDGE_CONFIGS = {
    "selector pins the app, no static labels": {"selector": 'app="shop", env!="dev"', "static_labels": []},
    "long for durations, zero and tiny thresholds": {
        "static_labels": ["region"],
        "app_label": "spark_app",
        "for_durations": {
            "SparkStreamingQueryCrashLooping": "20m",
            "SparkStreamingQueryFallingBehind": "30m",
            "SparkStateCommitLatencyHigh": "1h",
            "SparkStateObserverDroppingEvents": "15m",
            "SparkStateRestoreTooLong": "30m",
        },
        "fleet": {"grace_seconds": 1800},  # CrashLooping's 20m fits a 30-minute grace
        "thresholds": {
            "commit_seconds_per_instance": 0,
            "crash_loop_restarts": 1,
            "falling_behind_ratio": 0.5,
            "write_stall_seconds_per_batch": 0.2,
            "kafka_lag_offsets": 3,
            "state_memory_budget_ratio": 1,
        },
    },
    # durations Prometheus writes with seconds: the tests' times stay whole minutes, written 2m30s rather than 2.5m
    "for durations under a minute or between minutes": {"for_durations": {"SparkStreamingQueryDown": "30s", "SparkStateUnbounded": "90s"}},
    "regex selectors with test labels": {
        "observer_selector": 'job=~"spark.*"',
        "selector": 'namespace=~"team-.*"',
        "test_labels": {"job": "spark-x", "namespace": "team-a"},
    },
}


@pytest.mark.parametrize("name", sorted(EDGE_CONFIGS))
def test_generated_tests_pass_for_other_configurations(tmp_path, name: str) -> None:
    """The test generator keeps up with the configuration: labels pinned by the selector, no static labels,
    long ``for`` durations, zero thresholds, regex matchers."""
    write(str(tmp_path), {k: v for k, v in artefacts(config_from_mapping(EDGE_CONFIGS[name])).items() if k.startswith("alerts/")})
    alerts = str(tmp_path / "alerts")
    checked = promtool("check", "rules", "rules.yml", "recording.yml", cwd=alerts)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", *sorted(glob.glob(os.path.join(alerts, "tests", "*.yml"))), cwd=alerts)
    assert tested.returncode == 0, tested.stdout + tested.stderr
