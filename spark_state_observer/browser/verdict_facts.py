"""What the verdict rules read and what they give: the query's facts, a verdict, and the verdict kinds by severity.

The kinds' order, their levels, icons and runbook links are here, so the pages and the MCP server that show a
verdict share them with the rules (``spark_state_observer.browser.verdict``) that make it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Mapping, Sequence, get_args

from spark_state_observer.browser import fmt
from spark_state_observer.browser.kafka_restart import KafkaRestart
from spark_state_observer.signals.alerts import verdict_anchors, verdict_templates

# the runbook section that holds each verdict's fix: declared with the alerts (spark_state_observer.signals.alerts)
ANCHORS = verdict_anchors()
# each verdict's sentence, declared with its alert; the two that name no incident are the browser's own
TEMPLATES = {
    **verdict_templates(),
    "healthy": "Healthy: {running}{every}",
    "no_data": "No batch and no run in the history yet",
}


def say(template: str, **fields: object) -> str:
    """The declared sentence ``template`` (a verdict kind, or ``kind.variant``) with its named fields filled."""
    return TEMPLATES[template].format_map(fields)


# the verdict kinds, most severe first (the MCP server's tools take and give them too)
VerdictKind = Literal[
    "crash_loop",
    "failed_at_start",
    "failed",
    "lost",
    "kafka_data_loss",
    "stalled",
    "overdue",
    "late_rows",
    "state_unbounded",
    "falling_behind",
    "kafka_lag",
    "snapshot_lagging",
    "state_skewed",
    "executor_lost",
    "restarted",
    "stopped",
    "healthy",
    "no_data",
]
ORDER: tuple[str, ...] = get_args(VerdictKind)
SEVERITY = {kind: i for i, kind in enumerate(ORDER)}
# how a verdict is shown: the most severe one up to each of these is an error (the query cannot run, or lost
# input), a warning (it runs badly, or its scheduled run is overdue), an information (it recovered, or stopped);
# the rest are fine
LEVELS = (("error", SEVERITY["kafka_data_loss"]), ("warning", SEVERITY["state_skewed"]), ("info", SEVERITY["stopped"]))
ATTENTION_UP_TO = SEVERITY["restarted"]  # up to here a query is in the Queries page's attention list
NO_RUNBOOK = ("healthy", "no_data")  # nothing to do, so nothing to link
RUNBOOK_PAGE = "runbook"  # the browser's own rendered runbook (spark_state_observer.browser.views.runbook)
# Streamlit's bundled Material icons (emoji need a colour-emoji font the viewer may not have), by level
LEVEL_ICONS = {
    "error": ":material/error:",
    "warning": ":material/warning:",
    "info": ":material/info:",
    "success": ":material/check_circle:",
}
KIND_ICONS = {"stopped": ":material/stop_circle:", "no_data": ":material/help:"}


@dataclass(frozen=True)
class Verdict:
    kind: str
    text: str  # the sentence, e.g. "Crash loop: 4 restarts in 2 min; last error RuntimeError: ..."
    since: float | None = None  # when the incident started (epoch seconds)
    root_cause: str | None = None
    trace: str | None = None  # the full exception text, for an expander
    run_id: str | None = None
    section: str | None = None  # a runbook anchor other than the kind's (a crash loop whose fix is by its failure)

    @property
    def severity(self) -> int:
        return SEVERITY[self.kind]

    @property
    def level(self) -> str:
        """error, warning, info or success (``LEVELS``): the banner it is shown in."""
        return next((name for name, up_to in LEVELS if self.severity <= up_to), "success")

    @property
    def icon(self) -> str:
        return KIND_ICONS.get(self.kind) or LEVEL_ICONS[self.level]

    @property
    def anchor(self) -> str | None:
        return None if self.kind in NO_RUNBOOK else self.section or ANCHORS.get(self.kind)

    def runbook(self, base_url: str = "") -> str | None:
        """The link to the section holding this verdict's fix: under ``base_url`` when one is set (a runbook of
        your own), else the browser's own runbook page, which scrolls to the section."""
        if not self.anchor:
            return None
        return f"{base_url}#{self.anchor}" if base_url else f"./{RUNBOOK_PAGE}?section={self.anchor}"


@dataclass
class Facts:
    """What the rules read, in plain Python: events and runs oldest first."""

    events: Sequence[Mapping[str, Any]]  # kind, ts, run_id, attributes (dict)
    runs: Sequence[Mapping[str, Any]]  # run_id, started, ended, outcome, exception, batches (count in the history)
    last_batch_ts: float | None = None
    interval: float | None = None  # typical seconds between batches
    now: float | None = None
    kafka_lag: Mapping[str, float] = field(default_factory=dict)  # records behind the latest per topic, newest batch
    kafka_restart: KafkaRestart | None = None  # the newest restart's Kafka backlog and catch-up (``kafka_restart``)


def last_event(events: Iterable[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    """The newest event of ``kind`` (events oldest first), or None."""
    found = None
    for e in events:
        if e["kind"] == kind:
            found = e
    return found


def run_outcome(run: Mapping[str, Any]) -> str | None:
    """How a run ended as the history stores it (clean, exception), or None for a run not seen ending."""
    value = run.get("outcome")
    return None if fmt.missing(value) else str(value)
