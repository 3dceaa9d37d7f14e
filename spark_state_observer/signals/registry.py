"""The signal rules, in the order the engine calls them: a new rule is one module and one line here.

Each line names the rule, its class (whose ``alerts`` the mixin reads) and how to build it.

The order is the order of each hook's calls, so the signals of one event keep their order: the restores of
a batch come before its operators' growth, and the pace, late rows and Kafka after them.
"""

from __future__ import annotations

from collections.abc import Callable

from spark_state_observer.signals.capacity import MemoryPlausibility
from spark_state_observer.signals.executors import Executors, Partitions
from spark_state_observer.signals.growth import Growth
from spark_state_observer.signals.kafka import KafkaSources
from spark_state_observer.signals.late_rows import LateRows
from spark_state_observer.signals.lifecycle import Lifecycle
from spark_state_observer.signals.pace import Pace
from spark_state_observer.signals.real_time import RealTime
from spark_state_observer.signals.restore import Restores
from spark_state_observer.signals.rule import Needs, Rule
from spark_state_observer.signals.snapshots import SnapshotHealth

RULES: tuple[tuple[str, type[Rule], Callable[[Needs], Rule]], ...] = (
    # starts, restarts, crash loops, idleness, terminations, stalls, lost drivers
    (
        "lifecycle",
        Lifecycle,
        lambda n: Lifecycle(
            n.settings, n.on_new_run, live=n.live, last_alive_hint=n.last_alive_hint, queries=n.query_lives, counters=n.counters
        ),
    ),
    ("executors", Executors, lambda n: Executors()),  # executors added and removed (polled with the events)
    ("real_time", RealTime, lambda n: RealTime()),  # real-time-mode runs: interval, boundary pause and backlog
    ("restores", Restores, lambda n: Restores(n.settings, n.clock)),  # restores and reloads
    ("partitions", Partitions, lambda n: Partitions(n.checkpoint)),  # partition layout; a restart's layout from the checkpoint
    ("growth", Growth, lambda n: Growth(n.settings, n.eviction)),  # state growth, eviction, budgets
    ("capacity", MemoryPlausibility, lambda n: MemoryPlausibility()),  # RocksDB memory reports that cannot be right
    ("snapshots", SnapshotHealth, lambda n: SnapshotHealth(n.settings, n.checkpoint)),  # snapshot lag per instance
    ("pace", Pace, lambda n: Pace(n.settings)),  # watermark lag, falling behind
    ("late_rows", LateRows, lambda n: LateRows(n.settings)),  # rows the watermark dropped as too late
    ("kafka", KafkaSources, lambda n: KafkaSources(n.settings)),  # Kafka lag, source health, catch-up forecast
)


def build(needs: Needs) -> dict[str, Rule]:
    """Every rule, by name, in ``RULES``' order."""
    return {name: make(needs) for name, _, make in RULES}
