"""A verdict per query: what is wrong, in one sentence, with the time it started and its runbook.

Pure functions over what the history already holds (the query's signal events, its runs, its newest
batch figures), so the Queries page and the drilldown say the same thing and the rules are tested
without a browser. The rules name an incident only from signals the observer emits; they invent no
threshold of their own: the stall rule is the live rule's (``health``), the overdue and crash-loop rules their
alerts' (``spark_state_observer.settings``).

Order is severity: a query that cannot run (crash loop, failed at start, failed) comes before one that
runs badly or not when due (stalled, a scheduled run overdue, late rows dropped, state unbounded, falling behind, a
Kafka lag growing), which comes
before one that recovered from an incident (executor lost and restored, restarted with a restore).

The facts, the verdict and the kinds' order are in ``verdict_facts``; the Kafka rules in ``verdict_kafka``.
"""

from __future__ import annotations

import math
from typing import AbstractSet, Any, Mapping, Sequence, cast

from spark_state_observer.browser import fmt
from spark_state_observer.browser.health import STALL_FACTOR, STALL_MIN_SECONDS
from spark_state_observer.browser.kafka_restart import describe as describe_kafka_restart
from spark_state_observer.browser.rootcause import root_cause
from spark_state_observer.browser.verdict_facts import ANCHORS as ANCHORS
from spark_state_observer.browser.verdict_facts import ATTENTION_UP_TO as ATTENTION_UP_TO
from spark_state_observer.browser.verdict_facts import KIND_ICONS as KIND_ICONS
from spark_state_observer.browser.verdict_facts import LEVEL_ICONS as LEVEL_ICONS
from spark_state_observer.browser.verdict_facts import LEVELS as LEVELS
from spark_state_observer.browser.verdict_facts import NO_RUNBOOK as NO_RUNBOOK
from spark_state_observer.browser.verdict_facts import ORDER as ORDER
from spark_state_observer.browser.verdict_facts import RUNBOOK_PAGE as RUNBOOK_PAGE
from spark_state_observer.browser.verdict_facts import SEVERITY as SEVERITY
from spark_state_observer.browser.verdict_facts import Facts as Facts
from spark_state_observer.browser.verdict_facts import Verdict as Verdict
from spark_state_observer.browser.verdict_facts import VerdictKind as VerdictKind
from spark_state_observer.browser.verdict_facts import last_event, run_outcome, say
from spark_state_observer.browser.verdict_kafka import KAFKA_DATA_LOSS as KAFKA_DATA_LOSS
from spark_state_observer.browser.verdict_kafka import kafka_data_loss as kafka_data_loss
from spark_state_observer.browser.verdict_kafka import kafka_lag as kafka_lag
from spark_state_observer.browser.verdict_kafka import kafka_lag_of as kafka_lag_of
from spark_state_observer.model import signal_kinds as k
from spark_state_observer.settings import DEFAULT_CRASH_LOOP_RESTARTS as CRASH_LOOP_RESTARTS
from spark_state_observer.settings import DEFAULT_CRASH_LOOP_WINDOW_SECONDS as CRASH_LOOP_WINDOW_SECONDS
from spark_state_observer.settings import DEFAULT_SCHEDULE_LATE_MIN_SECONDS as SCHEDULE_LATE_MIN_SECONDS
from spark_state_observer.settings import DEFAULT_SCHEDULE_LATE_SHARE as SCHEDULE_LATE_SHARE

# verdicts that stay worth reading after the query stopped (rows lost, a restart that will replay many files):
# the stop is said next to them
BEFORE_A_STOP = ("late_rows", "snapshot_lagging", "state_skewed")
RESTORE_WINDOW_SECONDS = 900.0  # a restore this long after an executor loss is taken as its consequence
# The driver reports a lost executor when it notices: at once for a process that died, after
# spark.network.timeout (120 s by default) for a silent one. The batch that reloads the lost stores may
# start before that report (the recorded executor_loss reloads 0.5 s before it), so reloads this long
# before the report count as its consequence too.
LOSS_NOTICE_SECONDS = 120.0
MAX_LOSSES_SHOWN = 5  # executor losses with a verdict of their own, the latest (dynamic allocation removes many)


def _failure(f: Facts, run: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(root cause, full trace) of a failed run, from its terminated event and its stored exception."""
    event = next(
        (
            e
            for e in reversed(f.events)
            if e["kind"] == k.QUERY_TERMINATED
            and e.get("run_id") == run["run_id"]
            and (e.get("attributes") or {}).get("outcome") == "exception"
        ),
        None,
    )
    trace = None if fmt.missing(run.get("exception")) else str(run.get("exception")) or None
    return root_cause((event or {}).get("attributes"), trace), trace


def _ended_as(f: Facts) -> dict[Any, str | None]:
    """How each run ended, by run id: its ``query_terminated`` event's ``outcome`` (clean, or exception; a run that
    ended with its application is clean for exit code 0 or none, failed for another), else the run's stored
    outcome; a run missing here was never seen ending (a driver killed, a process that died without a word)."""
    ended: dict[Any, str | None] = {r["run_id"]: run_outcome(r) for r in f.runs}
    for e in f.events:
        outcome = (e.get("attributes") or {}).get("outcome") if e["kind"] == k.QUERY_TERMINATED else None
        if outcome in ("clean", "exception"):
            ended[e.get("run_id")] = outcome
    return ended


def _counted_restarts(f: Facts) -> list[tuple[float, float]]:
    """(restart time, time it is counted at) of each restart the lifecycle rule counts toward a crash loop
    (``spark_state_observer.signals.lifecycle``): one after a run that crashed (ended with an exception, or its end was never
    seen) counts when it happens; one after a clean stop (``query.stop()``, a SIGTERM deploy ending the run with its
    application, a scheduled run's end) only once the run it starts crashes, counted when that run fails."""
    ended = _ended_as(f)
    order = [r["run_id"] for r in f.runs]
    place = {run_id: i for i, run_id in enumerate(order)}
    stops = {r["run_id"]: r.get("ended") for r in f.runs}
    counted = []
    for e in f.events:
        if e["kind"] != k.QUERY_RESTARTED:
            continue
        i = place.get(e.get("run_id"))
        before = ended.get(order[i - 1]) if i else None  # no run before it in the history: a restart from a checkpoint
        if before != "clean":
            counted.append((float(e["ts"]), float(e["ts"])))
        elif ended.get(e.get("run_id")) == "exception":
            end = stops.get(e.get("run_id"))
            counted.append((float(e["ts"]), float(e["ts"]) if fmt.missing(end) else max(float(cast(float, end)), float(e["ts"]))))
    return counted


def _now(f: Facts) -> float | None:
    """The verdicts' "now": the page's clock, else the newest time in the history (a batch, an event)."""
    if f.now is not None:
        return f.now
    times = [float(e["ts"]) for e in f.events] + ([f.last_batch_ts] if f.last_batch_ts is not None else [])
    return max(times) if times else None


def _positive(value: object, default: float) -> float:
    """A setting carried in a signal's attributes (history data): a positive number, else the default."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf"):
        return float(value)
    return default


def _within(counted: Sequence[tuple[float, float]], at: float, window: float) -> list[float]:
    """The counted restarts that lie within ``window`` seconds before ``at`` (counted by then)."""
    return [ts for ts, counted_at in counted if counted_at <= at and at - ts <= window]


def crash_loop(f: Facts) -> Verdict | None:
    """A crash loop as the lifecycle rule, its gauge and SparkStreamingQueryCrashLooping define it: at least
    the observer's ``crash_loop_restarts`` counted restarts (``_counted_restarts``) within its window before now
    (the crash_loop signal's ``min_restarts`` and ``window_seconds``; the defaults for a signal without them, as
    an older history keeps). Only for a query the observer saw loop (a crash_loop signal). Once the window has passed
    with the newest run up, the loop is over and the other rules say what the query does. A loop whose newest run
    failed, or has not completed a batch yet, lasts as the lifecycle's ``crash_looping`` state does
    (``spark_state_observer.model.query_lifecycle``): judged at that run's restart (or its failure), until a run runs."""
    signal = last_event(f.events, k.CRASH_LOOP)
    now = _now(f)
    if signal is None or now is None:
        return None
    attributes = signal.get("attributes") or {}
    window = _positive(attributes.get("window_seconds"), CRASH_LOOP_WINDOW_SECONDS)
    least = int(_positive(attributes.get("min_restarts"), CRASH_LOOP_RESTARTS))
    counted = _counted_restarts(f)
    restarts = _within(counted, now, window)
    newest = f.runs[-1] if f.runs else None
    outcome = run_outcome(newest) if newest is not None else None
    if len(restarts) < least and newest is not None and (outcome == "exception" or (outcome is None and not newest.get("batches"))):
        # lasting: the loop held when the newest run was last judged, and that run never ran
        into = [c for c in counted if c[0] >= float(newest.get("started") or 0.0)]
        judged = max([c[1] for c in into], default=float(newest.get("started") or 0.0))
        restarts = _within(counted, judged, window)
    if len(restarts) < least:
        return None
    first, last = restarts[0], restarts[-1]
    failed = next((r for r in reversed(f.runs) if run_outcome(r) == "exception"), None)
    cause, trace = _failure(f, failed) if failed else (None, None)
    text = say("crash_loop", restarts=fmt.plural(len(restarts), "restart"), span=fmt.duration(max(last - first, 0.0)))
    if cause:
        text += f"; last error {cause}"
    elif failed is None:
        text += "; no run ended with an exception: the runs before the restarts were never seen ending (a driver killed, as the OOM killer does)"
    if newest is not None and outcome is None and newest.get("batches") and not fmt.missing(newest.get("started")):
        up = max(now - float(newest["started"]), 0.0)
        text += f"; the newest run has been up {fmt.duration(up)} ({fmt.plural(int(newest['batches']), 'batch', 'batches')})"
    # the fix is by the failure's class (a state schema change, a checkpoint error, ...): SparkStreamingQueryFailed's section
    section = ANCHORS["failed"] if failed is not None and _exception_class(f, failed) else None
    return Verdict("crash_loop", text, first, cause, trace, failed["run_id"] if failed else None, section)


def _exception_class(f: Facts, run: Mapping[str, Any]) -> str | None:
    """The class the observer gave a failed run's exception (``exception_class`` of its termination), if any."""
    for e in reversed(f.events):
        if e["kind"] == k.QUERY_TERMINATED and e.get("run_id") == run["run_id"]:
            value = (e.get("attributes") or {}).get("exception_class")
            return value if isinstance(value, str) and value else None
    return None


def failed(f: Facts) -> Verdict | None:
    """The newest run ended with an exception: at start (no batch in that run) or later."""
    if not f.runs or run_outcome(f.runs[-1]) != "exception":
        return None
    run = f.runs[-1]
    cause, trace = _failure(f, run)
    at_start = not run.get("batches")
    kind = "failed_at_start" if at_start else "failed"
    end = run.get("ended") if not fmt.missing(run.get("ended")) and (run.get("ended") or 0) >= (run.get("started") or 0) else None
    when = end or run.get("started")
    text = say(kind, at=fmt.clock(when), cause=cause or "no exception text in the history")
    return Verdict(kind, text, run.get("started"), cause, trace, run["run_id"])


def lost(f: Facts) -> Verdict | None:
    """The newest run is open and the watcher judged its driver gone (its ``query_lost`` event, no batch after it):
    the driver died without a word, which no exception explains (``spark_state_observer.signals.lifecycle``)."""
    if not f.runs or run_outcome(f.runs[-1]) is not None:
        return None
    run = f.runs[-1]
    signal = next((e for e in reversed(f.events) if e["kind"] == k.QUERY_LOST and e.get("run_id") == run["run_id"]), None)
    if signal is None or (f.last_batch_ts is not None and f.last_batch_ts > float(signal["ts"])):
        return None
    silent = (signal.get("attributes") or {}).get("seconds_silent")
    text = say("lost", at=fmt.clock(signal["ts"]), silent=fmt.duration(silent), last_batch=fmt.clock(f.last_batch_ts))
    return Verdict("lost", text, f.last_batch_ts or float(signal["ts"]), run_id=run["run_id"])


def stalled(f: Facts) -> Verdict | None:
    """No batch for many typical intervals while the newest run is still open (the live rule's limits)."""
    signal = last_event(f.events, k.STALLED)
    recovered = last_event(f.events, k.STALL_RECOVERED)
    open_run = bool(f.runs) and run_outcome(f.runs[-1]) is None
    if (
        signal is not None
        and (recovered is None or recovered["ts"] < signal["ts"])
        and open_run
        and (f.last_batch_ts is None or signal["ts"] >= f.last_batch_ts)
    ):
        seconds = (signal.get("attributes") or {}).get("seconds_without_progress")
        return Verdict(
            "stalled",
            say("stalled", quiet=fmt.duration(seconds), last_batch=fmt.clock(f.last_batch_ts)),
            f.last_batch_ts or signal["ts"],
        )
    if open_run and f.now is not None and f.last_batch_ts is not None:
        quiet = f.now - f.last_batch_ts
        limit = max(STALL_MIN_SECONDS, STALL_FACTOR * (f.interval or 0.0))
        if quiet > limit and quiet < 7 * 86400:  # a week-old history is not a stall, it is an old file
            return Verdict("stalled", say("stalled.usual", quiet=fmt.duration(quiet), interval=fmt.duration(f.interval)), f.last_batch_ts)
    return None


def state_unbounded(f: Facts) -> Verdict | None:
    """Operators whose newest growth verdict is 'unbounded' (state_unbounded not followed by state_bounded)."""
    open_: dict[Any, Mapping[str, Any]] = {}
    for e in f.events:
        if e["kind"] in ("state_unbounded", "state_bounded"):
            a = e.get("attributes") or {}
            key = (a.get("operator_index"), a.get("operator"))
            if e["kind"] == k.STATE_UNBOUNDED:
                open_[key] = e
            else:
                open_.pop(key, None)
    if not open_:
        return None
    parts = []
    for (_, name), e in sorted(open_.items(), key=lambda kv: -float((kv[1].get("attributes") or {}).get("rows_per_second") or 0)):
        a = e.get("attributes") or {}
        if a.get("evidence"):  # the signal's own words (spark_state_observer.signals.growth.describe): browser and signal agree
            parts.append(f"{name or 'operator'} {a['evidence']}")
            continue
        ratio = a.get("eviction_ratio")  # a history written before the verdict carried its evidence
        evictions = "no evictions" if not ratio else f"evicting {float(ratio):.0%} of additions"
        parts.append(f"{name or 'operator'} +{fmt.number(a.get('rows_per_second'))} rows/s, {evictions}")
    since = min(e["ts"] for e in open_.values())
    return Verdict("state_unbounded", say("state_unbounded", operators="; ".join(parts)), since)


def falling_behind(f: Facts) -> Verdict | None:
    signal = last_event(f.events, k.FALLING_BEHIND)
    back = last_event(f.events, k.CAUGHT_UP)
    if signal is None or (back is not None and back["ts"] >= signal["ts"]):
        return None
    a = signal.get("attributes") or {}
    return Verdict(
        "falling_behind",
        say("falling_behind", input=fmt.number(a.get("input_rows_per_second")), processed=fmt.number(a.get("processed_rows_per_second"))),
        signal["ts"],
    )


def _in_newest_run(f: Facts, kind: str) -> Mapping[str, Any] | None:
    """The newest signal of ``kind`` in the query's newest run (any run when the history has none)."""
    newest_run = f.runs[-1]["run_id"] if f.runs else None
    found = [e for e in f.events if e["kind"] == kind and (newest_run is None or e.get("run_id") == newest_run)]
    return found[-1] if found else None


def _count(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def snapshot_lagging(f: Facts) -> Verdict | None:
    """Store instances past the normal snapshot lag (the newest ``snapshot_lagging`` signal, which
    SparkStateSnapshotUploadLagging reads): a restart would replay that many changelog files. Of any run: the lag is
    the checkpoint's, so it outlives a restart, and the signal is raised once until the lag comes back within normal."""
    signal = last_event(f.events, k.SNAPSHOT_LAGGING)
    if signal is None:
        return None
    a = signal.get("attributes") or {}
    lag, allowed = _count(a.get("max_lag_batches")), _count(a.get("allowed_lag_batches"))
    lagging, total = _count(a.get("instances_lagging")), _count(a.get("instances"))
    text = say("snapshot_lagging", operator=a.get("operator_name") or "operator", at=fmt.clock(signal["ts"]))
    if lag is not None:
        text += f", {fmt.number(lag)} versions without an uploaded snapshot"
        text += f" (normal up to {fmt.number(allowed)})" if allowed is not None else ""
    if lagging is not None and total:
        text += f"; {fmt.number(lagging)} of {fmt.number(total)} store instances"
    replay = _count(a.get("replay_files"))
    text += f"; a restart would replay {fmt.number(replay)} files" if replay else "; a restart would replay that many changelog files"
    return Verdict("snapshot_lagging", text, signal["ts"], run_id=signal.get("run_id"))


def state_skewed(f: Facts) -> Verdict | None:
    """One partition of an operator holds far more of the state's bytes than the others (the ``state_skewed``
    signal of the newest run, which SparkStateSkewed reads as its gauges): a hot key."""
    signal = _in_newest_run(f, k.STATE_SKEWED)
    if signal is None:
        return None
    a = signal.get("attributes") or {}
    text = say("state_skewed", operator=a.get("operator_name") or "operator", partition=a.get("partition"))
    share, ratio, size = _count(a.get("share")), _count(a.get("ratio")), _count(a.get("partition_bytes"))
    if share is not None:
        text += f" holds {share:.0%} of the state's bytes"
    if ratio is not None:
        text += f", {ratio:,.1f} x the median partition"
    if size is not None:
        text += f" ({fmt.size(size)})"
    return Verdict("state_skewed", text + f" since {fmt.clock(signal['ts'])}", signal["ts"], run_id=signal.get("run_id"))


def late_rows(f: Facts) -> Verdict | None:
    """The watermark drops a share of the input (a ``late_rows_dropped`` episode not stopped): those rows are missing from
    the output, whatever the query does next, so a query that stopped since says what it dropped until then. An episode
    spans restarts (the checkpoint keeps the watermark)."""
    signal = last_event(f.events, k.LATE_ROWS_DROPPED)
    stopped_at = last_event(f.events, k.LATE_ROWS_STOPPED)
    if signal is None or (stopped_at is not None and stopped_at["ts"] >= signal["ts"]):
        return None
    a = signal.get("attributes") or {}
    share = a.get("share")
    operators = a.get("operators")
    by = f" by {', '.join(map(str, operators))}" if isinstance(operators, list) and operators else ""
    ended = f.runs[-1].get("ended") if f.runs and run_outcome(f.runs[-1]) is not None else None
    if ended is None:
        text = say("late_rows", by=by, since=fmt.clock(signal["ts"]))
    else:
        text = say("late_rows.stopped", by=by, since=fmt.clock(signal["ts"]), ended=fmt.clock(ended))
    ahead = a.get("watermark_ahead_seconds")
    groups = a.get("late_groups_share")
    if isinstance(ahead, (int, float)) and math.isfinite(ahead) and ahead > 0 and a.get("cause") == "watermark_ahead":
        text += f"; the watermark stood {fmt.duration(ahead)} ahead of the trigger time: a record from the future moved it, every older row is lost"
    elif a.get("cause") == "most_groups_late" and isinstance(groups, (int, float)) and math.isfinite(groups):
        text += f" ({float(groups):.0%} of the groups reaching the aggregation were late)"
    elif a.get("cause") == "operator_share" and isinstance(reached := a.get("operator_share"), (int, float)) and math.isfinite(reached):
        text += f" ({float(reached):.1%} of the rows reaching it when it began)"
    elif isinstance(share, (int, float)) and math.isfinite(share):
        text += f" (at least {float(share):.1%} of the input rows when it began)"
    return Verdict("late_rows", text, signal["ts"], run_id=signal.get("run_id"))


def _restore_total(
    f: Facts,
    after: float,
    run_id: str | None = None,
    order: tuple[str, ...] = ("restore", "store_reload"),
    taken: AbstractSet[float] = frozenset(),
) -> tuple[float | None, float | None]:
    """(seconds summed over operators, time) of the first restore (or reload; ``order`` says which is
    looked for first) at or after ``after``, leaving out those at the times in ``taken`` (another incident's).
    The seconds are None when none of them carries a time (a reload told from task placement)."""
    for kinds in ((kind,) for kind in order):
        candidates = [
            e
            for e in f.events
            if e["kind"] in kinds
            and e["ts"] >= after
            and e["ts"] - after <= RESTORE_WINDOW_SECONDS
            and e["ts"] not in taken
            and (run_id is None or e.get("run_id") == run_id)
        ]
        if candidates:
            first = candidates[0]["ts"]
            same = [e for e in candidates if e["ts"] == first]
            key = "duration_seconds" if kinds == ("restore",) else "load_seconds"
            values = [(e.get("attributes") or {}).get(key) for e in same]
            measured = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
            # a reload Spark measured no time of (before 4.1, told from the tasks' placement): found, time unknown
            return (sum(measured) if measured else None), first
    return None, None


def executor_lost(f: Facts) -> list[Verdict]:
    """One verdict per executor lost (the latest ``MAX_LOSSES_SHOWN``), each at its own time with its own cost: the
    first reload (or restore) of its notice window that no earlier loss took. Two losses a few seconds apart
    each name their executor and what reloading after it cost, not one of them with the other's reload."""
    found: list[Verdict] = []
    taken: set[float] = set()
    for signal in (e for e in f.events if e["kind"] == k.EXECUTOR_REMOVED):
        executor = (signal.get("attributes") or {}).get("executor_id")
        seconds, at = _restore_total(f, signal["ts"] - LOSS_NOTICE_SECONDS, order=("store_reload", "restore"), taken=taken)
        if at is not None:
            taken.add(at)
        text = say("executor_lost", executor=executor, at=fmt.clock(signal["ts"]))
        if seconds is not None:
            text += f"; restore {fmt.duration(seconds)}"
        elif at is not None:
            text += "; its state stores reloaded on other executors (this Spark reports no load time)"
        else:
            text += "; no restore seen after it"
        found.append(Verdict("executor_lost", text, signal["ts"]))
    return found[-MAX_LOSSES_SHOWN:]


def _scheduled_start(signal: Mapping[str, Any] | None) -> bool:
    """Whether a restart signal is the next run of a schedule (availableNow, once), as the observer judged it."""
    return signal is not None and (signal.get("attributes") or {}).get("scheduled") is True


def _on_schedule(f: Facts) -> bool:
    return _scheduled_start(last_event(f.events, k.QUERY_RESTARTED))


def restarted(f: Facts) -> Verdict | None:
    signal = last_event(f.events, k.QUERY_RESTARTED)
    if signal is None or _scheduled_start(signal):
        return None  # a scheduled run's start is no incident (``stopped`` and ``healthy`` say it is on a schedule)
    down = (signal.get("attributes") or {}).get("downtime_seconds")
    seconds, at = _restore_total(f, signal["ts"], signal.get("run_id"))
    text = say("restarted", at=fmt.clock(signal["ts"]))
    if down is not None:
        text += f" after {fmt.duration(down)} down"
    if seconds is not None:
        text += f"; restore {fmt.duration(seconds)}"
    elif at is not None:  # restored, but Spark measured no load time and the tasks showed no extra time
        text += "; restore time not measured"
    if f.kafka_restart is not None:
        added: dict[str, list[int]] = {}
        for e in f.events:
            a = e.get("attributes") or {}
            if e["kind"] == k.KAFKA_PARTITIONS_ADDED and e.get("run_id") == signal.get("run_id") and isinstance(a.get("topic"), str):
                added.setdefault(a["topic"], []).extend(p for p in a.get("partitions") or [] if isinstance(p, int))
        text += describe_kafka_restart(f.kafka_restart, added)
    return Verdict("restarted", text, signal["ts"])


def _schedule_interval(signal: Mapping[str, Any] | None) -> float | None:
    """A scheduled restart's interval (``schedule_interval_seconds``, seconds from start to start), or None: not
    scheduled, or a history written before the signal carried it."""
    if signal is None or not _scheduled_start(signal):
        return None
    value = (signal.get("attributes") or {}).get("schedule_interval_seconds")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def overdue(f: Facts) -> Verdict | None:
    """A query on a schedule whose next run is late: its newest run stopped cleanly, and no run has started
    by that run's start + the interval + max(interval * SCHEDULE_LATE_SHARE, SCHEDULE_LATE_MIN_SECONDS)
    (the SparkStreamingScheduledRunOverdue alert's rule). Since: when the next run was due (start + interval)."""
    if not f.runs or run_outcome(f.runs[-1]) != "clean" or f.now is None:
        return None
    every = _schedule_interval(last_event(f.events, k.QUERY_RESTARTED))
    run = f.runs[-1]
    started = run.get("started")
    if every is None or fmt.missing(started):
        return None
    due = float(cast(float, started)) + every
    if f.now <= due + max(every * SCHEDULE_LATE_SHARE, SCHEDULE_LATE_MIN_SECONDS):
        return None
    end = run.get("ended") if not fmt.missing(run.get("ended")) else run.get("last_seen")
    text = say("overdue", every=fmt.duration(every), due=fmt.clock(due), late=fmt.duration(f.now - due), end=fmt.clock(end))
    return Verdict("overdue", text, due)


def stopped(f: Facts) -> Verdict | None:
    if not f.runs or run_outcome(f.runs[-1]) != "clean":
        return None
    run = f.runs[-1]
    end = run.get("ended") if not fmt.missing(run.get("ended")) else run.get("last_seen")
    if _on_schedule(f):
        return Verdict("stopped", say("stopped.scheduled", end=fmt.when(end)), end)
    if _ended_with_application(f, run["run_id"]):
        return Verdict("stopped", say("stopped.with_application", end=fmt.when(end)), end)
    return Verdict("stopped", say("stopped", end=fmt.when(end)), end)


def _ended_with_application(f: Facts, run_id: str) -> bool:
    """Whether the run's termination is the observer's, at its application's end (Spark logged none for the query)."""
    return any(
        e["kind"] == k.QUERY_TERMINATED and e.get("run_id") == run_id and (e.get("attributes") or {}).get("ended_with_application") is True
        for e in f.events
    )


RULES = (
    crash_loop,
    failed,
    lost,
    kafka_data_loss,
    stalled,
    overdue,
    late_rows,
    state_unbounded,
    falling_behind,
    kafka_lag,
    snapshot_lagging,
    state_skewed,
    restarted,
)


def verdicts(f: Facts) -> list[Verdict]:
    """Every incident that applies, most severe first; ``healthy`` (or ``stopped``) when none does. A query on a
    schedule between runs is ``stopped`` until its next run is overdue, then ``overdue`` (and not ``stopped``)."""
    found = [v for v in (rule(f) for rule in RULES) if v is not None] + executor_lost(f)
    if any(v.kind == "crash_loop" for v in found):
        found = [v for v in found if v.kind not in ("failed", "failed_at_start", "restarted")]
    if any(v.kind == "lost" for v in found):  # a dead driver is no stall: another action
        found = [v for v in found if v.kind != "stalled"]
    if not found or all(v.severity >= SEVERITY["executor_lost"] or v.kind in BEFORE_A_STOP for v in found):
        end = stopped(f)
        if end is not None:
            found.append(end)
        elif not f.runs and f.last_batch_ts is None:
            found.append(Verdict("no_data", say("no_data")))
        elif not found:
            every = f" (a batch every {fmt.duration(f.interval)})" if f.interval else ""
            running = "a scheduled run" if _on_schedule(f) else "running"
            found.append(Verdict("healthy", say("healthy", running=running, every=every), f.last_batch_ts))
    return sorted(found, key=lambda v: v.severity)


def headline(found: Sequence[Verdict]) -> str:
    """The text a one-line table shows for ``found`` (most severe first): the top verdict, and when it is an
    executor loss, every loss with its own time and cost ("Executor 1 lost at ...; restore 600 ms · Executor 2 ...")."""
    top = found[0]
    if top.kind != "executor_lost":
        return top.text
    return " · ".join(v.text for v in sorted((v for v in found if v.kind == top.kind), key=lambda v: v.since or 0.0))


def verdict(f: Facts) -> Verdict:
    """The most severe verdict."""
    return verdicts(f)[0]
