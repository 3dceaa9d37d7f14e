"""What the MCP tools answer: plain words for the assistant to repeat, and the same facts as data.

Every answer is read from the history through the browser's own readers and judged by the browser's own
verdict rules (``spark_state_observer.browser.verdict``, pure functions with no Streamlit in them), from the
same inputs its pages read (``spark_state_observer.browser.data.facts``), so an assistant and the browser
never disagree about a query. Nothing here writes: the history is opened read-only and checkpoints are only
read, and only under the configured roots.

Answers are bounded: lists are paged with a capped ``limit``, texts and nested data are cut at fixed sizes,
and a fleet larger than ``MAX_FLEET`` queries is judged on its newest ones (the answer says so). Names and
texts from the data are quoted (JSON string syntax: control characters escaped) and made encodable (a lone
surrogate from a file name is shown as its escape), so no stored value can pass for the answer's own words.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from spark_state_observer.browser.health import typical_interval
from spark_state_observer.browser.verdict import SEVERITY, Facts, Verdict, kafka_lag_of, verdicts
from spark_state_observer.history import browse, loaders
from spark_state_observer.history.store import HistoryError
from spark_state_observer.model.signal_kinds import RESTORE_FINISHED, RESTORE_PROGRESS_KINDS

MAX_LIMIT = 200  # items per page of any list
DEFAULT_LIMIT = 50
MAX_FLEET = 2000  # queries judged per answer (newest seen first)
JUDGE_SECONDS = 30.0  # an answer over the fleet stops judging after this long and says how far it got
MAX_SIGNALS = 20  # recent signals in an explanation
MAX_RUNS = 5  # newest runs in an explanation
MAX_TRACE_CHARS = 4000
MAX_TEXT_CHARS = 2000  # any one string in the data
MAX_ITEMS = 100  # any one list in nested data (a checkpoint's report)
MAX_ANSWER_CHARS = 30_000  # the plain-words text of one answer
MAX_ARGUMENT_CHARS = 4096
LEVELS = ("error", "warning", "info", "success")
RESTORE_EVENTS_READ = 500  # restore progress events read per query, newest first


class AnswerError(ValueError):
    """A request that cannot be answered; the message says why and what to ask instead."""


@dataclass(frozen=True)
class Answer:
    text: str
    data: dict[str, Any]


# --- making stored values safe to show --------------------------------------------------------------


def safe_text(value: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``value`` encodable as UTF-8 (a lone surrogate shown as its escape) and at most ``limit`` characters."""
    text = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quoted(value: Any, limit: int = 200) -> str:
    """A name from the data as a JSON string literal: quoted, control characters escaped, bounded."""
    return json.dumps(safe_text(str(value), limit), ensure_ascii=False)


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as bounded JSON data: NaN and infinities as null, numpy scalars as numbers, strings made safe,
    lists cut at ``MAX_ITEMS``, nesting cut at 8 levels."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):  # a numpy scalar
        try:
            return plain(value.item(), depth)
        except (TypeError, ValueError):
            return safe_text(str(value))
    if depth >= 8:
        return safe_text(json.dumps(value, default=str))
    if isinstance(value, Mapping):
        return {safe_text(str(k), 200): plain(v, depth + 1) for k, v in list(value.items())[:MAX_ITEMS]}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v, depth + 1) for v in list(value)[:MAX_ITEMS]]
    return safe_text(str(value))


def argument(value: str, what: str) -> str:
    """A text argument as the history can be asked about it: stripped, bounded, valid Unicode."""
    if len(value) > MAX_ARGUMENT_CHARS:
        raise AnswerError(f"{what} is {len(value)} characters long; at most {MAX_ARGUMENT_CHARS} are read")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise AnswerError(f"{what} {quoted(value)} is not valid Unicode text (it holds a lone surrogate)") from None
    if "\x00" in value:
        raise AnswerError(f"{what} {quoted(value)} holds a NUL character")
    return value.strip()


def page(offset: int, limit: int) -> tuple[int, int]:
    if offset < 0:
        raise AnswerError(f"offset must be 0 or more, not {offset}")
    if limit < 1:
        raise AnswerError(f"limit must be 1 or more, not {limit}")
    return offset, min(limit, MAX_LIMIT)


def at_time(at: float | None) -> float:
    """The verdicts' "now": ``at`` (epoch seconds, to judge a history as of a past moment) or the clock."""
    if at is None:
        return time.time()
    if not math.isfinite(at) or not 0 <= at < 1e11:
        raise AnswerError(f"at must be epoch seconds between 0 and 1e11, not {at}")
    return float(at)


def clock(ts: Any) -> str | None:
    if not isinstance(ts, (int, float)) or not math.isfinite(ts):
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(ts)))


def bounded(text: str) -> str:
    return text if len(text) <= MAX_ANSWER_CHARS else text[: MAX_ANSWER_CHARS - 60] + "\n… (cut here: ask for a smaller page)"


# --- the history ---------------------------------------------------------------------------------------


def read_history(fn: Callable[..., Any], history: str, *args: Any) -> Any:
    """A reader's result, its failures said as an ``AnswerError`` (never a traceback)."""
    try:
        return fn(history, *args)
    except HistoryError as exc:
        raise AnswerError(f"the history cannot be read: {exc}") from None
    except (sqlite3.Error, pd.errors.DatabaseError, OSError) as exc:  # the PostgreSQL backend says its errors as HistoryError
        raise AnswerError(f"the history cannot be read ({type(exc).__name__}: {exc}); is it a spark-state-observer history?") from None


def _records(frame: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in frame.to_dict("records")]


def facts(history: str, query_id: str, now: float) -> Facts:
    """What the verdict rules read about one query, read as the browser reads it (``browser.data.facts``)."""
    recent = read_history(loaders.load_recent_batches, history, query_id)
    events = read_history(browse.load_recent_events, history, query_id)
    runs = read_history(browse.load_run_stats, history, query_id)
    return Facts(
        events=_records(events),
        runs=_records(runs),
        last_batch_ts=float(recent.ts.iloc[-1]) if len(recent) else None,
        interval=typical_interval(recent.ts.tolist()),
        now=now,
        kafka_lag=newest_kafka_lag(history, query_id),
    )


def newest_kafka_lag(history: str, query_id: str) -> dict[str, float]:
    try:
        tail = read_history(loaders.load_progress_tail, history, query_id, None, 1)
    except (ValueError, RecursionError):  # a stored progress that is not JSON: no lag, not a failed answer
        return {}
    return kafka_lag_of(tail[-1]) if tail and isinstance(tail[-1], dict) else {}


@dataclass(frozen=True)
class Query:
    query_id: str
    name: str
    app: str
    labels: dict[str, str]
    last_seen: float | None


def fleet(history: str) -> tuple[list[Query], int]:
    """The newest ``MAX_FLEET`` queries (newest seen first), and how many the history holds."""
    frame = read_history(loaders.load_queries, history)
    apps = read_history(browse.load_query_apps, history)
    app_of = {r["query_id"]: (r["app"], r["labels"]) for r in _records(apps)}
    found = []
    for r in _records(frame)[:MAX_FLEET]:
        app, labels = app_of.get(r["query_id"], (browse.UNKNOWN_APP, {}))
        name = r.get("name")
        found.append(
            Query(
                str(r["query_id"]),
                name if isinstance(name, str) else "",
                str(app),
                dict(labels),
                plain(r.get("last_seen")),
            )
        )
    return found, len(frame)


def find_query(history: str, query: str) -> Query:
    """The query with this id, else the one with this name; an ``AnswerError`` that says what to ask otherwise."""
    wanted = argument(query, "query")
    if not wanted:
        raise AnswerError("query is empty: give a query id or name (list_queries gives them)")
    queries, _ = fleet(history)
    by_id = [q for q in queries if q.query_id == wanted]
    if by_id:
        return by_id[0]
    by_name = [q for q in queries if q.name == wanted]
    if len(by_name) == 1:
        return by_name[0]
    if by_name:
        ids = ", ".join(q.query_id for q in by_name[:10])
        raise AnswerError(f"{len(by_name)} queries are named {quoted(wanted)}; ask by id: {ids}")
    raise AnswerError(f"no query with the id or name {quoted(wanted)} in the history; list_queries gives the queries it holds")


# --- verdicts ------------------------------------------------------------------------------------------


def level_rank(level: str) -> int:
    return LEVELS.index(level)


def verdict_data(v: Verdict) -> dict[str, Any]:
    return {
        "kind": v.kind,
        "level": v.level,
        "text": safe_text(v.text),
        "since": plain(v.since),
        "since_utc": clock(v.since),
        "root_cause": safe_text(v.root_cause) if v.root_cause else None,
        "runbook_anchor": v.anchor,
    }


def list_queries(
    history: str,
    application: str | None = None,
    state: str | None = None,
    severity: str | None = None,
    offset: int = 0,
    limit: int = DEFAULT_LIMIT,
    at: float | None = None,
) -> Answer:
    """The fleet's queries with their verdicts, most severe first, filtered and paged."""
    offset, limit = page(offset, limit)
    app = argument(application, "application") if application is not None else None
    if state is not None and state not in SEVERITY:
        raise AnswerError(f"state {quoted(state)} is not a verdict kind; one of {', '.join(SEVERITY)}")
    if severity is not None and severity not in LEVELS:
        raise AnswerError(f"severity {quoted(severity)} is not one of {', '.join(LEVELS)}")
    now = at_time(at)
    queries, total = fleet(history)
    rows = []
    began, judged, wanted = time.monotonic(), 0, [q for q in queries if app is None or q.app == app]
    for q in wanted:
        if time.monotonic() - began > JUDGE_SECONDS:
            break
        judged += 1
        top = verdicts(facts(history, q.query_id, now))[0]
        if state is not None and top.kind != state:
            continue
        if severity is not None and level_rank(top.level) > level_rank(severity):
            continue
        rows.append((top, q))
    rows.sort(key=lambda r: (r[0].severity, -(r[1].last_seen or 0.0)))
    shown = rows[offset : offset + limit]
    items = [
        {
            "query_id": q.query_id,
            "name": safe_text(q.name, 200),
            "application": safe_text(q.app, 200),
            "labels": plain(q.labels),
            "verdict": verdict_data(v),
        }
        for v, q in shown
    ]
    filters = ", ".join(
        f"{k} {quoted(val)}" for k, val in (("application", app), ("state", state), ("severity at least", severity)) if val is not None
    )
    lines = [
        f"{len(rows)} of the history's {total} queries"
        + (f" match {filters}" if filters else "")
        + f"; showing {offset + 1 if shown else 0} to {offset + len(shown)}, most severe first (as of {clock(now)})."
    ]
    if total > MAX_FLEET:
        lines.append(f"Only the {MAX_FLEET} queries seen most recently were judged.")
    if judged < len(wanted):
        lines.append(
            f"Only {judged} of the {len(wanted)} queries were judged within {JUDGE_SECONDS:.0f} s (newest seen first); "
            "filter by application to judge the rest."
        )
    counts: dict[str, int] = {}
    for v, _ in rows:
        counts[v.level] = counts.get(v.level, 0) + 1
    if counts:
        lines.append("By level: " + ", ".join(f"{counts[level]} {level}" for level in LEVELS if level in counts) + ".")
    for v, q in shown:
        lines.append(f"- [{v.level}] {quoted(q.name or q.query_id)} (id {q.query_id}, application {quoted(q.app)}): {quoted(v.text, 400)}")
    if offset + len(shown) < len(rows):
        lines.append(f"More: call again with offset {offset + len(shown)}.")
    data = {
        "total": len(rows),
        "offset": offset,
        "limit": limit,
        "next_offset": offset + len(shown) if offset + len(shown) < len(rows) else None,
        "as_of": now,
        "judged": judged,
        "complete": judged == len(wanted) and total <= MAX_FLEET,
        "queries": items,
    }
    return Answer(bounded("\n".join(lines)), data)


# --- one query explained -------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading (the verdicts' ``ANCHORS``): lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbook_sections(runbook: str) -> dict[str, tuple[str, str]]:
    """Anchor -> (heading, body) of each ``## `` section of the runbook."""
    sections: dict[str, tuple[str, str]] = {}
    heading: str | None = None
    body: list[str] = []
    for line in runbook.splitlines():
        if line.startswith("## "):
            if heading is not None:
                sections[slug(heading)] = (heading, "\n".join(body).strip())
            heading, body = line[3:].strip(), []
        elif heading is not None:
            body.append(line)
    if heading is not None:
        sections[slug(heading)] = (heading, "\n".join(body).strip())
    return sections


def what_to_do(section: str) -> str | None:
    """The section's ``**Do**:`` paragraph, up to the next bold label."""
    found = re.search(r"\*\*Do\*\*:\s*(.*?)(?=\n\*\*[A-Z][\w ]*\*\*:|\Z)", section, re.S)
    return " ".join(found.group(1).split()) if found else None


def _signal(e: Mapping[str, Any]) -> dict[str, Any]:
    attributes = e.get("attributes") or {}
    text = json.dumps(plain(attributes), ensure_ascii=False, sort_keys=True)
    return {
        "ts": plain(e.get("ts")),
        "utc": clock(e.get("ts")),
        "kind": safe_text(str(e.get("kind")), 100),
        "run_id": plain(e.get("run_id")),
        "attributes": plain(attributes) if len(text) <= MAX_TEXT_CHARS else {"truncated": safe_text(text)},
    }


def _run(r: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "run_id": plain(r.get("run_id")),
        "started": plain(r.get("started")),
        "started_utc": clock(r.get("started")),
        "ended": plain(r.get("ended")),
        "outcome": plain(r.get("outcome")),
        "batches": plain(r.get("batches")),
    }


def explain_query(history: str, query: str, runbook: str, at: float | None = None) -> Answer:
    """One query: its verdict, root cause, the evidence behind it, recent signals, its runbook section, what to do."""
    q = find_query(history, query)
    now = at_time(at)
    f = facts(history, q.query_id, now)
    found = verdicts(f)
    top = found[0]
    sections = runbook_sections(runbook)
    heading, body = sections.get(top.anchor or "", (None, None))
    todo = what_to_do(body) if body else None
    signals = [_signal(e) for e in list(f.events)[-MAX_SIGNALS:]][::-1]
    runs = [_run(r) for r in list(f.runs)[-MAX_RUNS:]][::-1]
    lines = [
        f"Query {quoted(q.name or q.query_id)} (id {q.query_id}, application {quoted(q.app)}), as of {clock(now)}:",
        f"Verdict [{top.level}]: {quoted(top.text, 600)}" + (f" since {clock(top.since)}" if clock(top.since) else ""),
    ]
    if top.root_cause:
        lines.append(f"Root cause: {quoted(top.root_cause, 400)}")
    for other in found[1:]:
        lines.append(f"Also [{other.level}]: {quoted(other.text, 400)}")
    lines.append(
        f"Evidence: {len(f.runs)} run(s) in the history"
        + (f", the newest {runs[0]['outcome'] or 'still open'}" if runs else "")
        + (f"; last batch at {clock(f.last_batch_ts)}" if f.last_batch_ts is not None else "; no batch")
        + (f"; a batch every {f.interval:.1f} s" if f.interval else "")
        + (
            f"; Kafka lag {', '.join(f'{quoted(t)} {lag:,.0f} records' for t, lag in list(f.kafka_lag.items())[:10])}"
            if f.kafka_lag
            else ""
        )
        + "."
    )
    if signals:
        lines.append("Recent signals (newest first): " + "; ".join(f"{s['utc']} {s['kind']}" for s in signals[:10]) + ".")
    if heading:
        lines.append(f"Runbook: section {heading!r} (anchor #{top.anchor}).")
    if todo:
        lines.append(f"What to do: {todo}")
    elif top.kind in ("healthy", "no_data"):
        lines.append("What to do: nothing; no signal says anything is wrong.")
    data = {
        "query_id": q.query_id,
        "name": safe_text(q.name, 200),
        "application": safe_text(q.app, 200),
        "as_of": now,
        "verdict": verdict_data(top),
        "other_verdicts": [verdict_data(v) for v in found[1:]],
        "evidence": {
            "runs_in_history": len(f.runs),
            "newest_runs": runs,
            "last_batch_ts": plain(f.last_batch_ts),
            "typical_interval_seconds": plain(f.interval),
            "kafka_lag_records": plain(f.kafka_lag),
            "trace": safe_text(top.trace, MAX_TRACE_CHARS) if top.trace else None,
        },
        "recent_signals": signals,
        "runbook": {"anchor": top.anchor, "heading": heading, "text": safe_text(body, 8000) if body else None},
        "what_to_do": todo,
    }
    return Answer(bounded("\n".join(lines)), data)


# --- restores ------------------------------------------------------------------------------------------


def restore_course(events: Sequence[Mapping[str, Any]]) -> tuple[tuple[Any, Any] | None, list[dict[str, Any]]]:
    """The newest restoring batch (run id, batch id) and one row per operator as its latest restore event left it
    (the browser's Restores page reads it the same way)."""
    told = [e for e in events if e["kind"] in RESTORE_PROGRESS_KINDS]
    if not told:
        return None, []
    newest = max(told, key=lambda e: e["ts"])
    batch = (newest.get("run_id"), (newest.get("attributes") or {}).get("batch_id"))
    rows: dict[str, dict[str, Any]] = {}
    for e in sorted(told, key=lambda e: e["ts"]):
        a = e.get("attributes") or {}
        if (e.get("run_id"), a.get("batch_id")) != batch:
            continue
        rows[str(a.get("operator_index"))] = {
            "operator": safe_text(f"{a.get('operator_index')} {a.get('operator')}", 200),
            "partitions_total": plain(a.get("partitions_total")),
            "partitions_done": plain(a.get("partitions_done", 0)),
            "elapsed_seconds": plain(a.get("elapsed_seconds", 0.0)),
            "eta_seconds": plain(a.get("eta_seconds")),
            "eta_basis": plain(a.get("eta_basis")),
            "finished": e["kind"] == RESTORE_FINISHED,
            "duration_seconds": plain(a.get("duration_seconds")),
        }
    return batch, [rows[k] for k in sorted(rows)]


def restores(history: str, application: str | None = None, include_finished: bool = False, limit: int = DEFAULT_LIMIT) -> Answer:
    """Restores in progress (the newest restoring batch of a query's open newest run, an operator not finished),
    each with its ETA; with ``include_finished``, each query's latest restore as it went as well."""
    _, limit = page(0, limit)
    app = argument(application, "application") if application is not None else None
    frame = read_history(loaders.load_queries, history)
    last = {str(r["query_id"]): (r.get("last_run_id"), plain(r.get("last_outcome"))) for r in _records(frame)[:MAX_FLEET]}
    queries, _ = fleet(history)
    found = []
    for q in queries:
        if app is not None and q.app != app:
            continue
        events = read_history(browse.load_events_of, history, q.query_id, RESTORE_PROGRESS_KINDS, RESTORE_EVENTS_READ)
        batch, operators = restore_course(_records(events))
        if batch is None:
            continue
        run_id, outcome = last.get(q.query_id, (None, None))
        running = not all(o["finished"] for o in operators) and batch[0] == run_id and outcome is None
        if not running and not include_finished:
            continue
        etas = [o["eta_seconds"] for o in operators if not o["finished"] and isinstance(o["eta_seconds"], (int, float))]
        found.append(
            {
                "query_id": q.query_id,
                "name": safe_text(q.name, 200),
                "application": safe_text(q.app, 200),
                "run_id": plain(batch[0]),
                "batch_id": plain(batch[1]),
                "in_progress": running,
                "eta_seconds": max(etas) if running and etas else None,
                "operators": operators,
            }
        )
    found.sort(key=lambda r: (not r["in_progress"], -(r["eta_seconds"] or 0.0)))
    shown = found[:limit]
    running = [r for r in found if r["in_progress"]]
    lines = [f"{len(running)} restore(s) in progress" + (f" in application {quoted(app)}" if app is not None else "") + "."]
    for r in shown:
        ops = "; ".join(
            f"{o['operator']}: {o['partitions_done']} of {o['partitions_total'] or '?'} partitions"
            + (
                f", restored in {o['duration_seconds']:.1f} s"
                if o["finished"] and isinstance(o["duration_seconds"], (int, float))
                else f", {o['elapsed_seconds'] or 0:.1f} s elapsed"
                + (f", ETA {o['eta_seconds']:.0f} s" if isinstance(o["eta_seconds"], (int, float)) else ", no ETA yet")
            )
            for o in r["operators"][:10]
        )
        if r["in_progress"]:
            state = "in progress" + (f", ETA {r['eta_seconds']:.0f} s" if r["eta_seconds"] is not None else "")
        else:
            state = "finished" if all(o["finished"] for o in r["operators"]) else "ended unfinished (its run is over)"
        lines.append(f"- {quoted(r['name'] or r['query_id'])} (id {r['query_id']}), batch {r['batch_id']}: {state}. {ops}")
    if len(found) > limit:
        lines.append(f"{len(found) - limit} more not shown (raise limit, at most {MAX_LIMIT}).")
    return Answer(bounded("\n".join(lines)), {"in_progress": len(running), "restores": shown})
