"""What the state browser must say about each recorded incident, read from its ``truth.json``.

``scripts/record_incidents.py`` wrote each truth from the job itself (runs, restarts, the killed executor,
the injected growth, the exception it raised), never from the observer; the verdict tests
(``test_ui_verdict.py`` on the rules, ``test_ui_browser.py`` in Chromium) hold the browser to it.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def screenshots_module() -> ModuleType:
    """scripts/screenshots.py (it builds the histories the browser tests and the README pictures share)."""
    spec = importlib.util.spec_from_file_location("screenshots", os.path.join(ROOT, "scripts", "screenshots.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


# Recorded incidents no signal can see in what Spark reports, each with its reason (docs/precision.md says so too;
# tests/unit/test_precision.py holds the precision judge's misses to exactly these)
UNSEEN = {
    # a windowed count whose 5 % late rows (100 a batch) all share one key: the aggregation counts late *groups* after
    # its partial aggregation, 1 a batch, exactly what the clean late_trickle_aggregation (4 late rows a batch, the same
    # key) counts; no count Spark reports tells the two apart
    "late_lagging_aggregation": "rows dropped by the watermark",
}


@dataclass
class Expected:
    scenario: str
    query_id: str
    kind: str | None  # the most severe verdict's kind; None where it depends on the clock (an old open run reads "stalled")
    phrases: list[str] = field(default_factory=list)  # in that verdict's sentence
    among: str | None = None  # a kind that must be among the query's verdicts
    among_phrases: list[str] = field(default_factory=list)
    root_cause: str | None = None  # truth's expected root cause (the verdict's root cause holds it)
    failing_run_id: str | None = None
    alarming: bool = True  # False: a clean run, whose verdict must not ask for attention
    batches: bool = True  # the query has batches in the history (no page may say "no batches")
    # the kind and phrases hold at the recording's end (its last process's end), not on the clock: a crash loop of
    # drivers killed while running is over once its window (15 min) has passed with the newest run up
    at_end: bool = False


def expected(scenario: str, truth: dict[str, Any]) -> Expected:
    facts = truth["run_facts"]
    query_id = facts[0]["query_id"] if "query_id" in facts[0] else facts[0]["queries"][0]["query_id"]  # the clean hour: 4 queries
    has_batches = any(f.get("batches") for f in facts)
    failure = truth.get("failure")
    if failure and truth["runs"] > 1 and (failure.get("every_run") or truth.get("crash_loop")):
        return Expected(
            scenario,
            query_id,
            "crash_loop",
            [f"Crash loop: {len(truth['restarts'])} restarts in ", "; last error ", failure["expected_root_cause"]],
            root_cause=failure["expected_root_cause"],
            failing_run_id=facts[-1]["run_id"],
            batches=has_batches,
        )
    if truth.get("crash_loop") and not failure:
        # drivers killed without a word (scripts/record_deploys.py, SIGKILL): each run's end never seen, no error to name;
        # a loop while its restarts lie within the window, as SparkStreamingQueryCrashLooping says, then over
        return Expected(
            scenario, query_id, "crash_loop", [f"Crash loop: {len(truth['restarts'])} restarts in "], batches=has_batches, at_end=True
        )
    if failure:
        run = next(f for f in facts if f["run_dir"] == failure.get("failing_run", facts[-1]["run_dir"]))
        at_start = not run.get("batches")
        return Expected(
            scenario,
            query_id,
            "failed_at_start" if at_start else "failed",
            ["Failed at start at " if at_start else "Failed at ", failure["expected_root_cause"]],
            root_cause=failure["expected_root_cause"],
            failing_run_id=run["run_id"],
            batches=has_batches,
        )
    if truth.get("drivers_lost") and not truth.get("restarts"):
        # a driver killed and never restarted: only the watcher says lost (its log's silence, tests/unit/test_driver_lost.py);
        # a history replay wrote has an open run, which on the clock reads stalled
        return Expected(scenario, query_id, None)
    if truth.get("killed_executor_id") is not None:
        # Spark measures a reload's load time from 4.1 on; before, the reload is told from task placement, untimed
        timed = tuple(int(x) for x in str(truth.get("spark_version", "4.3")).split(".")[:2]) >= (4, 1)
        reload = "; restore " if timed else "; its state stores reloaded on other executors"
        return Expected(scenario, query_id, "executor_lost", [f"Executor {truth['killed_executor_id']} lost at ", reload])
    if truth.get("unbounded"):
        return Expected(
            scenario, query_id, "state_unbounded", [f"State unbounded: {truth['unbounded']['operator']} rows ", "nothing evicted"]
        )
    if truth.get("clean"):
        return Expected(scenario, query_id, None, alarming=False)
    kafka = {finding["kind"] for finding in truth.get("kafka", [])}
    if kafka & {"kafka_offsets_skipped", "kafka_latest_went_back"}:
        return Expected(scenario, query_id, "kafka_data_loss", ["Kafka input lost: ", f"on {truth['topic']}"])
    if "kafka_offsets_rewound" in kafka:
        return Expected(scenario, query_id, "kafka_data_loss", ["Kafka input read twice: ", f"on {truth['topic']}"])
    if kafka == {"kafka_partitions_added"}:  # a change of the topic the query follows, no incident
        return Expected(scenario, query_id, None, alarming=False)
    if kafka:  # its lag grew while it ran, and the run stopped: the lag verdict lasts while the run does (test_ui_kafka_lag.py)
        return Expected(scenario, query_id, None)
    if truth.get("stalls") or truth.get("falling_behind"):
        return Expected(scenario, query_id, None)  # over by now: the stall recovered, the run stopped
    if truth.get("trigger") == "availableNow":
        # a scheduled job's runs, each ending cleanly about every half minute, hours ago: its schedule stopped when the
        # recording did, so by the wall clock its next run is long overdue
        return Expected(scenario, query_id, "overdue", ["Overdue: a run every ", " was due at ", "its last run stopped cleanly at "])
    if scenario in UNSEEN:  # what Spark reports cannot show it: the browser says what it sees (stopped), no false verdict
        return Expected(scenario, query_id, None)
    if truth.get("late_rows"):
        # rows dropped as late by the watermark until the recording stopped the query: lost, so the verdict stays
        late = truth["late_rows"][0]
        phrases = ["Dropped late rows: from ", " the watermark dropped input by " + ", ".join(late["operators"]), "; the query stopped at "]
        if late.get("watermark_ahead_seconds", 0) > 3600:
            phrases.append(" ahead of the trigger time: a record from the future moved it")
        return Expected(scenario, query_id, "late_rows", phrases)
    assert truth["runs"] > 1, f"{scenario}: a kind of incident these expectations do not know"
    return Expected(scenario, query_id, None, among="restarted", among_phrases=["Restarted at ", " down; restore "])


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbook_anchors() -> set[str]:
    """The anchors of the generated runbook (alerts/runbook.md, written from spark_state_observer/mixin/runbook.md)."""
    with open(os.path.join(ROOT, "alerts", "runbook.md")) as f:
        return {slug(line[3:]) for line in f if line.startswith("## ")}
