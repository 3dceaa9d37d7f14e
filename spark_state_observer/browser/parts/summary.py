"""A query's line in the Queries and Applications tables: its verdict, health, newest figures,
sparklines and last restart and restore, read from the data layer."""

from __future__ import annotations

from typing import Any

import pandas as pd

from spark_state_observer.browser import data, fmt
from spark_state_observer.browser.context import Context, label
from spark_state_observer.browser.health import LIFECYCLE_KINDS, derive_health, typical_interval
from spark_state_observer.browser.verdict import Verdict, headline
from spark_state_observer.model.query_lifecycle import RETIRED, TROUBLE

SPARK_POINTS = 60


def _downsample(values: pd.Series) -> list[float]:
    """At most SPARK_POINTS values for a sparkline (mean of equal chunks)."""
    clean = values.dropna().astype(float)
    if len(clean) <= SPARK_POINTS:
        return clean.tolist()
    return clean.groupby(pd.RangeIndex(len(clean)) * SPARK_POINTS // len(clean)).mean().tolist()


def restore_text(events: pd.DataFrame) -> str:
    """The newest restore, summed over its operators, naming the slowest: '6.8 s (2 operators, slowest stateStoreSave 6.4 s)'."""
    restores = events[events.kind == "restore"]
    if restores.empty:
        return "-"
    newest = restores[restores.ts == restores.ts.max()]
    seconds = [(a.get("operator") or "?", float(a.get("duration_seconds") or 0.0)) for a in newest.attributes]
    total = sum(s for _, s in seconds)
    text = f"{fmt.when(newest.ts.iloc[0])}: {fmt.duration(total)}"
    if len(seconds) > 1:
        slowest = max(seconds, key=lambda s: s[1])
        text += f" ({len(seconds)} operators, slowest {slowest[0]} {fmt.duration(slowest[1])})"
    return text


def restart_text(events: pd.DataFrame) -> str:
    restarts = events[events.kind == "query_restarted"]
    if restarts.empty:
        return "-"
    down = restarts.attributes.iloc[-1].get("downtime_seconds")
    return fmt.when(restarts.ts.iloc[-1]) + (f" ({fmt.duration(down)} down)" if down is not None else "")


def summary_row(ctx: Context, q: pd.Series, now: float, found: list[Verdict]) -> dict[str, Any]:
    """One line of the table: verdict (``found``, most severe first), health, newest figures, sparklines,
    last restart and restore."""
    recent = data.recent_batches(ctx.history, ctx.tok, q.query_id)
    span = data.span(ctx.history, ctx.tok, q.query_id)
    events = data.recent_events(ctx.history, ctx.tok, q.query_id)
    lifecycle = events[events.kind.isin(LIFECYCLE_KINDS)]
    last = recent.iloc[-1] if len(recent) else None
    health = derive_health(
        q.last_outcome,
        lifecycle.kind.iloc[-1] if len(lifecycle) else None,
        lifecycle.ts.iloc[-1] if len(lifecycle) else None,
        last.ts if last is not None else None,
        typical_interval(recent.ts.tolist()),
        now,
    )
    # the watcher's lasting state wins: failed until a later run runs, retired once an operator retired it
    lasting = data.lasting_states(ctx.history, ctx.tok).get(q.query_id)
    if lasting == RETIRED:
        health = "retired"
    elif lasting in TROUBLE:
        health = "failed"
    top = found[0]

    def value(column: str) -> float | None:
        return None if last is None or fmt.missing(last[column]) else float(last[column])

    return {
        "query": label(ctx.all_queries, q.query_id),
        "verdict": headline(found),
        "since": fmt.when(top.since) if top.kind not in ("healthy", "stopped") else "-",
        "runbook": top.runbook(ctx.config.runbook_url),
        "health": health,
        "application": q.app,
        "last batch at": fmt.when(value("ts")),
        "batches": int(span["batches"]),
        "runs": int(q.runs),
        "batch duration": fmt.duration(None if value("duration_ms") is None else value("duration_ms") / 1000.0),  # type: ignore[operator]
        "batch ms trend": _downsample(recent.duration_ms),
        "processed rows/s": fmt.number(value("processed_rps"), 1),
        "processed rows/s trend": _downsample(recent.processed_rps),
        "input rows/s": fmt.number(value("input_rps"), 1),
        "state rows": fmt.number(value("state_rows")),
        "state rows trend": _downsample(recent.state_rows),
        "state memory": fmt.size(value("state_memory_bytes")),
        "last restart": restart_text(events),
        "last restore": restore_text(events),
        "last batch": fmt.number(q.last_batch_id),
        "query id": q.query_id,
    }


def table_for(ctx: Context, frame: pd.DataFrame, now: float, found: dict[str, list[Verdict]]) -> pd.DataFrame:
    return pd.DataFrame([summary_row(ctx, q, now, found[q.query_id]) for q in frame.itertuples()])
