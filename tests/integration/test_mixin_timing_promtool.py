"""Split from tests/unit/test_mixin_timing.py: the tests of it that need promtool and the state browser."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import urllib.request

import pytest
import yaml

from conftest import ROOT, Server, free_port, need
from spark_state_observer.mixin.config import MixinConfig, load_config
from spark_state_observer.mixin.rule_tests import build_cases, case_document
from spark_state_observer.mixin.rules import alerting_rules, rule_files

EXPECTED = """expected_running_selector='query="orders"'"""  # SparkStreamingQueryDown is exported for the queries expected to run


def _promtool_down_test(config: MixinConfig, tmp_path, name: str) -> subprocess.CompletedProcess[str]:
    """The generated promtool test of SparkStreamingQueryDown for ``config`` (not validated), run by promtool."""
    (case,) = [c for c in build_cases(config) if c.alert == "SparkStreamingQueryDown"]
    rule = next(r for r in alerting_rules(config) if r["alert"] == "SparkStreamingQueryDown")
    folder = tmp_path / name
    folder.mkdir()
    for file, text in rule_files(config).items():
        (folder / file).write_text(text)
    test = folder / "down.yml"
    test.write_text(
        yaml.safe_dump({"rule_files": ["rules.yml", "recording.yml"], "evaluation_interval": "1m", "tests": [case_document(case, rule)]})
    )
    return subprocess.run([need("promtool"), "test", "rules", "down.yml"], capture_output=True, text=True, cwd=folder, check=False)


def test_promtool_agrees_with_the_refusal(tmp_path) -> None:
    """Series dropped at the grace: the longest accepted ``for`` fires before, the refused old default never does."""
    longest = load_config(None, ["for_durations.SparkStreamingQueryDown=3m", EXPECTED])
    accepted = _promtool_down_test(longest, tmp_path, "accepted")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    old = dataclasses.replace(
        load_config(None, [EXPECTED]), for_durations={**MixinConfig().for_durations, "SparkStreamingQueryDown": "10m"}
    )
    refused = _promtool_down_test(old, tmp_path, "refused")
    assert refused.returncode != 0 and "SparkStreamingQueryDown" in refused.stdout + refused.stderr


@pytest.mark.slow
def test_the_runbook_file_opens_in_the_state_browser(tmp_path) -> None:
    """The runbook as a file at the address links written before its /runbook page used: every alert's section
    is there (the page itself is checked in a browser: tests/integration/test_ui_runbook.py)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/app/static/runbook.md"
    args = [sys.executable, "-m", "spark_state_observer.cli", "ui", "--port", str(port), "--history", str(tmp_path / "h.db")]
    server = Server(args, url, cwd=ROOT)
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode("utf-8")
    finally:
        server.stop()
    with open(os.path.join(ROOT, "alerts", "runbook.md"), encoding="utf-8") as f:
        assert text == f.read()
    for alert in MixinConfig().for_durations:
        assert f"## {alert}" in text, alert
