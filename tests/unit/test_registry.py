"""The metric catalog follows Prometheus conventions, is the only source of names, and the docs match it."""

from __future__ import annotations

import ast
import dataclasses
import glob
import importlib.util
import os
import re
import subprocess
import sys
import types

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import FIXTURES, ROOT, eventlog_dir
from spark_state_observer.exporters.exposition import family
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import CATALOG, GAUGE, MetricSpec, UnknownMetricError
from spark_state_observer.model.identity import APP_LABEL
from spark_state_observer.model.signal_kinds import SIGNAL_KINDS
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings, settings_table

HISTOGRAM_SAMPLE_LABELS = {"le"}


def test_names_follow_prometheus_conventions() -> None:
    for spec in CATALOG:
        name = spec.prometheus_name
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name), name
        assert (spec.prometheus_type == "counter") == name.endswith("_total"), name
        if spec.unit == "seconds":
            assert "_seconds" in name, name
        if spec.unit == "bytes":
            assert "_bytes" in name, name
        assert not re.search(r"_(ms|millis|milliseconds|kb|mb)(_|$)", name), f"{name}: use base units"
        assert spec.help.endswith(".") or spec.help.endswith(")"), name


def test_every_name_is_declared_once() -> None:
    names = [s.prometheus_name for s in CATALOG]
    assert len(names) == len(set(names)) == len(catalog.BY_NAME)


def test_no_two_metric_families_share_a_base_name_with_different_types() -> None:
    """Prometheus rejects a gauge and a counter whose exposition names collide."""
    seen: dict[str, str] = {}
    for spec in CATALOG:
        base = spec.prometheus_name[: -len("_total")] if spec.prometheus_name.endswith("_total") else spec.prometheus_name
        assert seen.setdefault(base, spec.prometheus_type) == spec.prometheus_type, base


def test_millisecond_metrics_are_scaled_to_seconds() -> None:
    for spec in catalog.CUSTOM_METRICS + catalog.OPERATOR_METRICS:
        if spec.key.endswith(("Ms", "Latency")) or spec.key.endswith("TimeMs"):
            assert spec.unit == "seconds" and spec.scale == catalog.MS, spec.key


def test_an_unknown_metric_is_an_error_not_a_gauge() -> None:
    with pytest.raises(UnknownMetricError, match="spark_state_rowz"):
        catalog.lookup("spark_state_rowz")
    impostor = MetricSpec("", "spark_state_rows", GAUGE, "rows", "Built outside the catalog.", "operator")
    with pytest.raises(UnknownMetricError):
        family(impostor)
    assert family(catalog.lookup("spark_state_rows")).type == "gauge"


def _read(*path: str) -> str:
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


def _generator() -> types.ModuleType:
    """scripts/update_readme.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("update_readme", os.path.join(ROOT, "scripts", "update_readme.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_reference_and_readme_summaries_are_current() -> None:
    readme, reference = _read("README.md"), _read("docs", "reference.md")
    assert catalog.reference_table() in reference, "docs/reference.md metric reference is stale: python scripts/update_readme.py"
    assert settings_table() in reference, "docs/reference.md settings table is stale: python scripts/update_readme.py"
    assert _generator().render(readme, reference) == (readme, reference), "README summaries are stale: python scripts/update_readme.py"


def test_reference_metric_table_lists_exactly_the_catalog() -> None:
    section = _read("docs", "reference.md").split("<!-- BEGIN METRICS -->")[1].split("<!-- END METRICS -->")[0]
    listed = re.findall(r"^\| `([a-z0-9_]+)` \|", section, re.M)
    assert listed == [s.prometheus_name for s in CATALOG]


def test_readme_summaries_name_every_setting_and_count_every_metric() -> None:
    readme = _read("README.md")
    settings = readme.split("<!-- BEGIN SETTINGS SUMMARY -->")[1].split("<!-- END SETTINGS SUMMARY -->")[0]
    named = [name for row in settings.strip().splitlines()[2:] for name in re.findall(r"`([a-z0-9_]+)`", row.split("|")[2])]
    assert sorted(named) == sorted(f.name for f in dataclasses.fields(Settings))
    metrics = readme.split("<!-- BEGIN METRICS SUMMARY -->")[1].split("<!-- END METRICS SUMMARY -->")[0]
    counts = [int(row.split("|")[4]) for row in metrics.strip().splitlines()[2:] if not row.startswith("| **all**")]
    assert sum(counts) == len(CATALOG) and f"**{len(CATALOG)}**" in metrics


def test_readme_names_every_signal_kind() -> None:
    readme = _read("README.md")
    assert [kind for kind in SIGNAL_KINDS if f"`{kind}`" not in readme] == [], "add the new signal kind to the README's Signals list"


def test_a_setting_outside_every_area_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    generator = _generator()
    monkeypatch.setattr(generator, "SETTING_AREAS", generator.SETTING_AREAS[1:])
    with pytest.raises(SystemExit, match="labels is in no area"):
        generator.settings_summary()


def test_metrics_command_prints_the_whole_catalog() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "spark_state_observer.cli", "metrics"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    printed = re.findall(r"^\| `([a-z0-9_]+)` \|", out.stdout, re.M)
    assert printed == [s.prometheus_name for s in CATALOG]


def _fixture_replays() -> list[list[str]]:
    """Each recorded scenario's event logs, its runs in order."""
    out = []
    for scenario in sorted(os.listdir(FIXTURES)):
        runs = sorted(glob.glob(os.path.join(FIXTURES, scenario, "run*")))
        logs = [eventlog_dir(r) for r in runs if os.path.isdir(os.path.join(r, "eventlog"))]
        if logs:
            out.append(logs)
    return out


def test_every_metric_a_replay_of_every_fixture_exports_is_in_the_catalog_with_its_labels() -> None:
    exported: set[str] = set()
    scenarios = _fixture_replays()
    assert len(scenarios) >= 4
    for logs in scenarios:
        text = replay(logs, Settings(http_enabled=False, history_enabled=False)).exposition()
        for fam in text_string_to_metric_families(text):
            spec = catalog.lookup(fam.name + "_total" if fam.type == "counter" else fam.name)
            assert fam.type == spec.prometheus_type, fam.name
            exported.add(spec.prometheus_name)
            for sample in fam.samples:
                # a replay knows its application's name (the log's SparkListenerApplicationStart), as the watcher does
                identity = {APP_LABEL} if spec.carries_app else set()
                assert set(sample.labels) - HISTOGRAM_SAMPLE_LABELS == set(spec.label_names) | identity, (sample.name, sample.labels)
    # the fixtures exercise the Spark fields, the lifecycle, the signals and the self-metrics alike
    assert {
        "spark_state_rows",
        "spark_streaming_query_restarts_total",
        "spark_state_restores_total",
        "spark_state_observer_events_received_total",
        "spark_state_observer_processing_duration_seconds",
    } <= exported


def test_no_metric_name_literal_outside_the_catalog() -> None:
    """Emitters refer to catalog specs: a ``"spark_..."`` string in the package (docstrings aside) is a name written twice.

    Names are written in the metric families the catalog assembles (``spark_state_observer/metrics/families``), nowhere else."""
    families = os.path.join(ROOT, "spark_state_observer", "metrics", "families")
    allowed = {os.path.relpath(path, ROOT) for path in glob.glob(os.path.join(families, "*.py"))}
    not_metric_names = {"spark_state_observer", "spark_version"}  # the Pushgateway job's default name; a key of the watcher's state file
    found = []
    for path in glob.glob(os.path.join(ROOT, "spark_state_observer", "**", "*.py"), recursive=True):
        relative = os.path.relpath(path, ROOT)
        if relative in allowed:
            continue
        with open(path) as f:
            tree = ast.parse(f.read())
        docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found += [
                    f"{relative}:{node.lineno}: {word}"
                    for word in re.findall(r"\bspark_[a-z0-9_]+", node.value)
                    if word not in not_metric_names
                ]
    assert not found, found


def test_the_catalog_refuses_a_name_twice_and_a_family_spec_left_out() -> None:
    """The check the catalog runs at import: what a slip in a family module would produce is refused."""
    with pytest.raises(ValueError, match="spark_streaming_batch_id is declared twice"):
        catalog._checked(catalog.CATALOG + (catalog.BATCH_ID,))
    with pytest.raises(ValueError, match=r"observer\.metrics\.families\.query\.BATCH_ID is not assembled"):
        catalog._checked(tuple(spec for spec in catalog.CATALOG if spec is not catalog.BATCH_ID))
    odd = MetricSpec("", "spark_state_odd", "summary", "", "Of an unknown kind.", "operator")
    with pytest.raises(ValueError, match="unknown kind"):
        catalog._checked(catalog.CATALOG + (odd,))
    assert catalog._checked(catalog.CATALOG) is catalog.CATALOG


def test_importing_the_catalog_needs_no_pyspark() -> None:
    script = "import sys, spark_state_observer.metrics, spark_state_observer.metrics.catalog; print(sorted(m for m in sys.modules if m.startswith('pyspark')))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
