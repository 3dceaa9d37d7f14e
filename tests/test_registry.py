"""The metric registry follows Prometheus conventions and is the only source of names."""

from __future__ import annotations

import os
import re

from conftest import ROOT
from observer import registry
from observer.selfmetrics import SELF_METRICS
from observer.settings import settings_table

ALL = registry.CATALOG + SELF_METRICS


def test_names_follow_prometheus_conventions() -> None:
    for spec in ALL:
        name = spec.prometheus_name
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name), name
        assert (spec.prometheus_type == "counter") == name.endswith("_total"), name
        if spec.unit == "seconds":
            assert "_seconds" in name, name
        if spec.unit == "bytes":
            assert "_bytes" in name, name
        assert not re.search(r"_(ms|millis|milliseconds|kb|mb)(_|$)", name), f"{name}: use base units"
        assert spec.help.endswith(".") or spec.help.endswith(")"), name


def test_no_two_metric_families_share_a_base_name_with_different_types() -> None:
    """Prometheus rejects a gauge and a counter whose exposition names collide."""
    seen: dict[str, str] = {}
    for spec in ALL:
        base = spec.prometheus_name[: -len("_total")] if spec.prometheus_name.endswith("_total") else spec.prometheus_name
        assert seen.setdefault(base, spec.prometheus_type) == spec.prometheus_type, base


def test_millisecond_metrics_are_scaled_to_seconds() -> None:
    for spec in registry.CUSTOM_METRICS + registry.OPERATOR_METRICS:
        if spec.key.endswith(("Ms", "Latency")) or spec.key.endswith("TimeMs"):
            assert spec.unit == "seconds" and spec.scale == registry.MS, spec.key


def test_readme_reference_tables_are_current() -> None:
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    assert registry.reference_table() in readme, "README metric reference is stale: python scripts/update_readme.py"
    assert settings_table() in readme, "README settings table is stale: python scripts/update_readme.py"
