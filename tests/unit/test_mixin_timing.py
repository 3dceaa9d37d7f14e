"""Alert timing against the fleet's own defaults, and a runbook link a user can open (issue 26).

The mixin export refuses a ``for`` that cannot fire for a query whose application ended (its series are
dropped ``--grace-seconds`` after the end): the refusal is checked against promtool itself, which must fail
the generated test of exactly such a configuration and pass the longest ``for`` the export accepts.
"""

from __future__ import annotations

import argparse
import os

import pytest

from conftest import ROOT
from spark_state_observer.cli import watch
from spark_state_observer.fleet.runtime import WatchOptions
from spark_state_observer.mixin.config import AFTER_END_ALERTS, LASTING_ALERTS, MixinConfig, MixinConfigError, load_config
from spark_state_observer.mixin.export import artefacts
from spark_state_observer.settings import Settings


def _watch_defaults() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    watch.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["watch", "logs"])


def test_the_fleet_section_mirrors_the_watcher_and_history_defaults() -> None:
    """The export checks against the values the watcher and the history really use by default."""
    fleet = MixinConfig().fleet
    assert fleet.grace_seconds == _watch_defaults().grace_seconds == WatchOptions().grace_seconds
    assert fleet.history_max_age_seconds == Settings().history_max_age_seconds
    assert fleet.query_status_retention_days == Settings().query_status_retention_days


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


def test_the_lasting_alerts_are_checked_against_the_lasting_state_and_the_history() -> None:
    """Failed and CrashLooping read the lasting state (days, not the grace): a for past the grace fires, one past
    the retention never does, and a retention the history does not keep the failure's cause for is refused."""
    for alert in LASTING_ALERTS:
        load_config(None, [f"for_durations.{alert}=10m"])  # past the 300 s grace: the lasting state still fires it
        with pytest.raises(MixinConfigError, match=rf"for_durations\.{alert}:.*fleet\.query_status_retention_days"):
            load_config(None, [f"for_durations.{alert}=2h", "fleet.query_status_retention_days=0.05"])
    with pytest.raises(MixinConfigError, match=r"fleet\.query_status_retention_days: .*at least 864000"):
        load_config(None, ["fleet.query_status_retention_days=10"])  # the history keeps 7 days by default
    load_config(None, ["fleet.query_status_retention_days=10", "fleet.history_max_age_seconds=864000"])
    with pytest.raises(MixinConfigError, match=r"fleet\.query_status_retention_days must be above 0"):
        load_config(None, ["fleet.query_status_retention_days=0"])


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
        "http://127.0.0.1:8501/app/static/runbook.md",  # the old default: dead for everyone but its first viewer
        "http://localhost:8501/runbook",
        "http://[::1]:8501/runbook",
    ],
)
def test_a_placeholder_runbook_address_is_refused(url: str) -> None:
    with pytest.raises(MixinConfigError, match="runbook_base_url"):
        load_config(None, [f"runbook_base_url={url!r}" if url else "runbook_base_url=''"])


def test_a_real_runbook_address_is_taken() -> None:
    config = load_config(None, ["runbook_base_url=https://wiki.acme.internal/spark/runbook"])
    rules = artefacts(config)["alerts/rules.yml"]
    assert "https://wiki.acme.internal/spark/runbook#sparkstreamingqueryfailed" in rules


def test_an_unset_runbook_address_links_the_exported_runbook_and_export_warns(tmp_path, capsys) -> None:
    """No loopback default: unset, each alert links its section of the runbook.md written next to the rules, the
    Kubernetes objects carry no address of one machine, and `mixin export` says so on standard error."""
    from spark_state_observer.cli.main import main

    files = artefacts(load_config(None, []))
    assert "runbook_url: runbook.md#sparkstreamingqueryfailed" in files["alerts/rules.yml"]
    runbook_lines = [line for text in files.values() for line in text.splitlines() if "runbook" in line.lower()]
    assert runbook_lines and not any("127.0.0.1" in line or "localhost" in line for line in runbook_lines)
    assert main(["mixin", "export", "--out", str(tmp_path / "out")]) == 0
    assert "runbook_base_url is unset" in capsys.readouterr().err
    main(["mixin", "export", "--out", str(tmp_path / "set"), "--config", os.path.join(ROOT, "tests", "data", "mixin-custom.yaml")])
    assert "runbook_base_url" not in capsys.readouterr().err
