"""Alert timing against the fleet's own defaults, and a runbook link a user can open (issue 26).

The mixin export refuses a ``for`` that cannot fire for a query whose application ended (its series are
dropped ``--grace-seconds`` after the end): the refusal is checked against promtool itself, which must fail
the generated test of exactly such a configuration and pass the longest ``for`` the export accepts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import urllib.request

import pytest
import yaml

from conftest import ROOT, Server, free_port, need
from observer.cli import watch
from observer.fleet.runtime import WatchOptions
from observer.mixin.config import AFTER_END_ALERTS, DEFAULT_RUNBOOK_URL, MixinConfig, MixinConfigError, load_config
from observer.mixin.export import artefacts
from observer.mixin.rule_tests import build_cases, case_document
from observer.mixin.rules import alerting_rules, rule_files
from observer.settings import Settings


def _watch_defaults() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    watch.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["watch", "logs"])


def test_the_fleet_section_mirrors_the_watcher_and_history_defaults() -> None:
    """The export checks against the values the watcher and the history really use by default."""
    fleet = MixinConfig().fleet
    assert fleet.grace_seconds == _watch_defaults().grace_seconds == WatchOptions().grace_seconds
    assert fleet.history_max_age_seconds == Settings().history_max_age_seconds


def test_the_old_default_down_for_is_refused_and_the_new_defaults_pass() -> None:
    MixinConfig().validate()  # SparkStreamingQueryDown for 2m: fires within the default 300 s grace
    with pytest.raises(MixinConfigError) as refused:
        load_config(None, ["for_durations.SparkStreamingQueryDown=10m"])
    message = str(refused.value)
    assert "for_durations.SparkStreamingQueryDown" in message and "fleet.grace_seconds" in message
    assert "shorten it to at most 3m" in message and "at least 690" in message
    load_config(None, ["for_durations.SparkStreamingQueryDown=10m", "fleet.grace_seconds=690"])
    load_config(None, ["for_durations.SparkStreamingQueryDown=3m"])  # the longest accepted under the defaults
    with pytest.raises(MixinConfigError, match=r"fleet\.history_max_age_seconds"):
        load_config(None, ["fleet.history_max_age_seconds=60"])  # nothing about an ended query outlives the history
    with pytest.raises(MixinConfigError, match=r"fleet\.evaluation_interval"):
        load_config(None, ["fleet.evaluation_interval=1.5m"])
    for alert in AFTER_END_ALERTS:  # each alert about an ended query is checked
        with pytest.raises(MixinConfigError, match=rf"for_durations\.{alert}:"):
            load_config(None, [f"for_durations.{alert}=10m"])
    with pytest.raises(MixinConfigError, match=r"for_durations\.SparkStreamingQueryDown:"):
        load_config(None, ["fleet.evaluation_interval=3m"])  # a slower Prometheus needs longer than the grace for Down's 2m


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
    longest = load_config(None, ["for_durations.SparkStreamingQueryDown=3m"])
    accepted = _promtool_down_test(longest, tmp_path, "accepted")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    old = dataclasses.replace(MixinConfig(), for_durations={**MixinConfig().for_durations, "SparkStreamingQueryDown": "10m"})
    refused = _promtool_down_test(old, tmp_path, "refused")
    assert refused.returncode != 0 and "SparkStreamingQueryDown" in refused.stdout + refused.stderr


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/spark-state-observer/spark-state-observer/blob/main/alerts/runbook.md",  # the old default: no such repository
        "https://wiki.example.com/runbooks",
        "http://example.org",
        "https://runbooks.invalid/x",
        "https://<your-wiki>/runbook.md",
        "https://wiki/TODO",
        "runbook.md",
        "file:///tmp/runbook.md",
        "",
    ],
)
def test_a_placeholder_runbook_address_is_refused(url: str) -> None:
    with pytest.raises(MixinConfigError, match="runbook_base_url"):
        load_config(None, [f"runbook_base_url={url!r}" if url else "runbook_base_url=''"])


def test_a_real_runbook_address_is_taken() -> None:
    config = load_config(None, ["runbook_base_url=https://wiki.acme.internal/spark/runbook"])
    rules = artefacts(config)["alerts/rules.yml"]
    assert "https://wiki.acme.internal/spark/runbook#sparkstreamingquerydown" in rules


@pytest.mark.slow
def test_the_default_runbook_link_opens_in_the_state_browser(tmp_path) -> None:
    """The default runbook_base_url, on the browser started with its defaults but a free port: every
    alert's section is there."""
    port = free_port()
    url = DEFAULT_RUNBOOK_URL.replace(":8501/", f":{port}/")
    assert url != DEFAULT_RUNBOOK_URL
    args = [sys.executable, "-m", "observer.cli", "ui", "--port", str(port), "--history", str(tmp_path / "h.db")]
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
