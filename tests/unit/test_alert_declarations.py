"""Every alert is declared once (spark_state_observer.signals.alerts) and the declaration is complete: the rules
export no alert without one, and each one has its rule, its promtool case, its runbook section with what to do,
and the verdicts it names link a section that exists."""

from __future__ import annotations

import dataclasses
import re

from spark_state_observer.browser import verdict
from spark_state_observer.mixin.config import MixinConfig, Thresholds, load_config
from spark_state_observer.mixin.export import runbook, runbook_index
from spark_state_observer.mixin.rule_tests import CASE_BUILDERS, build_cases
from spark_state_observer.mixin.rules import alerting_rules
from spark_state_observer.model import signal_kinds
from spark_state_observer.signals.alerts import ALERTS, BY_NAME, SECTIONS_WITHOUT_ALERT

# every alert exported: SparkStreamingQueryDown only for queries declared as expected to run
EVERY = load_config(None, ["""expected_running_selector='query="orders"'"""])


def _sections() -> dict[str, str]:
    """Anchor -> body of each ``## `` section of the runbook."""
    found = re.split(r"^## (.+)$", runbook(), flags=re.MULTILINE)
    return {heading.strip().lower().replace(" ", "-"): body for heading, body in zip(found[1::2], found[2::2])}


def test_every_exported_alert_is_declared_and_every_declaration_exported() -> None:
    default = [r["alert"] for r in alerting_rules(MixinConfig())]
    every = [r["alert"] for r in alerting_rules(EVERY)]
    assert set(default) <= set(BY_NAME) and set(every) == set(BY_NAME)
    assert len(every) == len(set(every)) == len(ALERTS), "one rule per declaration"
    assert "SparkStreamingQueryDown" not in default, "a clean stop pages only for a query declared as expected to run"


def test_every_declaration_has_its_promtool_case_and_runbook_section_with_what_to_do() -> None:
    sections = _sections()
    assert set(CASE_BUILDERS) == set(BY_NAME)
    assert {c.alert for c in build_cases(EVERY)} == set(BY_NAME)
    for alert in ALERTS:
        assert alert.anchor in sections, f"runbook.md has no section '## {alert.name}'"
        assert "**Do**" in sections[alert.anchor], f"the section of {alert.name} says nothing to do"
        assert f"[{alert.name}](#{alert.anchor})" in runbook_index(), alert.name
        assert alert.summary, alert.name


def test_declared_thresholds_signals_and_defaults_are_real() -> None:
    thresholds = {f.name for f in dataclasses.fields(Thresholds)}
    kinds = {v for k, v in vars(signal_kinds).items() if k.isupper() and isinstance(v, str)}
    config = MixinConfig()
    for alert in ALERTS:
        assert set(alert.thresholds) <= thresholds, alert.name
        assert set(alert.signals) <= kinds, alert.name
        assert config.for_durations[alert.name] == alert.for_ and config.severities[alert.name] == alert.severity


def test_every_verdict_links_the_section_that_holds_its_fix() -> None:
    sections = _sections()
    for kind in verdict.SEVERITY:
        if kind in verdict.NO_RUNBOOK:
            continue
        anchor = verdict.ANCHORS.get(kind)
        assert anchor in sections, f"verdict {kind} links no runbook section"
        assert "**Do**" in sections[anchor], kind
    assert set(SECTIONS_WITHOUT_ALERT) <= set(sections)
    # the schema-change fix is under SparkStreamingQueryFailed: a crash loop of such failures links there
    assert "state schema" in sections[verdict.ANCHORS["failed"]].lower()
    events = [
        {"kind": signal_kinds.CRASH_LOOP, "ts": 100.0, "run_id": "r3", "attributes": {"window_seconds": 600, "min_restarts": 2}},
        {"kind": signal_kinds.QUERY_RESTARTED, "ts": 20.0, "run_id": "r2", "attributes": {}},
        {"kind": signal_kinds.QUERY_RESTARTED, "ts": 40.0, "run_id": "r3", "attributes": {}},
        {
            "kind": signal_kinds.QUERY_TERMINATED,
            "ts": 50.0,
            "run_id": "r3",
            "attributes": {"outcome": "exception", "exception_class": "state_schema"},
        },
    ]
    runs = [
        {"run_id": f"r{i}", "started": 20.0 * (i - 1), "ended": 20.0 * (i - 1) + 10, "outcome": "exception", "batches": 0}
        for i in (1, 2, 3)
    ]
    top = verdict.verdict(verdict.Facts(events, runs, now=100.0))
    assert top.kind == "crash_loop" and top.anchor == "sparkstreamingqueryfailed"
    assert top.runbook("") == "./runbook?section=sparkstreamingqueryfailed"
    assert top.runbook("https://wiki.acme.internal/rb") == "https://wiki.acme.internal/rb#sparkstreamingqueryfailed"
