"""The alert and recording rules, for the default configuration (the committed alerts/) and a non-default
one (tests/data/mixin-custom.yaml): valid for promtool, unit-tested per alert by the generated tests (a
bad series fires, a healthy one of another application stays silent), raised thresholds silence what
the defaults fire on, every alert aggregates by the configured identity labels and has a runbook
section, names come from the registry only, and the Alertmanager example is valid for amtool."""

from __future__ import annotations

import glob
import os
import re
import subprocess

import pytest
import yaml

from conftest import ROOT, need
from observer.mixin.config import MixinConfig, config_from_mapping, load_config
from observer.mixin.export import artefacts, write
from observer.mixin.promql import metric
from observer.mixin.rules import alerting_rules, rule_documents
from observer.mixin.unittests import build_cases, case_document

CUSTOM = os.path.join(ROOT, "tests", "data", "mixin-custom.yaml")
CONFIGS = ["default", "custom"]
# alerts whose series values follow a threshold that mixin-custom.yaml moves
MOVED = {
    "SparkStreamingQueryCrashLooping",
    "SparkStreamingQueryFallingBehind",
    "SparkStreamingKafkaLagGrowing",
    "SparkStreamingKafkaLagSecondsHigh",
    "SparkStreamingWatermarkLagHigh",
    "SparkStateRestoreTooLong",
    "SparkStateBudgetExhaustionForecast",
    "SparkStateMemoryNearBudget",
    "SparkStateCommitLatencyHigh",
    "SparkStateRocksDBWriteStalls",
    "SparkStateSnapshotUploadLagging",
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, tuple[MixinConfig, str]]:
    """Config name -> (configuration, directory holding its alerts/): the committed one for the default."""
    custom = load_config(CUSTOM)
    out = str(tmp_path_factory.mktemp("custom"))
    write(out, {k: v for k, v in artefacts(custom).items() if k.startswith("alerts/")})
    return {"default": (MixinConfig(), ROOT), "custom": (custom, out)}


def rules_of(directory: str, name: str) -> list[dict]:
    with open(os.path.join(directory, "alerts", name)) as f:
        return [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]


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


def test_the_custom_configuration_reaches_the_rules(exported) -> None:
    _, directory = exported["custom"]
    rules = {r["alert"]: r for r in rules_of(directory, "rules.yml")}
    assert rules["SparkStreamingWatermarkLagHigh"]["expr"].endswith("> 21600")
    assert rules["SparkStreamingQueryDown"]["for"] == "30m"
    assert rules["SparkStreamingQueryStalled"]["labels"]["severity"] == "warning"
    assert rules["SparkStateObserverDown"]["expr"] == 'up{job="spark-observer"} == 0'
    assert 'spark_streaming_query_stalled{job=~"spark-.*"}' in rules["SparkStreamingQueryStalled"]["expr"]
    assert rules["SparkStateUnbounded"]["annotations"]["runbook_url"] == "https://wiki.example.com/runbooks/spark-state#sparkstateunbounded"
    with open(os.path.join(directory, "alerts", "rules.yml")) as f:
        assert [g["name"] for g in yaml.safe_load(f)["groups"]] == ["acme-spark.queries", "acme-spark.state", "acme-spark.observer"]


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
def test_every_alert_has_a_generated_test_that_fires_and_a_silent_other_application(exported, which: str) -> None:
    config, directory = exported[which]
    tested: dict[str, list] = {}
    for path in glob.glob(os.path.join(directory, "alerts", "tests", "*.yml")):
        with open(path) as f:
            for case in yaml.safe_load(f)["tests"]:
                series = [s["series"] for s in case["input_series"]]
                for check in case["alert_rule_test"]:
                    tested.setdefault(check["alertname"], []).append((series, check["exp_alerts"]))
    for rule in rules_of(directory, "rules.yml"):
        cases = tested.get(rule["alert"])
        assert cases, f"{rule['alert']} has no promtool unit test"
        fired = [e["exp_labels"] for _, expected in cases for e in expected]
        assert fired, f"{rule['alert']}: no test case where it fires"
        key = "instance" if rule["alert"].startswith("SparkStateObserver") else config.app_label
        everything = " ".join(s for series, _ in cases for s in series)
        seen = set(re.findall(rf'\b{key}="([^"]+)"', everything))
        assert seen - {e[key] for e in fired}, f"{rule['alert']}: no series of another {key} that stays silent"


@pytest.mark.parametrize("which", CONFIGS)
def test_alerts_follow_mixin_conventions_and_aggregate_by_identity(exported, which: str) -> None:
    config, directory = exported[which]
    with open(os.path.join(ROOT, "alerts", "runbook.md")) as f:
        sections = {m.lower() for m in re.findall(r"^## (\S+)\s*$", f.read(), re.MULTILINE)}
    identity = ", ".join(config.identity_labels)
    for rule in rules_of(directory, "rules.yml"):
        name = rule["alert"]
        assert re.fullmatch(r"(?:[A-Z][a-z0-9]*|DB)+", name), f"{name} is not CamelCase"
        assert set(rule["labels"]) == {"severity"} and rule["labels"]["severity"] == config.severities[name]
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description", "runbook_url"} and all(annotations.values()), name
        assert annotations["runbook_url"] == f"{config.runbook_base_url}#{name.lower()}"
        assert name.lower() in sections, f"alerts/runbook.md has no section '## {name}'"
        assert rule["for"] == config.for_durations[name]
        if name != "SparkStateObserverDown":
            groupings = re.findall(r"\bby \(([^)]*)\)", rule["expr"])
            assert groupings and all(g.startswith(identity) for g in groupings), f"{name} does not aggregate by {identity}: {rule['expr']}"
        if not name.startswith("SparkStateObserver"):
            assert "{{ $labels." + config.app_label + " }}" in annotations["summary"], name


def test_every_metric_name_in_the_rules_is_in_the_registry() -> None:
    docs = rule_documents(MixinConfig())
    recorded = {r["record"] for g in docs["recording.yml"]["groups"] for r in g["rules"]}
    used = set()
    for rule in [r for d in docs.values() for g in d["groups"] for r in g["rules"]]:
        for token in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", re.sub(r'"[^"]*"', '""', rule["expr"])):
            if ":" in token:
                assert token in recorded, f"{token} is not a recording rule"
            elif token.startswith("spark_"):
                assert metric(token) == token
                used.add(token)
    assert {"spark_state_observer_events_dropped_total", "spark_state_snapshot_lag_batches", "spark_state_unbounded"} <= used
    with pytest.raises(KeyError, match="spark_state_rowz"):
        metric("spark_state_rowz")


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
        "thresholds": {
            "commit_seconds_per_instance": 0,
            "crash_loop_restarts": 1,
            "falling_behind_ratio": 0.5,
            "write_stall_seconds_per_batch": 0.2,
            "kafka_lag_offsets": 3,
            "state_memory_budget_ratio": 1,
        },
    },
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
