"""A query's life: starts, restarts (with downtime), crash loops, idleness, terminations and stalls.

- restart: the same query id with a new run id, or a first run seen at a batch id above 0 (a restart
  from a checkpoint in a new process). Two figures, named apart: ``gap_since_previous_run_seconds``
  (the previous run's end, its termination, to this start: how long the query was down) and
  ``since_last_progress_seconds`` (the previous run's last progress, or for a process that never saw
  it the checkpoint's last commit through ``last_alive_hint``, to this start: it also counts the time
  a failing run spent before it ended). The downtime gauge is the gap when known. In the watcher, a query's
  ``RunState`` is shared by query id across the applications it follows, so a restart as a new application
  continues the runs before it (and carries the other rules' state with it: ``RunState.carried``); a new run
  that starts after the last sign of life of a run another application still holds (a killed driver's log
  stays in progress until the watcher calls it lost) takes it over.
- crash loop: ``crash_loop_restarts`` restarts within ``crash_loop_window_seconds`` that crashing runs
  surround: a restart counts when the run before it crashed (it terminated with an exception, or its end
  was never seen: a driver killed, a process that died without a word) or when the run it starts crashes
  (counted when that run terminates with an exception, or when the next run starts and its end was not seen).
  A run still open when its application ended (an event log's application end, ``kinds.APPLICATION_END``: the
  shutdown hook a SIGTERM runs logs no query termination) ended with it, cleanly unless the exit code says not.
  Restarts between runs that all ended cleanly are no loop: each run was stopped on purpose (``query.stop()``,
  a deploy) or finished its work, as every run of a job scheduled with ``Trigger.AvailableNow`` or
  ``Trigger.Once`` does, every few minutes for ever. They are still restarts (the signal, the counter, the
  restore each brings). A deploy after a clean stop whose new code then fails at every start is a loop from
  that first restart on.
- scheduled: a query whose last ``SCHEDULE_CYCLES`` runs each stopped cleanly (its query terminated, not its
  application under it) and paused longer than it ran before the next started (a job run every few minutes or
  hours with ``Trigger.AvailableNow`` or ``Once``) is on a schedule (``spark_streaming_query_scheduled``): stopped between its runs, not down. A
  stream stopped cleanly for a deploy ran for hours and paused for a minute; a crash ends the schedule.
  A scheduled query's interval (``spark_streaming_query_schedule_interval_seconds``: the median start-to-start
  time of its last ``SCHEDULE_RUNS_KEPT`` clean runs) and its latest start
  (``spark_streaming_query_last_start_timestamp_seconds``) say when its next run is due; between runs its
  lifecycle state is ``scheduled`` (``spark_state_observer.model.query_lifecycle``), which the watcher keeps after the
  application is forgotten, so a run that does not come is seen (``SparkStreamingScheduledRunOverdue``).
- stall: a non-idle query without progress for ``stall_factor`` x its usual batch interval (at least
  ``stall_min_seconds``, and at least ``DURATION_FACTOR`` x the longest of its recent batches, a run's
  first left out while later ones are known: on a busy machine a trigger can run for 89 s after batches
  of 2 s, and a running trigger is not a stall); judged by the clock (``tick``), so only live. A batch
  that overran its trigger is followed at once by one holding every row that arrived meanwhile: at the
  last batch's input over processing rate that one takes ``ratio`` x as long (a query falling behind has
  batches that grow by that ratio, each one no stall), so the longest batch counts that many times over.
  Before a run's second progress there is no interval to take the median of: ``trigger_interval_seconds``
  stands in, except for a real-time run (``spark_state_observer.signals.real_time``), whose first batch lasted at least
  its checkpoint interval.
- lost (the watcher only: ``silence``, how long the application's event log has not grown, as the watcher saw it on
  its own clock, so no clock skew between driver and watcher moves it): a run still open (no termination, no
  application end) whose log stayed silent beyond ``lost_limit`` is lost, its driver gone without a word (SIGKILL by
  the OOM killer, a node lost). A live driver is never silent that long: an idle query logs an idle event every
  ``spark.sql.streaming.noDataProgressEventInterval`` (``NO_DATA_PROGRESS_SECONDS``) or each trigger if that is
  longer, a running one its progress each trigger and its tasks' ends during a batch. The limit is the query's own
  cadence: ``LOST_INTERVALS`` x the larger of its usual interval (between its progress and idle events;
  ``trigger_interval_seconds`` before two are seen: set it for triggers over 20 s) and the no-data interval, at least ``DURATION_FACTOR`` x its longest recent batch
  (grown as for the stall), and at least ``lost_min_seconds`` (2 minutes). What it cannot tell from a dead driver: a
  driver alive but hung so fully that it logs nothing at all, not even a task's end, for that long. A lost run is
  no stall (its ``stalled`` gauge drops, with no ``stall_recovered``); its query is released, so a later
  application of it takes it over as a restart after a crash, with its downtime; its log growing again (a driver
  paused, a file system back) takes the verdict back.
"""

from __future__ import annotations

import logging
import statistics
from typing import Any, Callable, NamedTuple

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryRecord, QueryTotals, QueryTracker
from spark_state_observer.model import kinds as event_kinds
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.alert_spec import CRITICAL, WARNING, AlertSpec
from spark_state_observer.model.events import QueryIdle, QueryProgress, QueryStarted, QueryTerminated
from spark_state_observer.settings import Settings
from spark_state_observer.signals.classify import bounded_text, cause_error_class, classify_exception, root_cause
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.rule import Context, Rule
from spark_state_observer.signals.run_state import SCHEDULE_CYCLES, LastAliveHint, RunState, count_restart, succeeds

log = logging.getLogger("spark_state_observer")
DURATION_FACTOR = 3.0  # a batch this many times the longest recent one is no longer just a slow batch
MAX_GROWTH = 10.0  # the most the next batch is expected to outgrow the last (input over processing rate)
NO_DATA_PROGRESS_SECONDS = 10.0  # spark.sql.streaming.noDataProgressEventInterval's default: a live idle query's beat
LOST_INTERVALS = 6.0  # a log silent for this many of the query's intervals (and lost_min_seconds) is a driver gone


class BatchStart(NamedTuple):  # one per progress event: a tuple is built faster than a frozen dataclass
    """How a progress event stands in its query's life."""

    first_of_run: bool  # the first batch of a run seen
    restore_due: bool  # ...of a restarted run: the batch that restores the state


class Lifecycle(Rule):
    def __init__(
        self,
        settings: Settings,
        on_new_run: Callable[[str, dict[str, Any]], None],
        live: bool = True,
        last_alive_hint: LastAliveHint | None = None,
        queries: dict[str, RunState] | None = None,
        counters: QueryTracker | None = None,
    ) -> None:
        """``counters``: this application's tracker, whose totals of a query taken over from another application
        go on from that application's (``QueryTracker.inherit``)."""
        self.s = settings
        self._counters = counters
        # seconds since this application's event log last grew (the watcher sets it; None: not known, a listener
        # inside the driver, which dies with it): what the lost verdict reads
        self.silence: Callable[[], float | None] | None = None
        # when the application's log last showed life (the watcher's; dates a loss found long after it happened)
        self.last_life: Callable[[], float | None] | None = None
        # spark.sql.streaming.noDataProgressEventInterval of the application (the watcher reads its conf): a live idle query's beat
        self.no_data_seconds = NO_DATA_PROGRESS_SECONDS
        self.verdicts = 0  # lost verdicts given or taken back: the watcher publishes lasting states after a tick that moved it
        self.live = live
        self.last_alive_hint = last_alive_hint
        self._on_new_run = on_new_run
        self.queries: dict[str, RunState] = {}  # this application's, by query id
        # by query id, shared with the watcher's other applications: a restart as a new application continues
        # the runs before it. Only a run no other application holds live is taken over: the same query id live
        # in two applications at once (a copied checkpoint, a recording replayed under many names) is two
        # queries whose batches, clocks and stalls must not mix.
        self._shared = queries

    def state(self, query_id: str, run_id: str | None = None, at: float | None = None) -> RunState:
        """``query_id``'s state here; ``run_id`` and ``at``: the run an event of this application shows, and when."""
        q = self.queries.get(query_id)
        if q is not None and q.holder is not None and q.holder is not self:
            # a later run in another application took the query over (``_take_over``): this application's
            # run, if it goes on after all, is judged apart from now on
            q = self.queries[query_id] = RunState(holder=self)
        if q is None:
            q = self.queries[query_id] = self._take_over(query_id, run_id, at)
        return q

    def _take_over(self, query_id: str, run_id: str | None, at: float | None) -> RunState:
        if self._shared is None:
            return RunState(holder=self)
        q = self._shared.get(query_id)
        if q is None:
            q = self._shared[query_id] = RunState()
        elif q.holder is not None and q.holder is not self and not succeeds(q, run_id, at):
            return RunState(holder=self)  # live in another application: judged apart, not shared
        before = q.last_holder
        base = before.totals(query_id) if before is not None and before is not self else q.totals
        if base is not None and self._counters is not None and run_id is not None and run_id != q.run_id:
            # a new run in this application: the counters go on from the applications before (the same run logged by
            # two applications, one recording under two names, is not counted twice)
            self._counters.inherit(query_id, base)
        q.holder = q.last_holder = self
        q.totals = None
        return q

    def totals(self, query_id: str) -> QueryTotals | None:
        """This application's running totals of ``query_id`` (None: no tracker, or the query is not kept)."""
        return self._counters.totals(query_id) if self._counters is not None else None

    def detach(self) -> None:
        """This application is forgotten: the queries it ran last keep its totals, for the next application."""
        for query_id, q in self.queries.items():
            if q.last_holder is self:
                q.totals, q.last_holder = self.totals(query_id), None
            if q.holder is self:
                q.holder = None

    def release(self, query_id: str | None = None) -> None:
        """Let another application continue ``query_id``'s runs (every query's when ``None``): this one's run
        ended, its application finished, was lost or forgotten, or the query was evicted here."""
        for qid in list(self.queries) if query_id is None else [query_id]:
            q = self.queries.get(qid)
            if q is not None and q.holder is self:
                q.holder = None

    def on_started(self, ctx: Context, event: QueryStarted) -> None:
        self.started(ctx.record, event, ctx.now, ctx.facts)

    def on_batch_end(self, ctx: Context) -> None:
        """Keep a real-time run's first batch: the stall limit of its second reads it."""
        self.state(ctx.record.query_id).real_time_first_batch = ctx.real_time.first_batch if ctx.real_time else None

    def on_idle(self, ctx: Context, event: QueryIdle) -> None:
        self.idle(ctx.record, event, ctx.now, ctx.facts)

    def on_terminated(self, ctx: Context, event: QueryTerminated) -> None:
        self.terminated(ctx.record, event, ctx.now, ctx.facts)

    def on_tick(self, ctx: Context) -> None:
        self.tick(ctx.record, ctx.now, ctx.facts)

    def forget(self, query_id: str) -> None:
        self.release(query_id)
        self.queries.pop(query_id, None)

    def started(self, record: QueryRecord, e: QueryStarted, now: float, facts: SignalFacts) -> None:
        ts = e.timestamp or now
        q = self.state(record.query_id, e.run_id, ts)
        self._set_lost(q, record, False, now, facts)
        known_before = q.run_id is not None and q.run_id != e.run_id
        self._new_run(record.query_id, q, e.run_id, ts)
        facts.set(record, catalog.QUERY_LAST_START, (), ts)
        facts.signal(kinds.QUERY_STARTED, record, e.run_id, ts)
        if known_before:
            self._restart(q, record, e.run_id, ts, facts)

    def progress(self, record: QueryRecord, p: QueryProgress, now: float, facts: SignalFacts) -> BatchStart:
        """Restarts a batch reveals, the end of a stall, and the batch's place in its run."""
        ts = p.timestamp or now
        q = self.state(record.query_id, p.run_id, ts)
        self._set_lost(q, record, False, now, facts)
        first_of_run = q.progress_run != p.run_id
        if first_of_run:
            if q.run_id != p.run_id:  # no started event seen for this run (late attach, partial log)
                had_run = q.run_id is not None
                self._new_run(record.query_id, q, p.run_id, ts)
                facts.set(record, catalog.QUERY_LAST_START, (), ts)
                if had_run:
                    self._restart(q, record, p.run_id, ts, facts)
            if q.first_seen and p.batch_id > 0 and not q.restart_pending:
                self._restart(q, record, p.run_id, q.run_start or ts, facts)  # restarted from a checkpoint
            q.first_seen = False
            q.progress_run = p.run_id
        if q.stalled:
            self._set_stalled(q, record, False, now, facts)
        if q.crash_loop:  # a loop ends once its restarts have left the window while batches come: the gauge follows
            self._judge_loop(q, record, p.run_id, ts, facts)
        facts.set(record, catalog.QUERY_STALLED, (), 0.0)
        q.progress_at.append(now)
        if p.batch_duration_ms is not None and not first_of_run:  # a run's first batch (warm-up, restore) says nothing of later ones
            q.durations.append(p.batch_duration_ms / 1000.0)
        elif p.batch_duration_ms is not None:
            q.first_duration = p.batch_duration_ms / 1000.0
        inp, proc = p.input_rows_per_second, p.processed_rows_per_second
        q.growth = min(MAX_GROWTH, max(1.0, inp / proc)) if inp and proc and inp > 0 and proc > 0 else 1.0
        restore_due = first_of_run and q.restart_pending
        q.restart_pending = q.restart_pending and not restore_due
        q.last_alive = ts + (p.batch_duration_ms or 0) / 1000.0
        q.last_progress = q.last_alive
        q.beats.append(q.last_alive)
        return BatchStart(first_of_run, restore_due)

    def idle(self, record: QueryRecord, e: QueryIdle, now: float, facts: SignalFacts) -> None:
        q = self.state(record.query_id)
        self._set_lost(q, record, False, now, facts)
        q.last_alive = e.timestamp or now
        q.beats.append(q.last_alive)
        facts.signal(kinds.QUERY_IDLE, record, e.run_id, e.timestamp or now)

    def terminated(self, record: QueryRecord, e: QueryTerminated, now: float, facts: SignalFacts) -> None:
        q = self.state(record.query_id)
        # live: when the event arrived; replayed: the time the event log places it at (the events just
        # before it). A run never ends before it started, nor before its last sign of life.
        q.last_alive = max(t for t in (now, q.run_start, q.last_alive) if t is not None)
        q.run_end = q.last_alive
        q.run_outcome = event_kinds.EXCEPTION if e.exception else event_kinds.CLEAN
        q.ended_with_app = e.with_application
        self._set_stalled(q, record, False, now, facts)
        self._set_lost(q, record, False, now, facts)
        self.release(record.query_id)
        attrs: dict[str, Any] = {"outcome": q.run_outcome}
        if e.with_application:  # no termination logged: the run ended with its application (a SIGTERM, an exit)
            attrs.update(ended_with_application=True, exit_code=e.exit_code)
        if e.exception:
            cause = root_cause(e.error_class, e.exception)
            cls = classify_exception(e.error_class, e.exception, cause)
            attrs.update(
                exception_class=cls,
                error_class=e.error_class,
                cause_error_class=cause_error_class(e.exception),
                root_cause=cause,
                message=e.exception.splitlines()[0][:300] if e.exception.strip() else "",
                exception=bounded_text(e.exception),
            )
            facts.add(record, catalog.QUERY_TERMINATIONS_BY_CLASS, (("exception_class", cls),))
        facts.signal(kinds.QUERY_TERMINATED, record, e.run_id, q.last_alive, **attrs)
        if e.exception and q.restart_after_clean is not None:  # this run crashed: the restart into it is the loop's
            count_restart(q, q.restart_after_clean)
            self._judge_loop(q, record, e.run_id, q.last_alive, facts)
        q.restart_after_clean = None

    def tick(self, record: QueryRecord, now: float, facts: SignalFacts) -> None:
        """Judge ``record``'s query for a stall at ``now`` (live only: stalls need time to pass, not events)."""
        q = self.queries.get(record.query_id)
        if q is None or (q.holder is not None and q.holder is not self):
            return  # a later run in another application took the query over: this one's verdicts stay as they were
        if self._judge_lost(q, record, now, facts) or not q.progress_at:
            return
        since = now - q.progress_at[-1]
        if record.status != event_kinds.ACTIVE:
            if q.stalled:
                self._set_stalled(q, record, False, now, facts)
            return
        facts.set(record, catalog.QUERY_SECONDS_SINCE_PROGRESS, (), since)
        stamps = list(q.progress_at)
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        interval = statistics.median(gaps) if gaps else self.s.trigger_interval_seconds
        if not gaps and q.real_time_first_batch is not None:  # real-time: the next batch ends an interval after this one
            interval = max(interval, q.real_time_first_batch)
        longest = max(q.durations) if q.durations else q.first_duration
        limit = max(self.s.stall_min_seconds, self.s.stall_factor * interval, DURATION_FACTOR * longest * q.growth)
        if since > limit and not q.stalled:
            self._set_stalled(
                q,
                record,
                True,
                now,
                facts,
                seconds_without_progress=round(since, 1),
                limit_seconds=round(limit, 1),
                longest_recent_batch_seconds=round(longest, 1),
                next_batch_growth=round(q.growth, 2),
            )

    def lost_limit(self, q: RunState) -> float:
        """How long ``q``'s application log may stay silent before its driver is judged gone (see the module's docstring)."""
        stamps = list(q.beats)  # progress and idle events: a query with a 5-minute trigger idles at that pace
        gaps = [b - a for a, b in zip(stamps, stamps[1:]) if b > a]
        interval = statistics.median(gaps) if gaps else self.s.trigger_interval_seconds
        longest = max(q.durations) if q.durations else q.first_duration
        return max(self.s.lost_min_seconds, LOST_INTERVALS * max(interval, self.no_data_seconds), DURATION_FACTOR * longest * q.growth)

    def _judge_lost(self, q: RunState, record: QueryRecord, now: float, facts: SignalFacts) -> bool:
        """The lost verdict on an open run at ``now``; whether the query is lost (then no stall is judged)."""
        if self.silence is None or record.status not in (event_kinds.ACTIVE, event_kinds.IDLE):
            return False
        silent = self.silence()
        if silent is None:
            return q.lost
        limit = self.lost_limit(q)
        if silent <= limit:
            self._set_lost(q, record, False, now, facts)  # the log grew again: the driver lives
            return False
        if not q.lost:
            since = now - silent
            life = self.last_life() if self.last_life is not None else None
            if life is not None and life < since:  # silent before the watcher first read its log: dated then
                since = life
            was_stalled = q.stalled
            if q.stalled:  # no stall: a hung batch and a dead driver call for different actions
                q.stalled = False
                facts.set(record, catalog.QUERY_STALLED, (), 0.0)
            self._set_lost(
                q,
                record,
                True,
                now,
                facts,
                seconds_silent=round(now - since, 1),
                limit_seconds=round(limit, 1),
                seconds_since_progress=_round(now - q.last_progress) if q.last_progress is not None else None,
                was_stalled=was_stalled,
                since=since,
            )
            self.release(record.query_id)  # a later application of the query takes it over (a restart after a crash)
        return True

    def _set_lost(self, q: RunState, record: QueryRecord, lost: bool, now: float, facts: SignalFacts, **attrs: Any) -> None:
        if lost == q.lost:
            return
        q.lost = lost
        self.verdicts += 1
        if q.holder is None and not lost:  # its driver lives after all: the run is this application's again
            q.holder = q.last_holder = self
        facts.set(record, catalog.QUERY_LOST, (), 1.0 if lost else 0.0)
        if lost:  # dated at the driver's last sign of life, not when the watcher noticed (a log found long dead)
            since = attrs.pop("since", now)
            facts.set(record, catalog.QUERY_LOST_SINCE, (), since)
            facts.signal(kinds.QUERY_LOST, record, q.run_id, since, **attrs)
        else:
            facts.set(record, catalog.QUERY_LOST_SINCE, (), None)

    def _new_run(self, query_id: str, q: RunState, run_id: str, ts: float) -> None:
        if q.holder is None:  # a run again in this application after its last ended
            q.holder = q.last_holder = self
        q.previous_run_start, q.run_id, q.run_start = q.run_start, run_id, ts
        q.previous_run_end, q.run_end = q.run_end, None
        if q.run_outcome is None and q.restart_after_clean is not None:  # that run's end was never seen: a crash
            count_restart(q, q.restart_after_clean)
        q.previous_run_outcome, q.run_outcome = q.run_outcome, None
        q.previous_ended_with_app, q.ended_with_app = q.ended_with_app, False
        q.restart_after_clean = None
        q.progress_at.clear()
        q.beats.clear()
        q.durations.clear()
        q.real_time_first_batch = None
        q.first_duration, q.growth = 0.0, 1.0
        self._on_new_run(query_id, q.carried)

    def _restart(self, q: RunState, record: QueryRecord, run_id: str, ts: float, facts: SignalFacts) -> None:
        last_alive = q.last_progress
        if last_alive is None and self.last_alive_hint is not None:
            try:
                last_alive = self.last_alive_hint(record.query_id, q.run_start or ts)
            except Exception as exc:  # an unreadable checkpoint only costs the downtime figure
                log.debug("spark-state-observer: no downtime for %s: %r", record.label, exc)
        since_progress = max(0.0, ts - last_alive) if last_alive is not None else None
        gap = max(0.0, ts - q.previous_run_end) if q.previous_run_end is not None else None
        downtime = gap if gap is not None else since_progress
        q.restart_pending = True
        if q.previous_run_outcome == event_kinds.CLEAN:
            q.restart_after_clean = ts  # counted when this run crashes (``terminated``)
            if q.previous_ended_with_app:  # stopped from outside (a deploy, a probe's kill): no run of a schedule
                q.cycles.clear()
                q.intervals.clear()
            elif q.previous_run_start is not None and q.previous_run_end is not None and gap is not None:
                q.cycles.append((q.previous_run_end - q.previous_run_start, gap))
                q.intervals.append(ts - q.previous_run_start)
        else:
            count_restart(q, ts)  # after a crash: an exception, or an end never seen
            q.cycles.clear()
            q.intervals.clear()
        scheduled = len(q.cycles) == SCHEDULE_CYCLES and all(ran < paused for ran, paused in q.cycles)
        # the schedule's interval: the median start-to-start time of its recent clean runs (a cron job's is its
        # period; a loop that runs and then sleeps has the run's time in it too); its next run is due that long
        # after this start (``spark_streaming_query_schedule_interval_seconds``, the overdue alert)
        interval = statistics.median(q.intervals) if scheduled and q.intervals else None
        facts.add(record, catalog.QUERY_RESTARTS, ())
        if downtime is not None:
            facts.set(record, catalog.QUERY_LAST_DOWNTIME, (), downtime)
        facts.set(record, catalog.QUERY_SCHEDULED, (), 1.0 if scheduled else 0.0)
        facts.set(record, catalog.QUERY_SCHEDULE_INTERVAL, (), interval)
        facts.signal(
            kinds.QUERY_RESTARTED,
            record,
            run_id,
            ts,
            downtime_seconds=_round(downtime),
            gap_since_previous_run_seconds=_round(gap),
            since_last_progress_seconds=_round(since_progress),
            scheduled=scheduled,
            schedule_interval_seconds=_round(interval),
        )
        self._judge_loop(q, record, run_id, ts, facts)

    def _judge_loop(self, q: RunState, record: QueryRecord, run_id: str | None, ts: float, facts: SignalFacts) -> None:
        """The crash-loop verdict at ``ts``: the counted restarts within the window, the signal when it begins."""
        while q.restarts and ts - q.restarts[0] > self.s.crash_loop_window_seconds:
            q.restarts.popleft()
        looping = len(q.restarts) >= self.s.crash_loop_restarts
        if looping and not q.crash_loop:
            facts.signal(
                kinds.CRASH_LOOP,
                record,
                run_id,
                ts,
                restarts=len(q.restarts),
                min_restarts=self.s.crash_loop_restarts,
                window_seconds=self.s.crash_loop_window_seconds,
            )
        q.crash_loop = looping
        facts.set(record, catalog.QUERY_CRASH_LOOP, (), 1.0 if looping else 0.0)

    def _set_stalled(self, q: RunState, record: QueryRecord, stalled: bool, now: float, facts: SignalFacts, **attrs: Any) -> None:
        if stalled == q.stalled:
            return
        q.stalled = stalled
        facts.set(record, catalog.QUERY_STALLED, (), 1.0 if stalled else 0.0)
        facts.signal(kinds.STALLED if stalled else kinds.STALL_RECOVERED, record, q.run_id, now, **attrs)


def _round(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


ALERTS = (
    AlertSpec(
        "SparkStreamingQueryFailed",
        "queries",
        "0m",
        CRITICAL,
        (kinds.QUERY_TERMINATED,),
        ("failed", "failed_at_start"),
        summary="The query terminated with an exception.",
        verdict_text=(("failed", "Failed at {at}: {cause}"), ("failed_at_start", "Failed at start at {at}: {cause}")),
    ),
    AlertSpec(
        "SparkStreamingQueryDown",
        "queries",
        "2m",
        WARNING,
        (kinds.QUERY_TERMINATED,),
        ("stopped",),
        summary="A query expected to run stopped and did not come back (opt-in: expected_running_selector).",
        verdict_text=(
            ("stopped", "Stopped cleanly at {end}"),
            ("stopped.scheduled", "On a schedule: its last run stopped cleanly at {end}"),
            (
                "stopped.with_application",
                "Stopped with its application at {end} (no query stop logged: a SIGTERM, as a deploy sends, or an exit)",
            ),
        ),
    ),
    AlertSpec(
        "SparkStreamingScheduledRunOverdue",
        "queries",
        "2m",
        WARNING,
        verdicts=("overdue",),
        thresholds=("schedule_late_share", "schedule_late_min_minutes"),
        summary="A scheduled run did not start when due.",
        verdict_text=(
            (
                "overdue",
                "Overdue: a run every {every} was due at {due}, none has started in the {late} since (its last run stopped cleanly at {end})",
            ),
        ),
    ),
    AlertSpec(
        "SparkStreamingQueryCrashLooping",
        "queries",
        "0m",
        CRITICAL,
        (kinds.CRASH_LOOP,),
        ("crash_loop",),
        ("crash_loop_restarts", "crash_loop_window_minutes"),
        "The query fails and restarts in a loop.",
        verdict_text=(("crash_loop", "Crash loop: {restarts} in {span}"),),
    ),
    AlertSpec(
        "SparkStreamingQueryLost",
        "queries",
        "0m",
        CRITICAL,
        (kinds.QUERY_LOST,),
        ("lost",),
        summary="The driver died without a word.",
        verdict_text=(
            (
                "lost",
                "Driver lost at {at}: its event log silent for {silent} without an end (killed for memory? node lost?); last batch at {last_batch}",
            ),
        ),
    ),
    AlertSpec(
        "SparkStreamingQueryStalled",
        "queries",
        "1m",
        CRITICAL,
        (kinds.STALLED,),
        ("stalled",),
        summary="The query makes no progress.",
        verdict_text=(
            ("stalled", "Stalled: no batch for {quiet} (since {last_batch})"),
            ("stalled.usual", "Stalled: no batch for {quiet} (usually every {interval})"),
        ),
    ),
)
Lifecycle.alerts = ALERTS
