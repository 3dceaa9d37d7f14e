"""``assemble``: the one place an observer is built, with every collaborator passed to its constructor.

The listener (``attach``, ``StateObserverListener``), the watcher (one observer per application), ``replay``
and ``backtest`` (through ``replay``) call it and nothing else builds an ``Observer``. Sinks are named (looked
up in ``sinks.SINKS``) or given as factories; the sinks registered beyond the built-in ones are added to every
observer, so a new sink is wired once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import AbstractSet, TypeVar

from spark_state_observer.assembly.sinks import SinkOptions, extra_sinks, sink_factory
from spark_state_observer.metrics.selfmetrics import SelfMetrics
from spark_state_observer.model.identity import AppContext
from spark_state_observer.model.plan_eviction import EvictionLocator
from spark_state_observer.pipeline.runtime import Observer
from spark_state_observer.pipeline.sink import Sink, SinkFactory
from spark_state_observer.placement.feed import PlacementSource
from spark_state_observer.placement.restore_progress import ExpectedWorkHook
from spark_state_observer.settings import Settings
from spark_state_observer.signals.run_state import LastAliveHint, RunState
from spark_state_observer.signals.snapshots import CheckpointLocator

ObserverT = TypeVar("ObserverT", bound=Observer)


def assemble(
    settings: Settings,
    identity: AppContext | None = None,
    *,
    observer_type: type[ObserverT] = Observer,  # type: ignore[assignment]  # the default is the bound itself
    sinks: Sequence[str | SinkFactory] = (),
    sink_options: SinkOptions | None = None,
    wrap: Callable[[Sink], Sink] | None = None,
    live: bool = True,
    clock: Callable[[], float] = time.time,
    executor_ids: Callable[[], AbstractSet[str] | None] | None = None,
    last_alive_hint: LastAliveHint | None = None,
    self_metrics: SelfMetrics | None = None,
    query_lives: dict[str, RunState] | None = None,
    checkpoint: CheckpointLocator | None = None,
    eviction: EvictionLocator | None = None,
    silence: Callable[[], float | None] | None = None,
    last_life: Callable[[], float | None] | None = None,
    spark_conf: Mapping[str, str] | None = None,
    placement: PlacementSource | None = None,
    expected_work: ExpectedWorkHook | None = None,
    spark_version: str | None = None,
) -> ObserverT:
    """An observer of ``identity``'s events, not started.

    ``observer_type``: ``Observer``, or a subclass that adds its own first sink (the listener's
    ``PrometheusObserver``). ``sinks``: names in ``sinks.SINKS`` (built with ``sink_options``, then wrapped by
    ``wrap``: the watcher's skip of re-read events) or factories, built in order; the registered extra sinks
    follow. The other arguments are the observer's collaborators (``Observer.__init__``).
    """
    names = {s for s in sinks if isinstance(s, str)}
    chosen = [*sinks, *(name for name in extra_sinks() if name not in names)]
    factories = [s if not isinstance(s, str) else sink_factory(s, sink_options, wrap) for s in chosen]
    return observer_type(
        settings,
        live=live,
        executor_ids=executor_ids,
        last_alive_hint=last_alive_hint,
        clock=clock,
        identity=identity,
        self_metrics=self_metrics,
        query_lives=query_lives,
        checkpoint=checkpoint,
        eviction=eviction,
        silence=silence,
        last_life=last_life,
        spark_conf=spark_conf,
        placement=placement,
        expected_work=expected_work,
        spark_version=spark_version,
        sinks=factories,
    )
