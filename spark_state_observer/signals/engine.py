"""Derive the events an operator of a stateful stream cares about, live and in replay.

The engine runs the rules (``registry.RULES``, one module each) on every event, in order, on the worker
thread, and returns what the event implies as ``SignalFacts``: the signals it caused and the metric values
they carry. It writes nowhere itself; the runtime applies the values to the tracker and hands the signals to
the bus and the sinks. The engine reads where a batch stands (its place in its run from ``lifecycle``, an
executor lost from ``executors``, the real-time figures from ``real_time``) and gives it to every rule in one
``Context`` (``rule``): no rule reads another's state.
"""

from __future__ import annotations

import time
from collections.abc import Set
from typing import Any, Callable, cast

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.labels import LabelBudget
from spark_state_observer.metrics.tracker import QueryRecord, QueryTracker, operator_labels
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.model.checkpoint_listing import last_commit_before
from spark_state_observer.model.events import Event, QueryIdle, QueryProgress, QueryStarted, QueryTerminated
from spark_state_observer.model.plan_eviction import EvictionLocator
from spark_state_observer.settings import Settings
from spark_state_observer.signals import registry
from spark_state_observer.signals.capacity import MemoryPlausibility
from spark_state_observer.signals.executors import Executors
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.growth import Growth
from spark_state_observer.signals.kafka import KafkaSources
from spark_state_observer.signals.late_rows import LateRows
from spark_state_observer.signals.lifecycle import Lifecycle
from spark_state_observer.signals.pace import Pace
from spark_state_observer.signals.real_time import RealTime
from spark_state_observer.signals.restore import Restores
from spark_state_observer.signals.rule import Context, Needs, hooks
from spark_state_observer.signals.run_state import LastAliveHint, RunState
from spark_state_observer.signals.snapshots import CheckpointLocator, SnapshotHealth

# counters every operator exports from 0, so increase() sees the first real one
_OPERATOR_COUNTERS = (
    catalog.STATE_RESTORES,
    catalog.STATE_STORE_RELOADS,
    catalog.PARTITION_CHANGES,
    catalog.STATE_TASK_RETRIES,
    catalog.LOAD_LATENCY_ANOMALIES,
)


class SignalEngine:
    """Consumes model events in order (one thread) and returns, per event, the ``SignalFacts`` it implies."""

    def __init__(
        self,
        settings: Settings,
        lookup: Callable[[str], QueryRecord | None],
        clock: Callable[[], float] = time.time,
        live: bool = True,
        last_alive_hint: LastAliveHint | None = None,
        query_lives: dict[str, RunState] | None = None,
        checkpoint: CheckpointLocator | None = None,
        eviction: EvictionLocator | None = None,
        counters: QueryTracker | None = None,
    ) -> None:
        """``counters``: the tracker whose totals of a query continue another application's (the watcher's,
        with ``query_lives``: ``Lifecycle``). ``eviction``: which states the watermark evicts by key (the event
        log's plans); ``checkpoint``: where a query keeps its state (a restart's partitions, snapshot listings)."""
        self.s = settings
        self.clock = clock
        self.live = live
        self._lookup = lookup  # the tracker's current record of a query (read only)
        if last_alive_hint is None and checkpoint is not None:  # the watcher's: its checkpoint as the plans name it
            last_alive_hint = self._last_commit
        self._checkpoint = checkpoint
        needs = Needs(settings, clock, live, self._new_run, last_alive_hint, query_lives, checkpoint, eviction, counters)
        self.rules = registry.build(needs)
        rules = list(self.rules.values())
        self._on_started, self._on_batch, self._on_operator = (
            hooks(rules, "on_started"),
            hooks(rules, "on_batch"),
            hooks(rules, "on_operator"),
        )
        self._on_batch_end, self._on_idle = hooks(rules, "on_batch_end"), hooks(rules, "on_idle")
        self._on_terminated, self._on_tick = hooks(rules, "on_terminated"), hooks(rules, "on_tick")
        self._settle = hooks(rules, "settle")
        self._new_run_hooks, self._forget = hooks(rules, "new_run"), hooks(rules, "forget")
        self._forget_operator = hooks(rules, "forget_operator")
        # the rules the engine reads a batch's standing from, and those the runtime configures (conf, task times)
        self.lifecycle = cast(Lifecycle, self.rules["lifecycle"])
        self.executors = cast(Executors, self.rules["executors"])
        self.real_time = cast(RealTime, self.rules["real_time"])
        self.restores = cast(Restores, self.rules["restores"])
        self.capacity = cast(MemoryPlausibility, self.rules["capacity"])  # its conf: Observer.set_spark_conf
        self.snapshots = cast(SnapshotHealth, self.rules["snapshots"])  # its conf (maintenance interval): Observer.set_spark_conf
        self.growth = cast(Growth, self.rules["growth"])
        self.pace = cast(Pace, self.rules["pace"])
        self.late_rows = cast(LateRows, self.rules["late_rows"])
        self.kafka = cast(KafkaSources, self.rules["kafka"])
        # per query: its operators within the label budget, with their labels, as of the budget's ``generation``
        self._operators: dict[str, dict[tuple[int, str], Labels]] = {}
        self._generations: dict[str, tuple[LabelBudget, int]] = {}
        self._removals_seen: dict[str, int] = {}  # executor removals counted at each query's previous batch
        self._latest: dict[str, float] = {}  # each query's previous progress time: a progress before it is a problem
        self._evaluated: dict[str, float] = {}  # each query's last evaluation (``Context.evaluate``), event time
        # the event being taken (its record, facts and time), as a run's end sees it (``_new_run``): its ``Context``
        # is built only then, not at every event
        self._event: tuple[QueryRecord, SignalFacts, float] | None = None

    def _last_commit(self, query_id: str, before: float) -> float | None:
        """When the query's checkpoint (where its current run keeps it) last committed before ``before``: the
        previous run's last sign of life when this observer did not see it (a watcher started after it ended)."""
        state = self.lifecycle.queries.get(query_id)
        location = self._checkpoint(query_id, state.run_id) if self._checkpoint is not None and state is not None else None
        return last_commit_before(location, before) if location else None

    def _new_run(self, query_id: str, carried: dict[str, Any]) -> None:
        """``carried``: shared with the runs before, in other applications too. The run before, if its end went
        unseen (a driver killed), is judged first on what the cadence held back."""
        event = self._event
        if event is not None and event[0].query_id == query_id:
            ctx = Context(event[0], event[1], event[2], event[2])
            for hook in self._settle:
                hook(ctx)
        self._evaluated.pop(query_id, None)
        for hook in self._new_run_hooks:
            hook(query_id, carried)

    def on_event(
        self, event: Event, record: QueryRecord, received_at: float | None = None, executors: Set[str] | None = None
    ) -> SignalFacts:
        """The facts ``event`` implies; ``record`` is its query's record after the event was applied.

        ``executors`` (polled with a progress event) are judged first: an executor removed during the
        batch explains the reloads the batch shows."""
        facts = SignalFacts()
        now = received_at if received_at is not None else self.clock()
        self._event = (record, facts, now)
        if record.query_id not in self._operators:
            self._operators[record.query_id] = {}
            facts.add(record, catalog.QUERY_RESTARTS, (), 0.0)
        if len(self._operators) > self.s.max_queries:
            self._forget_evicted()
        if executors is not None:
            self.executors.observe(record, executors, now, facts)
        if isinstance(event, QueryProgress):
            self._on_progress(record, event, now, facts)
        elif isinstance(event, QueryStarted):
            ctx = Context(record, facts, now, event.timestamp or now)
            for hook in self._on_started:
                hook(ctx, event)
        elif isinstance(event, QueryIdle):
            ctx = Context(record, facts, now, event.timestamp or now)
            for hook in self._on_idle:
                hook(ctx, event)
        elif isinstance(event, QueryTerminated):
            ctx = Context(record, facts, now, now)
            for hook in self._settle:
                hook(ctx)
            self._evaluated.pop(record.query_id, None)
            for hook in self._on_terminated:
                hook(ctx, event)
        self._event = None
        return facts

    def _on_progress(self, record: QueryRecord, p: QueryProgress, now: float, facts: SignalFacts) -> None:
        ts = p.timestamp or now
        latest = self._latest.get(record.query_id)
        if latest is not None and ts < latest:
            # time went back (logs concatenated, a log replayed twice into one run, a restart repeating the times of
            # the run before, a driver clock stepped back): the rules' windows start again from here (``growth``)
            facts.problems += 1
        self._latest[record.query_id] = ts
        batch = self.lifecycle.progress(record, p, now, facts)
        removed = self.executors.removals > self._removals_seen.get(record.query_id, self.executors.removals)
        self._removals_seen[record.query_id] = self.executors.removals
        evaluated = self._evaluated.get(record.query_id)
        evaluate = batch.first_of_run or evaluated is None or not 0.0 <= ts - evaluated < self.s.evaluate_seconds
        if evaluate:
            self._evaluated[record.query_id] = ts
        ctx = Context(record, facts, now, ts, p, batch.first_of_run, batch.restore_due, removed, None, evaluate)
        for hook in self._on_batch:
            hook(ctx)
        seen = self._operators[record.query_id]
        budget = record.labels
        allows = budget.allows
        # the budget's kept values unchanged since the operators were last checked: those seen are still allowed
        held = self._generations.get(record.query_id)
        unchanged = held is not None and held[0] is budget and held[1] == budget.generation
        on_operator = self._on_operator
        for op in p.operators:
            key = (op.index, op.name)
            labels = seen.get(key)
            if labels is None or not unchanged:
                if labels is None:
                    labels = operator_labels(op.index, op.name)
                if not allows(labels):
                    continue  # beyond the query's label budget (spark_state_observer.metrics.labels): no series, no memory
                if key not in seen:
                    seen[key] = labels
                    for counter in _OPERATOR_COUNTERS:
                        facts.add(record, counter, labels, 0.0)
            for hook in on_operator:
                hook(ctx, op, labels)
        real_time = self.real_time.batch(record, p, batch.first_of_run, facts)
        if real_time is not None:
            ctx = Context(record, facts, now, ts, p, batch.first_of_run, batch.restore_due, removed, real_time, evaluate)
        for hook in self._on_batch_end:
            hook(ctx)
        if unchanged:
            return
        for index, name in [k for k, labels in seen.items() if not allows(labels)]:
            del seen[(index, name)]  # dropped from the budget: the rules forget it too
            for forget in self._forget_operator:
                forget((record.query_id, index, name))
        self._generations[record.query_id] = (budget, budget.generation)

    def tick(self) -> SignalFacts:
        """Called about once a second by the live worker: stalls need time to pass, not events."""
        facts = SignalFacts()
        if not self.live:
            return facts
        now = self.clock()
        for query_id in list(self._operators):
            record = self._lookup(query_id)
            if record is not None:
                ctx = Context(record, facts, now, now)
                for hook in self._on_tick:
                    hook(ctx)
        return facts

    def settle(self) -> SignalFacts:
        """Judge now what every query's cadence holds back: the observer stops (a log ends without the query's end)."""
        facts = SignalFacts()
        now = self.clock()
        for query_id in list(self._operators):
            record = self._lookup(query_id)
            if record is not None:
                ctx = Context(record, facts, now, now)
                for hook in self._settle:
                    hook(ctx)
        return facts

    def _forget_evicted(self) -> None:
        """Drop the rules' memory of queries the tracker has forgotten, so both stay bounded alike."""
        for query_id in [k for k in self._operators if self._lookup(k) is None]:
            del self._operators[query_id]
            self._removals_seen.pop(query_id, None)
            self._latest.pop(query_id, None)
            self._evaluated.pop(query_id, None)
            self._generations.pop(query_id, None)
            for forget in self._forget:
                forget(query_id)
