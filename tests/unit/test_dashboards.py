"""The Grafana dashboards: valid against Grafana's schemas (for the default and a non-default mixin
configuration), with a variable per identity label, built from registry metric names only, and every
panel query of the committed (default) dashboards returns data from a real Prometheus scraping a real
observer fed with recorded Spark events. That the committed files are the export's output: test_mixin."""

from __future__ import annotations

import glob
import json
import os
import re
import warnings

import pytest

from conftest import REQUIRE_REAL, ROOT
from spark_state_observer.mixin.config import MixinConfig, load_config
from spark_state_observer.mixin.export import DASHBOARD_NAMES
from spark_state_observer.mixin.promql import metric

SCHEMAS = os.environ.get("GRAFANA_SCHEMAS") or os.path.join(ROOT, "..", "shared", "grafana-schemas")  # beside the checkout
DASHBOARD_FILES = sorted(DASHBOARD_NAMES)
CUSTOM = os.path.join(ROOT, "tests", "data", "mixin-custom.yaml")
RECORDING_RULES = os.path.join(ROOT, "alerts", "recording.yml")


def load(name: str) -> dict:
    with open(os.path.join(ROOT, "dashboards", name)) as f:
        return json.load(f)


def panels(dashboard: dict) -> list[dict]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def rendered(config: MixinConfig, schema: str = "classic") -> dict[str, dict]:
    with warnings.catch_warnings():  # the SDK warns at import that classic dashboards have a v2 successor
        warnings.simplefilter("ignore", DeprecationWarning)
        from spark_state_observer.mixin.dashboards import render

        return {name: json.loads(text) for name, text in render(config, schema).items()}


DASHBOARD_SCHEMAS = ("classic", "v2")


def panel_queries(name: str, schema: str) -> list[tuple[str, str, str]]:
    """(panel title, refId, PromQL) of every panel query of a default dashboard: the committed classic file, or
    the v2 resource ``mixin export --dashboard-schema v2`` writes."""
    if schema == "classic":
        return [(p["title"], t["refId"], t["expr"]) for p in panels(load(name)) for t in p["targets"]]
    pytest.importorskip("grafana_foundation_sdk")
    spec = rendered(MixinConfig(), "v2")[name]["spec"]
    return [
        (e["spec"]["title"], q["spec"]["refId"], q["spec"]["query"]["spec"]["expr"])
        for e in spec["elements"].values()
        for q in e["spec"]["data"]["spec"]["queries"]
    ]


def v2_annotation_expressions(resource: dict) -> list[str]:
    return [a["spec"]["query"]["spec"]["expr"] for a in resource["spec"]["annotations"]]


def check_variables_and_selectors(dashboards: dict[str, dict], config: MixinConfig) -> None:
    """A variable per identity label, each filtered by the outer ones; every query filtered by all of them."""
    identity = config.identity_labels
    for name, dashboard in dashboards.items():
        variables = [v["name"] for v in dashboard["templating"]["list"]]
        assert variables == ["datasource", *identity, "query"] + (["operator"] if name != "overview.json" else []), name
        by_name = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert by_name["datasource"]["current"]["value"] == config.datasource.uid
        for i, label in enumerate(identity):
            assert by_name[label]["query"].endswith(f", {label})") and by_name[label]["includeAll"] and by_name[label]["allValue"] == ".*"
            for outer in identity[:i]:
                assert f'{outer}=~"${outer}"' in by_name[label]["query"]
        for p in panels(dashboard):
            for t in p["targets"]:
                if "spark_state_observer_" in t["expr"]:
                    continue  # the observer's own series carry no app or query
                for label in identity:
                    assert f'{label}=~"${label}"' in t["expr"], f"{name} / {p['title']}: {t['expr']}"
                if config.selector:
                    assert config.selector in t["expr"], f"{name} / {p['title']}"
        assert "spark_streaming_query_info" in dashboard["annotations"]["list"][0]["expr"], "restarts are annotations"


def test_there_are_the_four_dashboards_with_their_variables() -> None:
    dashboards = {n: load(n) for n in DASHBOARD_FILES}
    assert {d["title"] for d in dashboards.values()} == {
        "Spark state / Overview",
        "Spark state / Query detail",
        "Spark state / State store & RocksDB",
        "Spark state / Restore & rebalance",
    }
    check_variables_and_selectors(dashboards, MixinConfig())
    variables = {v["name"]: v for v in dashboards["overview.json"]["templating"]["list"]}
    assert (
        variables["query"]["query"]
        == 'label_values(spark_streaming_query_info{cluster=~"$cluster", namespace=~"$namespace", app=~"$app"}, query)'
    )


def test_a_custom_configuration_reaches_the_dashboards() -> None:
    config = load_config(CUSTOM)
    dashboards = rendered(config)
    check_variables_and_selectors(dashboards, config)
    validate = schema_validator()
    for name, dashboard in dashboards.items():
        assert schema_errors(dashboard, validate) == [], name
    overview = {p["title"]: p for p in panels(dashboards["overview.json"])}
    watermark = overview["Watermark lag"]["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert watermark[-1]["value"] == 21600, "the alert threshold is the panel's red line"
    assert "{{application}} / {{query}}" in overview["Watermark lag"]["targets"][0]["legendFormat"]


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_every_panel_has_unit_thresholds_description_and_a_unique_id(name: str) -> None:
    dashboard = load(name)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for p in panels(dashboard):
        defaults = p["fieldConfig"]["defaults"]
        assert defaults.get("unit"), p["title"]
        assert defaults["thresholds"]["steps"][0]["value"] is None and defaults["thresholds"]["steps"], p["title"]
        assert "Bad:" in p.get("description", ""), f"{p['title']}: the description must say what a bad value means"
        assert p["datasource"]["uid"] == "${datasource}" and p["targets"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}" and t["expr"]


def annotation_expressions(dashboard: dict) -> list[str]:
    return [a["expr"] for a in dashboard["annotations"]["list"]]


def expressions(dashboard: dict) -> list[str]:
    exprs = [t["expr"] for p in panels(dashboard) for t in p["targets"]] + annotation_expressions(dashboard)
    return exprs + [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]


def recorded_names() -> set[str]:
    with open(RECORDING_RULES) as f:
        return set(re.findall(r"record: (\S+)", f.read()))


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_every_metric_name_in_the_dashboards_is_in_the_registry(name: str) -> None:
    recorded = recorded_names()
    for expr in expressions(load(name)):
        for token in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", re.sub(r'"[^"]*"', '""', expr)):
            if ":" in token:
                assert token in recorded, f"{token} is not a recording rule of alerts/recording.yml"
            elif token.startswith("spark_"):
                assert metric(token) == token  # raises for a name the registry does not export


def test_an_unknown_metric_name_fails_generation() -> None:
    with pytest.raises(KeyError, match="spark_state_rowz"):
        metric("spark_state_rowz")
    assert metric("spark_state_rows") == "spark_state_rows"


# --- Grafana's JSON schemas ---------------------------------------------------------------------------
def schema_validator():  # type: ignore[no-untyped-def]
    """validate(ref, instance) -> error messages, resolving refs across the schema files by their names."""
    if not os.path.isdir(SCHEMAS):
        if REQUIRE_REAL:
            pytest.fail(f"{SCHEMAS} is missing")
        pytest.skip(f"{SCHEMAS} is missing (it sits beside the project's checkout)")
    from jsonschema import Draft7Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    base = "https://grafana-schemas.invalid/"
    registry = Registry()
    for path in glob.glob(os.path.join(SCHEMAS, "*.jsonschema.json")):
        with open(path) as f:
            registry = registry.with_resource(
                base + os.path.basename(path), Resource.from_contents(json.load(f), default_specification=DRAFT7)
            )

    def validate(ref: str, instance: object) -> list[str]:
        validator = Draft7Validator({"$ref": base + ref}, registry=registry)
        return [f"{ref} at {list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(instance)]

    return validate


def schema_errors(dashboard: dict, validate) -> list[str]:  # type: ignore[no-untyped-def]
    errors = validate("dashboard.jsonschema.json", dashboard)
    for p in panels(dashboard):
        schema = f"{p['type']}.jsonschema.json"
        assert os.path.exists(os.path.join(SCHEMAS, schema)), f"no schema for panel type {p['type']}"
        errors += validate(schema + "#/definitions/Options", p["options"])
        custom = p["fieldConfig"]["defaults"].get("custom")
        if custom is not None:
            errors += validate(schema + "#/definitions/FieldConfig", custom)
        for t in p["targets"]:
            errors += validate("prometheus.jsonschema.json", t)
    return errors


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_dashboard_validates_against_grafana_schemas(name: str) -> None:
    assert schema_errors(load(name), schema_validator()) == []


def v2_schema_errors(resource: dict, validate) -> list[str]:  # type: ignore[no-untyped-def]
    """The v2 resource's spec against dashboardv2's Dashboard, each element's options and custom field config
    against its panel type's schema, and each query's spec against Prometheus's."""
    assert (resource["apiVersion"], resource["kind"]) == ("dashboard.grafana.app/v2", "Dashboard")
    errors = validate("dashboardv2.jsonschema.json#/definitions/Dashboard", resource["spec"])
    for element in resource["spec"]["elements"].values():
        viz = element["spec"]["vizConfig"]
        schema = f"{viz['group']}.jsonschema.json"
        errors += validate(schema + "#/definitions/Options", viz["spec"]["options"])
        custom = viz["spec"]["fieldConfig"]["defaults"].get("custom")
        if custom is not None:
            errors += validate(schema + "#/definitions/FieldConfig", custom)
        for q in element["spec"]["data"]["spec"]["queries"]:
            errors += validate("prometheus.jsonschema.json", q["spec"]["query"]["spec"])
    return errors


@pytest.mark.parametrize("config", ["default", "custom"])
def test_v2_dashboards_validate_and_hold_the_classic_panels(config: str) -> None:
    """``--dashboard-schema v2``: the same four dashboards, each panel with its classic title, queries, options and
    place, valid against Grafana's v2 schema (the default configuration and a custom one)."""
    pytest.importorskip("grafana_foundation_sdk")
    validate = schema_validator()
    chosen = MixinConfig() if config == "default" else load_config(CUSTOM)
    classic, v2 = rendered(chosen), rendered(chosen, "v2")
    assert sorted(v2) == DASHBOARD_FILES
    for name, resource in v2.items():
        assert v2_schema_errors(resource, validate) == [], name
        old = {p["id"]: p for p in panels(classic[name])}
        new = {int(e["spec"]["id"]): e["spec"] for e in resource["spec"]["elements"].values()}
        assert sorted(old) == sorted(new), name
        for pid, p in old.items():
            spec = new[pid]
            assert (spec["title"], spec["description"], spec["vizConfig"]["group"]) == (p["title"], p["description"], p["type"])
            assert [q["spec"]["query"]["spec"]["expr"] for q in spec["data"]["spec"]["queries"]] == [t["expr"] for t in p["targets"]]
            assert spec["vizConfig"]["spec"]["options"] == p["options"]
            assert spec["vizConfig"]["spec"]["fieldConfig"]["defaults"]["unit"] == p["fieldConfig"]["defaults"]["unit"]
        placed = [i["spec"] for row in resource["spec"]["layout"]["spec"]["rows"] for i in row["spec"]["layout"]["spec"]["items"]]
        assert sorted(int(i["element"]["name"].split("-")[1]) for i in placed) == sorted(old), name
        rows = [p["title"] for p in sorted(classic[name]["panels"], key=lambda p: p["gridPos"]["y"]) if p["type"] == "row"]
        assert [r["spec"]["title"] for r in resource["spec"]["layout"]["spec"]["rows"]] == rows
        assert [v["spec"]["name"] for v in resource["spec"]["variables"]] == [v["name"] for v in classic[name]["templating"]["list"]]


def test_v2_schema_validation_rejects_a_broken_dashboard() -> None:
    pytest.importorskip("grafana_foundation_sdk")
    validate = schema_validator()
    broken = rendered(MixinConfig(), "v2")["overview.json"]
    broken["spec"]["cursorSync"] = "Sometimes"
    element = next(e for e in broken["spec"]["elements"].values() if e["spec"]["vizConfig"]["group"] == "timeseries")
    element["spec"]["vizConfig"]["spec"]["options"]["legend"]["displayMode"] = "sideways"
    errors = v2_schema_errors(broken, validate)
    assert any("dashboardv2" in e and "Sometimes" in e for e in errors)
    assert any("timeseries.jsonschema.json" in e and "sideways" in e for e in errors)


def test_schema_validation_rejects_a_broken_dashboard() -> None:
    validate = schema_validator()
    broken = load("overview.json")
    broken["templating"]["list"][1]["query"] = {"query": "label_values(x, query)"}
    ts_panel = next(p for p in panels(broken) if p["type"] == "timeseries")
    ts_panel["options"]["legend"]["displayMode"] = "sideways"
    ts_panel["targets"][0]["format"] = "graph"
    errors = schema_errors(broken, validate)
    assert any("templating" in e for e in errors)
    assert any("timeseries.jsonschema.json" in e and "sideways" in e for e in errors)
    assert any("prometheus.jsonschema.json" in e and "graph" in e for e in errors)


def test_export_writes_v2_dashboards_only_when_asked_and_nothing_else_changes(tmp_path) -> None:
    pytest.importorskip("grafana_foundation_sdk")
    from spark_state_observer.cli import main

    assert main(["mixin", "export", "--out", str(tmp_path / "classic")]) == 0
    assert main(["mixin", "export", "--out", str(tmp_path / "v2"), "--dashboard-schema", "v2"]) == 0
    classic = {os.path.relpath(p, tmp_path / "classic") for p in glob.glob(str(tmp_path / "classic" / "**" / "*"), recursive=True)}
    v2 = {os.path.relpath(p, tmp_path / "v2") for p in glob.glob(str(tmp_path / "v2" / "**" / "*"), recursive=True)}
    assert classic == v2
    for rel in sorted(classic):
        path = tmp_path / "classic" / rel
        if path.is_dir():
            continue
        other = (tmp_path / "v2" / rel).read_text()
        if rel.startswith("dashboards/"):
            assert json.loads(path.read_text()) == load(os.path.basename(rel))  # classic stays the default
            assert json.loads(other)["apiVersion"] == "dashboard.grafana.app/v2"
        else:
            assert other == path.read_text(), rel
