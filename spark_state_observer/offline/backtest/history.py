"""The alert history of a backtest across applications: when each alert fired, resolved and fired again,
and which application each query ran in at that moment.

A fleet restarts a job as a new application (a new application id, the same query id on the same
checkpoint), so one alert instance (alert + labels, keyed by query id) spans several applications: the
crash-loop alert fires in the application that completes the loop, a failure resolves when the next
application starts the query and fires again when that one fails. The firings of a report say when; this
says where, from the event logs themselves: every ``QueryStartedEvent`` names the run, and the log's
``SparkListenerApplicationStart`` the application it ran in.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from spark_state_observer.model.bounded import clean_label
from spark_state_observer.offline.backtest.report import BacktestReport, Firing, QueryRun
from spark_state_observer.offline.eventlog import EventLogError, expand, read_records
from spark_state_observer.offline.log_identity import MAX_NAME_CHARS, app_start

FIRED, RESOLVED, REFIRED = "fired", "resolved", "re-fired"
GAP, CONTINUED = "gap", "continued"
"""An idle gap (no events, not scraped) cuts what is active: ``gap`` where the data stops, ``continued`` where
the same instance is active again when it resumes. Neither is a resolve or a re-fire: nothing was seen in between."""


@dataclass(frozen=True)
class Transition:
    """One change of one alert instance: ``change`` is fired, resolved, re-fired (fired again after it
    resolved), gap or continued (an idle gap of the data in between)."""

    time: float
    alert: str
    change: str
    labels: dict[str, str]
    application: str  # the id of the application running the query then ("" when no run of it had started)
    run: int  # which start of the query that was, 1 = the first one seen (0: none yet)


def query_runs(paths: list[str]) -> list[QueryRun]:
    """Every query start in ``paths``, with the application whose log records it, in time order.

    Unreadable logs or lines give no runs: the replay reports them as problems of its own.
    """
    runs: list[QueryRun] = []
    for path in expand(paths, []):
        start = app_start(path)
        app_id = clean_label(str(start.get("App ID") or ""), MAX_NAME_CHARS) if start else ""
        for record in read_records([path]):
            if isinstance(record, EventLogError) or record.kind != "started" or not isinstance(record.payload, dict):
                continue
            query_id, run_id = record.payload.get("id"), record.payload.get("runId")
            started = _started_at(record.payload.get("timestamp"))
            if isinstance(query_id, str) and isinstance(run_id, str) and started is not None:
                runs.append(QueryRun(query_id, run_id, app_id, started))
    runs.sort(key=lambda r: r.started)
    return runs


def _started_at(stamp: Any) -> float | None:
    """A ``QueryStartedEvent``'s ``timestamp`` (ISO 8601, UTC) as Unix time; None when it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None


def _running(runs: list[QueryRun], query_id: str, at: float) -> tuple[str, int]:
    """The application of the query's latest start at or before ``at``, and which start it was (1-based)."""
    mine = [r for r in runs if r.query_id == query_id]
    started = [r for r in mine if r.started <= at]
    return (started[-1].app_id, len(started)) if started else ("", 0)


def alert_history(report: BacktestReport) -> list[Transition]:
    """Every fire, resolve and re-fire of the report's alerts in time order (alerts only pending are left out:
    they never notified anyone)."""
    out: list[Transition] = []
    gap_starts = {start for start, _ in report.gaps}
    gap_ends = {end for _, end in report.gaps}
    fired_before: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    cut_by_gap: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    ordered: list[Firing] = sorted(report.fired(), key=lambda f: (f.firing_at or 0.0, f.alert))
    for f in ordered:
        assert f.firing_at is not None  # fired() keeps only those
        key = (f.alert, tuple(sorted(f.labels.items())))
        query_id = f.labels.get("query_id", "")
        app, run = _running(report.runs, query_id, f.firing_at)
        if key in cut_by_gap and f.pending_at in gap_ends:
            change = CONTINUED
        else:
            change = REFIRED if key in fired_before else FIRED
        cut_by_gap.discard(key)
        out.append(Transition(f.firing_at, f.alert, change, f.labels, app, run))
        fired_before.add(key)
        if f.resolved_at is not None:
            app, run = _running(report.runs, query_id, f.resolved_at)
            if f.resolved_at in gap_starts:
                cut_by_gap.add(key)
            out.append(Transition(f.resolved_at, f.alert, GAP if f.resolved_at in gap_starts else RESOLVED, f.labels, app, run))
    out.sort(key=lambda t: (t.time, t.change not in (RESOLVED, GAP), t.alert))
    return out
