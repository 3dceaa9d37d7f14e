"""The mixin as a product: the committed alerts/, dashboards/ and deploy/ artefacts are ``mixin export``'s
output for the default configuration (and the package bundles the same dashboards); the configuration
file overrides defaults and rejects unknown keys clearly; ``mixin config`` documents every key and
reads back as the defaults; the Prometheus Operator objects are valid against the operator's CRD
schemas; the Grafana provisioning matches the dashboards."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os

import pytest
import yaml
from crd_schema import errors as crd_errors

from conftest import ROOT
from spark_state_observer.cli import main
from spark_state_observer.mixin import export
from spark_state_observer.mixin.config import MixinConfig, MixinConfigError, config_from_mapping, documented_defaults, load_config
from spark_state_observer.mixin.prometheus_operator import objects

CUSTOM = os.path.join(ROOT, "tests", "data", "mixin-custom.yaml")


def test_committed_artefacts_are_the_default_export() -> None:
    for rel, text in export.artefacts(MixinConfig()).items():
        path = os.path.join(ROOT, rel)
        assert os.path.exists(path), f"{rel} missing: run python scripts/update_mixin.py"
        with open(path, encoding="utf-8") as f:
            assert f.read() == text, f"{rel} is stale: run python scripts/update_mixin.py"


def test_bundled_dashboards_are_the_rendered_defaults() -> None:
    from spark_state_observer.mixin.dashboards import render

    assert export.bundled_dashboards() == render(MixinConfig()), "run: python scripts/update_mixin.py"


def test_documented_defaults_read_back_as_the_defaults_and_document_every_key() -> None:
    text = documented_defaults()
    assert config_from_mapping(yaml.safe_load(text)) == MixinConfig()
    lines = text.splitlines()

    def check(obj: object, indent: str) -> int:
        checked = 0
        for field in dataclasses.fields(obj):  # type: ignore[arg-type]
            index = lines.index(next(line for line in lines if line.startswith(f"{indent}{field.name}:")))
            comment = lines[index - 1]
            assert comment.startswith(f"{indent}# ") and len(comment.strip()) > 12, f"{field.name} is not documented"
            value = getattr(obj, field.name)
            checked += 1 + (check(value, indent + "  ") if dataclasses.is_dataclass(value) else 0)
        return checked

    assert check(MixinConfig(), "") > 40


def test_a_file_overrides_only_its_keys_and_merges_alert_maps(tmp_path) -> None:
    path = tmp_path / "mixin.json"
    path.write_text(
        json.dumps(
            {
                "thresholds": {"restore_seconds": 900},
                "severities": {"SparkStateUnbounded": "critical"},
                "static_labels": ["cluster", "namespace", "env"],
            }
        )
    )
    config = load_config(str(path))
    assert config.thresholds.restore_seconds == 900 and config.thresholds.snapshot_lag_batches == 20
    assert config.severities["SparkStateUnbounded"] == "critical" and config.severities["SparkStreamingQueryFailed"] == "critical"
    assert config.identity_labels == ["cluster", "namespace", "env", "app"]
    assert load_config(CUSTOM).kubernetes.labels == {"release": "kube-prometheus-stack"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("tresholds: {}\n", "unknown key(s) tresholds"),
        ("thresholds: {restore_secs: 3}\n", "unknown key(s) thresholds.restore_secs"),
        ("for_durations: {SparkStateUnbound: 5m}\n", "unknown alert(s) in for_durations: SparkStateUnbound"),
        ("for_durations: {SparkStateUnbounded: soon}\n", "for_durations.SparkStateUnbounded"),
        ("severities: {SparkStateUnbounded: page}\n", "severities.SparkStateUnbounded"),
        ("thresholds: {restore_seconds: fast}\n", "thresholds.restore_seconds: expected a number"),
        ("static_labels: cluster\n", "static_labels: expected a list of strings"),
        ("static_labels: [query]\n", "must not use the observer's own labels"),
        ("selector: 'env=prod'\n", "selector: cannot read matcher"),
        ("kubernetes: {labels: [a]}\n", "kubernetes.labels: expected a mapping"),
        ("- a\n", "must be a mapping"),
        ("a: [\n", "is not valid YAML"),
    ],
)
def test_a_bad_configuration_is_a_clear_error(tmp_path, content: str, message: str) -> None:
    path = tmp_path / "mixin.yaml"
    path.write_text(content)
    with pytest.raises(MixinConfigError) as info:
        load_config(str(path))
    assert message in str(info.value)


def test_a_regex_selector_without_test_labels_is_a_clear_error() -> None:
    config = config_from_mapping({"selector": 'job=~"spark-.*"'})
    with pytest.raises(MixinConfigError, match=r"set test_labels\.job"):
        export.artefacts(config)


def test_the_commands(tmp_path, capsys) -> None:
    assert main(["mixin", "config"]) == 0
    assert config_from_mapping(yaml.safe_load(capsys.readouterr().out)) == MixinConfig()
    bad = tmp_path / "bad.yaml"
    bad.write_text("thresholds: {nope: 1}\n")
    assert main(["mixin", "export", "--out", str(tmp_path / "x"), "--config", str(bad)]) == 2
    assert "unknown key(s) thresholds.nope" in capsys.readouterr().err
    assert not (tmp_path / "x").exists(), "nothing is written for a bad configuration"
    assert main(["mixin", "export", "--out", str(tmp_path / "out"), "--config", CUSTOM]) == 0
    with open(tmp_path / "out" / "alerts" / "rules.yml") as f:
        assert "application" in f.read()
    assert sorted(os.listdir(tmp_path / "out")) == ["alerts", "dashboards", "deploy"]


def test_without_the_sdk_the_bundled_dashboards_serve_the_default_only(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "grafana_foundation_sdk" else real(name, *a))
    assert export.dashboards(MixinConfig()) == export.bundled_dashboards()
    unchanged = dataclasses.replace(MixinConfig(), runbook_base_url="https://wiki.acme.internal/rb")  # rules only
    assert export.dashboards(unchanged) == export.bundled_dashboards()
    with pytest.raises(export.MixinExportError, match=r"pip install 'spark-state-observer\[mixin\]'"):
        export.dashboards(load_config(CUSTOM))


# --- Prometheus Operator objects against the operator's CRD schemas -----------------------------------
@pytest.mark.parametrize("which", ["default", "custom"])
def test_operator_objects_validate_against_the_crds(which: str) -> None:
    config = MixinConfig() if which == "default" else load_config(CUSTOM)
    for name, obj in objects(config).items():
        assert crd_errors(obj) == [], name
        assert obj["metadata"]["namespace"] == config.kubernetes.namespace
        assert obj["metadata"]["labels"] == config.kubernetes.labels


def test_crd_validation_rejects_broken_objects() -> None:
    pod_monitor = objects(MixinConfig())["podmonitor.yaml"]
    pod_monitor["spec"]["podMetricsEndpoints"][0]["honorlabels"] = True  # misspelt: the API server would drop it silently
    assert any("honorlabels" in e for e in crd_errors(pod_monitor))
    rule = objects(MixinConfig())["prometheusrule.yaml"]
    rule["spec"]["groups"][0]["rules"][0]["for"] = 5
    assert crd_errors(rule)
    monitor = objects(MixinConfig())["servicemonitor.yaml"]
    del monitor["spec"]["selector"]
    assert any("selector" in e for e in crd_errors(monitor))


def test_monitors_select_what_the_configuration_names() -> None:
    config = load_config(CUSTOM)
    objs = objects(config)
    pod = objs["podmonitor.yaml"]["spec"]
    assert pod["selector"]["matchLabels"] == {"spark-role": "driver"} and pod["namespaceSelector"] == {"matchNames": ["spark-jobs"]}
    service = objs["servicemonitor.yaml"]["spec"]
    assert service["namespaceSelector"] == {"matchNames": ["spark-monitoring"]}
    for endpoint in pod["podMetricsEndpoints"] + service["endpoints"]:
        assert endpoint["honorLabels"] is True and endpoint["port"] == "metrics"
        assert endpoint["relabelings"] == [{"action": "replace", "targetLabel": "job", "replacement": "spark-observer"}]
    assert objects(MixinConfig())["podmonitor.yaml"]["spec"]["namespaceSelector"] == {"any": True}


def test_grafana_provisioning_matches_the_dashboards() -> None:
    config = load_config(CUSTOM)
    files = export.artefacts(config)
    provider = yaml.safe_load(files["deploy/grafana/provisioning/dashboards/spark-state-observer.yaml"])["providers"][0]
    assert provider["folder"] == "Acme / Spark" and provider["type"] == "file" and provider["options"]["path"] == config.dashboard_path
    source = yaml.safe_load(files["deploy/grafana/provisioning/datasources/spark-state-observer.yaml"])["datasources"][0]
    assert (source["name"], source["uid"], source["type"], source["url"]) == (
        "Acme Prometheus",
        "acme-prom",
        "prometheus",
        config.datasource.url,
    )
    overview = json.loads(files["dashboards/overview.json"])
    current = overview["templating"]["list"][0]["current"]
    assert (current["text"], current["value"]) == (source["name"], source["uid"])
