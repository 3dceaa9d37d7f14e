"""What a signal rule is to the engine: the hooks it may implement and the context each hook gets.

A rule keeps its own state and writes only into the context's ``facts``. It never reads or sets another
rule's state: what one rule needs from the engine's reading of the event (the batch's place in its run,
an executor lost, the real-time figures) comes in the context. The engine calls only the hooks a rule
defines (``hooks``), so a rule with one hook costs nothing at the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from spark_state_observer.metrics.tracker import QueryRecord, QueryTracker
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.model.alert_spec import AlertSpec
from spark_state_observer.model.events import OperatorProgress, QueryIdle, QueryProgress, QueryStarted, QueryTerminated
from spark_state_observer.model.plan_eviction import EvictionLocator
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts

if TYPE_CHECKING:  # the rules import this module
    from spark_state_observer.signals.real_time import RealTimeBatch
    from spark_state_observer.signals.run_state import LastAliveHint, RunState
    from spark_state_observer.signals.snapshots import CheckpointLocator

OperatorKey = tuple[str, int, str]  # query id, operator index, operator name


@dataclass(frozen=True, slots=True)
class Context:
    """One event as the rules see it. ``ts``: the event's time (the clock's when it has none)."""

    record: QueryRecord  # the query's record after the event was applied (read only)
    facts: SignalFacts  # where a rule writes its signals and metric values
    now: float  # when the event was received
    ts: float
    progress: QueryProgress | None = None
    first_of_run: bool = False  # the first batch of a run seen
    restore_due: bool = False  # ...of a restarted run: the batch that restores the state
    executor_removed: bool = False  # an executor went away since the query's previous batch
    real_time: RealTimeBatch | None = None  # the batch's figures when its run is real-time
    # the query's evaluation is due (every ``evaluate_seconds`` of its event time, and at a run's first batch):
    # a rule takes every batch at a constant cost, and runs its costly judgements (trends) only then
    evaluate: bool = True


@dataclass(frozen=True, slots=True)
class Needs:
    """What the engine was built with, for the rules that need it."""

    settings: Settings
    clock: Callable[[], float]
    live: bool
    on_new_run: Callable[[str, dict[str, Any]], None]  # the lifecycle tells the engine a run starts
    last_alive_hint: LastAliveHint | None = None
    query_lives: dict[str, RunState] | None = None
    checkpoint: CheckpointLocator | None = None
    eviction: EvictionLocator | None = None
    counters: QueryTracker | None = None


class Rule(Protocol):
    """The hooks a rule may define; each default does nothing and is never called (``hooks``).

    ``alerts`` are the alerts of the rule's signals. The rule's module declares them at its end
    (``ALERTS = (AlertSpec(...),)``) and sets them on the class; ``signals.alerts.declared`` reads them."""

    alerts: ClassVar[tuple[AlertSpec, ...]] = ()

    def on_started(self, ctx: Context, event: QueryStarted) -> None:
        """A run started."""
        return None

    def on_batch(self, ctx: Context) -> None:
        """A progress event, before its operators."""
        return None

    def on_operator(self, ctx: Context, op: OperatorProgress, labels: Labels) -> None:
        """One operator of the progress event (within the query's label budget)."""
        return None

    def on_batch_end(self, ctx: Context) -> None:
        """A progress event, after its operators."""
        return None

    def settle(self, ctx: Context) -> None:
        """The run ended: judge now what waits for the cadence (before the rules take the end)."""
        return None

    def on_idle(self, ctx: Context, event: QueryIdle) -> None:
        """The query reported it is idle."""
        return None

    def on_terminated(self, ctx: Context, event: QueryTerminated) -> None:
        """A run ended."""
        return None

    def on_tick(self, ctx: Context) -> None:
        """About once a second while live: verdicts that need time to pass, not events."""
        return None

    def new_run(self, query_id: str, carried: dict[str, Any]) -> None:
        """A run of ``query_id`` starts. ``carried``: what is shared with the runs before it, in other
        applications too; a rule keeps its part under its own key."""
        return None

    def forget(self, query_id: str) -> None:
        """The tracker forgot the query: so does the rule."""
        return None

    def forget_operator(self, key: OperatorKey) -> None:
        """The query's label budget dropped an operator."""
        return None


HOOKS = (
    "on_started",
    "on_batch",
    "on_operator",
    "on_batch_end",
    "settle",
    "on_idle",
    "on_terminated",
    "on_tick",
    "new_run",
    "forget",
    "forget_operator",
)


def hooks(rules: list[Rule], name: str) -> list[Any]:
    """The bound ``name`` hook of each rule that defines it, in the rules' order."""
    default = getattr(Rule, name)
    return [getattr(rule, name) for rule in rules if getattr(type(rule), name, default) is not default]
