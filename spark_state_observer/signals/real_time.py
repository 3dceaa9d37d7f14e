"""Spark's real-time mode (``trigger(realTime=...)``, 4.1 stateless, 4.3 stateful): which runs use it, their
checkpoint interval, the pause at each batch boundary, and whether they keep up.

A real-time "batch" reads records as they arrive for the whole trigger interval (its tasks run all its stages at
once, a pipelined shuffle between them), then plans and commits the next: its ``addBatch`` lasts the interval,
and the interval is a checkpoint interval, not a latency. Spark's progress names no trigger (nor, in 4.3, any
latency percentile: recorded in ``docs/findings/real-time-mode.md``). What tells a real-time batch is its Kafka
source (Kafka is 4.3's one source with real-time reads): the backlog it reports (``maxOffsetsBehindLatest``)
is measured when its reading ended, while a micro-batch's is computed from the offsets it was planned with
(``latestOffset - endOffset``, exactly). A run counts as real-time from its first batch that shows it (each
recorded real-time batch did), and stays so.

For a real-time run, per batch:

- **checkpoint interval**: the median duration of the run's batches after its first (start-up and restore
  lengthen that one). Real-time batches run back to back, so the gaps between progress events the stall rule
  (``spark_state_observer.signals.lifecycle``) measures are this interval: it waits ``stall_factor`` of them. Before a
  run's second progress it knows no gap: for a run whose first batch already shows it is real-time it
  waits ``stall_factor`` x that batch's duration (at least the interval) instead of ``trigger_interval_seconds``
  (10 s, so 60 s: less than one real-time interval of Spark's default 5 minutes). A run whose first batch does
  not show it is judged by that setting until its second progress.
- **boundary pause**: ``triggerExecution - addBatch``: between two reading phases the query plans the next
  batch and commits the last (offsets, state, commit log); a record that arrives then waits for it. The one
  latency figure the progress gives.
- **backlog at the boundary**: the records Spark reports behind the latest at the batch's end (the source's
  ``maxOffsetsBehindLatest`` summed over sources). A real-time query that keeps up ends each batch a few
  records behind; one that reads slower than records arrive ends each batch further behind. Its input and
  processing rates cannot show that (both are its rows over the interval), so for a real-time run the
  falling-behind rule (``spark_state_observer.signals.pace``) judges the backlog instead: behind when, for
  ``falling_behind_for_seconds``, every batch ended with more records waiting than it read.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryRecord
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.model.phases import ADD_BATCH, TRIGGER_EXECUTION
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.kafka_offsets import KAFKA_PREFIX, kafka_sources, parse_offsets
from spark_state_observer.signals.rule import Rule

_INTERVALS = 20  # batch durations kept per run for the median


@dataclass
class _Run:
    run_id: str
    real_time: bool = False
    durations: deque[float] = field(default_factory=lambda: deque(maxlen=_INTERVALS))  # seconds, the run's first batch left out
    first_batch: float | None = None  # seconds the run's first batch lasted: at least the interval


@dataclass(frozen=True)
class RealTimeBatch:
    """What a real-time run's batch says (``None`` from ``RealTime.batch`` for a micro-batch run)."""

    checkpoint_interval: float | None  # seconds; None until a batch after the run's first
    first_batch: float | None  # seconds the run's first batch lasted (start-up and restore included), if seen
    backlog: float | None  # records behind the latest at the batch's end; None when Spark did not say
    read: float  # records the batch read


def measured_after_planning(progress: object) -> bool:
    """Whether a Kafka source's reported backlog (``maxOffsetsBehindLatest``) was measured after the batch was
    planned: a micro-batch's is exactly the largest ``latestOffset - endOffset`` of its partitions (every batch of
    the recorded micro-batch runs), a real-time batch's is the backlog when its reading ended (no batch of the
    recorded real-time runs matched)."""
    for _index, source in kafka_sources(progress):
        metrics = source.get("metrics")
        reported = _number(metrics.get("maxOffsetsBehindLatest")) if isinstance(metrics, Mapping) else None
        end = parse_offsets(source.get("endOffset"))
        latest = parse_offsets(source.get("latestOffset"))
        planned = [top - end.get(topic, {}).get(p, 0) for topic, partitions in latest.items() for p, top in partitions.items()]
        if reported is not None and planned and reported != max(planned):
            return True
    return False


def _number(value: object) -> float | None:
    try:
        return float(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None
    except ValueError:
        return None


def boundary_backlog(progress: object) -> float | None:
    """Records behind the latest at the batch's end, as Spark reports it (``maxOffsetsBehindLatest``), summed over sources."""
    total, seen = 0.0, False
    for _index, source in kafka_sources(progress):
        metrics = source.get("metrics")
        behind = _number(metrics.get("maxOffsetsBehindLatest")) if isinstance(metrics, Mapping) else None
        if behind is not None and behind >= 0:
            total, seen = total + behind, True
    return total if seen else None


class RealTime(Rule):
    """Per query, whether its current run is real-time, and that run's figures."""

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}

    def forget(self, query_id: str) -> None:
        self._runs.pop(query_id, None)

    def batch(self, record: QueryRecord, p: QueryProgress, first_of_run: bool, facts: SignalFacts) -> RealTimeBatch | None:
        """Take one batch; its figures if its run is real-time (gauges set), ``None`` for a micro-batch run."""
        run = self._runs.get(record.query_id)
        if run is None or run.run_id != p.run_id:
            if run is not None and run.real_time:  # a micro-batch run after a real-time one: the series says so
                facts.set(record, catalog.REAL_TIME_MODE, (), 0.0)
            run = self._runs[record.query_id] = _Run(p.run_id)
        if not p.sources or not any(s.description.startswith(KAFKA_PREFIX) for s in p.sources):
            return None
        if not run.real_time and measured_after_planning(p.raw):
            run.real_time = True
        if not run.real_time:
            return None
        facts.set(record, catalog.REAL_TIME_MODE, (), 1.0)
        if p.batch_duration_ms is not None and p.batch_duration_ms > 0:
            if first_of_run:
                run.first_batch = p.batch_duration_ms / 1000.0
            else:
                run.durations.append(p.batch_duration_ms / 1000.0)
        interval = statistics.median(run.durations) if run.durations else None
        if interval is not None:
            facts.set(record, catalog.REAL_TIME_CHECKPOINT_INTERVAL, (), interval)
        trigger, add = p.duration_ms.get(TRIGGER_EXECUTION), p.duration_ms.get(ADD_BATCH)
        if trigger is not None and add is not None:
            facts.set(record, catalog.REAL_TIME_BOUNDARY_PAUSE, (), max(0.0, trigger - add) / 1000.0)
        backlog = boundary_backlog(p.raw)
        if backlog is not None:
            facts.set(record, catalog.REAL_TIME_BOUNDARY_BACKLOG, (), backlog)
        return RealTimeBatch(interval, run.first_batch, backlog, float(p.input_rows or 0))
