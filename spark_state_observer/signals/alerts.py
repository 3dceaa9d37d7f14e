"""Every alert, listed from where it is declared: next to the rule that raises it, or next to the metrics it reads.

A rule module declares its alerts at its end (``ALERTS``) and sets them on its class (``Rule.alerts``); the
registry's rules give them here. An alert that no rule raises is declared in the module that produces its
metric or signal (``PRODUCERS``): the observer's own health, Kafka lag in seconds, progress figures.
The mixin's rules, their promtool cases, the configuration's defaults, the runbook's index and the browser's
verdict table and sentences read ``declared()``. A new rule and its alert are one module and one registry line.
"""

from __future__ import annotations

from spark_state_observer.metrics.families import capacity as capacity_metrics
from spark_state_observer.metrics.families import kafka as kafka_metrics
from spark_state_observer.metrics.families import observer as observer_metrics
from spark_state_observer.metrics.families import signals as signal_metrics
from spark_state_observer.metrics.families import state as state_metrics
from spark_state_observer.model.alert_spec import AlertSpec as AlertSpec  # declared in the model, for both layers
from spark_state_observer.signals import registry, skew

# modules that declare alerts no rule raises, each next to what produces its metric or signal
PRODUCERS = (skew, kafka_metrics, signal_metrics, state_metrics, capacity_metrics, observer_metrics)
# runbook sections with no alert of their own, by anchor: the verdicts whose fix they hold
SECTIONS_WITHOUT_ALERT = {"executor-lost": ("executor_lost",)}
# the sentences of the verdicts those sections hold (named fields, as ``AlertSpec.verdict_text``)
TEXT_WITHOUT_ALERT = {"executor_lost": "Executor {executor} lost at {at}"}


def declared() -> tuple[AlertSpec, ...]:
    """Every alert: the registered rules' (in the registry's order), then the producers'. Read at each call,
    so a rule added to the registry is seen at once."""
    found = [a for _, rule, _ in registry.RULES for a in rule.alerts]
    found += [a for module in PRODUCERS for a in module.ALERTS]
    names = [a.name for a in found]
    assert len(names) == len(set(names)), f"an alert declared twice: {sorted({n for n in names if names.count(n) > 1})}"
    return tuple(found)


def by_name() -> dict[str, AlertSpec]:
    return {a.name: a for a in declared()}


def verdict_anchors() -> dict[str, str]:
    """Browser verdict kind -> the runbook anchor of the section that holds its fix."""
    out = {kind: anchor for anchor, kinds in SECTIONS_WITHOUT_ALERT.items() for kind in kinds}
    for a in declared():
        for kind in a.verdicts:
            out.setdefault(kind, a.anchor)
    return out


def verdict_templates() -> dict[str, str]:
    """Template name (a verdict kind, or ``kind.variant``) -> the sentence the browser fills."""
    out = dict(TEXT_WITHOUT_ALERT)
    for a in declared():
        out.update(a.verdict_text)
    return out
