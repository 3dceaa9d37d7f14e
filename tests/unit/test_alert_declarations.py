"""Every alert is declared once, next to the rule that raises it or the metrics it reads
(spark_state_observer.signals.alerts lists them), and the declaration is complete: the rules export no alert
without one, and each one has its rule, its promtool case, its runbook section with what to do, and the verdicts it
names link a section that exists and have their sentence. A new rule with its alert is one module and one
registry line: a throwaway one shows in the mixin's rules, the promtool cases and the runbook checks."""

from __future__ import annotations

import dataclasses
import re
import string
import sys

import pytest
from support import throwaway_rule

from spark_state_observer.browser import verdict
from spark_state_observer.browser.verdict_facts import TEMPLATES, say
from spark_state_observer.mixin.config import MixinConfig, Thresholds, load_config
from spark_state_observer.mixin.export import runbook, runbook_index, sections_missing
from spark_state_observer.mixin.rule_tests import CASE_BUILDERS, build_cases, rule_test_files
from spark_state_observer.mixin.rules import alerting_rules
from spark_state_observer.model import signal_kinds
from spark_state_observer.signals import registry
from spark_state_observer.signals.alerts import PRODUCERS, SECTIONS_WITHOUT_ALERT, by_name, declared

ALERTS = declared()
BY_NAME = by_name()

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
    assert sections_missing() == []
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


def test_every_declaration_lives_next_to_its_rule_or_the_metrics_it_reads() -> None:
    """A rule's alerts are its module's ``ALERTS``, set on its class; the others are a producer module's ``ALERTS``."""
    homes = {}
    for name, rule, _ in registry.RULES:
        module = sys.modules[rule.__module__]
        # a module of two rules (executors, partitions) gives its alerts to the one that raises them
        assert rule.alerts in ((), getattr(module, "ALERTS", None)), f"rule {name}: its alerts are not its module's declaration"
        homes.update({a.name: rule.__module__ for a in rule.alerts})
    for module in PRODUCERS:
        assert module.ALERTS and all(a.name not in homes for a in module.ALERTS), module.__name__
        homes.update({a.name: module.__name__ for a in module.ALERTS})
    assert sorted(homes) == sorted(BY_NAME)
    assert homes["SparkStateUnbounded"] == "spark_state_observer.signals.growth"
    assert homes["SparkStateObserverDroppingEvents"] == "spark_state_observer.metrics.families.observer"


def test_every_verdict_kind_has_its_declared_sentence() -> None:
    """Each verdict kind has a template; each template names a kind (or a kind's variant) and only named fields."""
    assert set(verdict.ORDER) <= set(TEMPLATES)
    for name, template in TEMPLATES.items():
        assert name.split(".")[0] in verdict.ORDER, name
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
        assert all(f.isidentifier() for f in fields), (name, fields)
    for alert in ALERTS:  # a template is declared with the alert whose verdicts it speaks for
        assert {n.split(".")[0] for n, _ in alert.verdict_text} <= set(alert.verdicts), alert.name
    # the sentence is the declaration's: a value with braces is shown as it is, never read as a field
    assert say("state_skewed", operator="agg {x}", partition=3) == "State skewed by key: agg {x} partition 3"


def test_a_new_rule_and_its_alert_are_one_module_and_one_registry_line(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = throwaway_rule.register(tmp_path, monkeypatch)
    assert by_name()[spec.name] is spec and spec.name not in BY_NAME
    every = load_config(None, ["""expected_running_selector='query="orders"'"""])  # read after the new line
    rules = {r["alert"]: r for r in alerting_rules(every)}
    assert rules[spec.name]["expr"] == f"max by (cluster, namespace, app, query, query_id) ({spec.flag}) == 1"
    assert rules[spec.name]["for"] == "2m" and rules[spec.name]["labels"] == {"severity": "warning"}
    assert rules[spec.name]["annotations"]["runbook_url"].endswith(f"#{spec.anchor}")
    assert next(c for c in build_cases(every) if c.alert == spec.name).fire_at == 4
    assert spec.name in rule_test_files(every)["queries.yml"]
    assert f"| [{spec.name}](#{spec.anchor}) | warning | 2m | {spec.summary} |" in runbook_index()
    # the runbook check reads the declarations: the new alert has no section yet, and it is the only one
    assert sections_missing() == [spec.name]
    config = load_config(None, [f"for_durations.{spec.name}=5m"])  # the configuration knows it too
    assert config.for_durations[spec.name] == "5m"
