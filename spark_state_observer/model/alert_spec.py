"""What one alert is: its declaration, written once next to what raises it.

A rule module declares the alerts of its signals; a metric family declares the alerts read straight from its
metrics (the observer's own health, progress figures). ``spark_state_observer.signals.alerts`` lists them all.
The class lives in the model so that both layers can declare one.
"""

from __future__ import annotations

from dataclasses import dataclass

CRITICAL, WARNING, INFO = "critical", "warning", "info"


@dataclass(frozen=True)
class AlertSpec:
    """One alert. ``anchor`` is its runbook section (the heading's slug). ``verdicts`` are the browser's verdict
    kinds whose fix that section holds. ``thresholds`` are the mixin threshold keys its rule reads (shared with
    the dashboards). ``signals`` are the observer's signal kinds it fires on.

    ``verdict_text`` maps a template's name to its sentence: the name is a verdict kind, or a kind and a variant
    (``late_rows.stopped``); the browser fills the named fields. ``flag`` names a per-query 0/1 gauge: the mixin
    then writes the alert's rule and promtool case itself (fires while the gauge is 1), with ``description``."""

    name: str
    group: str  # the rule group's suffix: queries, state, observer
    for_: str
    severity: str
    signals: tuple[str, ...] = ()
    verdicts: tuple[str, ...] = ()
    thresholds: tuple[str, ...] = ()
    summary: str = ""  # the runbook index's one line
    verdict_text: tuple[tuple[str, str], ...] = ()
    flag: str = ""
    description: str = ""

    @property
    def anchor(self) -> str:
        return self.name.lower()
