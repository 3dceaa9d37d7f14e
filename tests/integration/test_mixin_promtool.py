"""The mixin's PrometheusRule carries the rule files and passes a real promtool."""

from __future__ import annotations

import subprocess

import yaml
from test_mixin import CUSTOM

from conftest import need
from spark_state_observer.mixin.config import load_config
from spark_state_observer.mixin.prometheus_operator import objects
from spark_state_observer.mixin.rules import rule_documents


def test_prometheus_rule_carries_the_rule_files_and_passes_promtool(tmp_path) -> None:
    config = load_config(CUSTOM)
    rule = objects(config)["prometheusrule.yaml"]
    docs = rule_documents(config)
    assert rule["spec"]["groups"] == docs["recording.yml"]["groups"] + docs["rules.yml"]["groups"]
    path = tmp_path / "spec.yml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    result = subprocess.run([need("promtool"), "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
