"""The alert and recording rules, for the default configuration (the committed alerts/) and a non-default
one (tests/data/mixin-custom.yaml): valid for promtool, unit-tested per alert by the generated tests (a
bad series fires, a healthy one of another application stays silent), raised thresholds silence what
the defaults fire on, every alert aggregates by the configured identity labels and has a runbook
section, names come from the registry only, and the Alertmanager example is valid for amtool."""

from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

from conftest import ROOT
from spark_state_observer.mixin.config import MixinConfig, load_config
from spark_state_observer.mixin.export import artefacts, write
from spark_state_observer.mixin.promql import metric
from spark_state_observer.mixin.rules import rule_documents

CUSTOM = os.path.join(ROOT, "tests", "data", "mixin-custom.yaml")
CONFIGS = ["default", "custom"]


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


def test_the_custom_configuration_reaches_the_rules(exported) -> None:
    _, directory = exported["custom"]
    rules = {r["alert"]: r for r in rules_of(directory, "rules.yml")}
    assert rules["SparkStreamingWatermarkLagHigh"]["expr"].endswith("> 21600")
    assert rules["SparkStreamingQueryDown"]["for"] == "30m"
    assert rules["SparkStreamingQueryStalled"]["labels"]["severity"] == "warning"
    assert rules["SparkStateObserverDown"]["expr"] == 'up{job="spark-observer"} == 0'
    assert 'spark_streaming_query_stalled{job=~"spark-.*"}' in rules["SparkStreamingQueryStalled"]["expr"]
    assert (
        rules["SparkStateUnbounded"]["annotations"]["runbook_url"] == "https://wiki.acme.internal/runbooks/spark-state#sparkstateunbounded"
    )
    with open(os.path.join(directory, "alerts", "rules.yml")) as f:
        assert [g["name"] for g in yaml.safe_load(f)["groups"]] == ["acme-spark.queries", "acme-spark.state", "acme-spark.observer"]


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
        assert annotations["runbook_url"] == f"{config.runbook_url}#{name.lower()}"
        assert name.lower() in sections, f"alerts/runbook.md has no section '## {name}'"
        assert rule["for"] == config.for_durations[name]
        if name != "SparkStateObserverDown":
            groupings = re.findall(r"\bby \(([^)]*)\)", rule["expr"])
            assert groupings and all(g.startswith(identity) for g in groupings), f"{name} does not aggregate by {identity}: {rule['expr']}"
        if not name.startswith("SparkStateObserver"):
            assert "{{ with $labels." + config.app_label + " }}" in annotations["summary"], name  # named when known


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
    assert {"spark_state_observer_events_dropped_total", "spark_state_snapshot_max_lag_batches", "spark_state_unbounded"} <= used
    with pytest.raises(KeyError, match="spark_state_rowz"):
        metric("spark_state_rowz")
