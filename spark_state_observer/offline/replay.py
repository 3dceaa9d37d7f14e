"""Replay recorded events through the same pipeline as a live job, for post-mortems and tests."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, TextIO, cast

from spark_state_observer.assembly import SinkOptions, assemble
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.exporters.prometheus import StateCollector
from spark_state_observer.model import kinds
from spark_state_observer.model.bounded import clean_identity, loads
from spark_state_observer.model.capacity import ENVIRONMENT_PREFIX, spark_properties
from spark_state_observer.model.checkpoint_work import expected_work_hook
from spark_state_observer.model.decode import stamp_fields
from spark_state_observer.model.parse import parse_timestamp, parse_timestamp_memo
from spark_state_observer.model.plan_checkpoint import PlanCheckpoints
from spark_state_observer.model.plan_eviction import PlanEviction
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.model.spark_events import APP_START, LOG_START, line_prefix
from spark_state_observer.offline.eventlog import (
    DEFAULT_MAX_LINE_BYTES,
    EXECUTOR_PREFIX,
    RECORD_EXECUTOR_ADDED,
    EventLogError,
    read_records,
)
from spark_state_observer.offline.log_identity import application_of, identity_of
from spark_state_observer.pipeline.runtime import Observer
from spark_state_observer.placement.task_log import EventLogSource
from spark_state_observer.settings import Settings
from spark_state_observer.signals.executors import ExecutorSet, LoggedExecutors
from spark_state_observer.signals.snapshots import CheckpointLocator

if TYPE_CHECKING:
    from spark_state_observer.history.sink import HistorySink

_LOG_START_LINE = line_prefix(LOG_START)
_APP_START_LINE = line_prefix(APP_START)


@dataclass
class ReplayResult:
    observer: Observer
    collector: StateCollector  # the Prometheus text over the observer's view (the pipeline builds no exporter)
    events: int = 0
    errors: list[str] = field(default_factory=list)
    history_rows_dropped: int = 0  # rows the history could not write (locked, read-only, full): the replay is incomplete

    def exposition(self) -> str:
        """The Prometheus text of the final state, as the live endpoint would have served it."""
        return self.collector.exposition().decode()


def replay(
    paths: list[str],
    settings: Settings | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    progress: Callable[[int], None] | None = None,
    history: str | None = None,
    clock: Callable[[], float] | None = None,
    before_event: Callable[[Observer, float], None] | None = None,
    on_signal: Callable[[SignalEvent], None] | None = None,
    checkpoint: CheckpointLocator | None = None,
) -> ReplayResult:
    """Feed every recorded event of ``paths`` through a fresh, non-serving ``Observer``.

    With ``history``, the events and signals are also written to that history database, so a past
    job's event logs become browsable. With ``clock`` the observer runs as if live on that (simulated)
    clock, so time-driven signals (stalls) are derived when its ticks are called; ``before_event`` is
    called with the observer and each event's time before the event is processed (the backtest scrapes
    there); ``on_signal`` gets every signal as it is derived (the observer itself keeps only recent ones);
    ``checkpoint`` names a query run's checkpoint as it was when the log ended, listed for the snapshot state of
    every store instance (``spark_state_observer.signals.snapshots``); not by default, since a checkpoint read now is not
    the one a past log saw.
    """
    base = settings or Settings.from_env()
    executors = LoggedExecutors()  # the watcher keeps the log's executors the same way

    def executor_ids() -> ExecutorSet | None:
        return executors.current() if executors.seen else None

    identity = application_of(paths, base.static_labels, max_line_bytes)  # the recorded application's, as a live observer has it
    eviction = PlanEviction()  # which states the watermark evicts by key, from the plans (read with the task events)
    tasks = EventLogSource() if base.placement != "off" else None  # per-partition placement from the task events the record reader skips
    plans = PlanCheckpoints()
    observer: Observer = assemble(
        base,
        identity,
        sinks=["history"] if history else [],
        sink_options=SinkOptions(history_path=history),
        live=clock is not None,
        clock=clock or time.time,
        executor_ids=executor_ids,
        checkpoint=checkpoint,
        eviction=eviction,
        placement=tasks,
        # a restore's expected work from its checkpoint: the one given, else where the log's plans keep it (the
        # restoring batch's version is named, so a checkpoint that moved on since still tells it while Spark keeps it)
        expected_work=expected_work_hook(checkpoint or plans) if tasks is not None else None,
    )
    if on_signal is not None:
        observer.on("*", on_signal)
    sink = cast("HistorySink | None", next((s for s in observer.sinks if s.name == "history"), None))
    result = ReplayResult(observer, StateCollector(observer.view))

    def tap(line: bytes) -> None:
        if sink is not None and line.startswith(_APP_START_LINE):  # each log's rows carry its own application
            start = _json_object(line)
            if start is not None:
                sink.stamp(identity_of(start, base.static_labels))
        if line.startswith(ENVIRONMENT_PREFIX):  # the application's conf: the RocksDB capacity estimate reads it
            try:
                observer.set_spark_conf(spark_properties(loads(line)))
            except (ValueError, RecursionError):
                result.errors.append("the environment event is not readable JSON: Spark's defaults assumed for the capacity estimate")
        if tasks is not None:
            if line.startswith(_LOG_START_LINE):  # the application's Spark: a restore names its operators as that Spark's progress does
                try:
                    version = loads(line).get("Spark Version")
                except (ValueError, RecursionError, AttributeError):
                    version = None
                observer.set_spark_version(clean_identity(version) or None)
            plans.feed_line(line)
            eviction.feed_line(line)
            tasks.feed_line(line)

    last_ts = 0.0  # events without a time of their own (terminated) are placed at the last known time
    for item in read_records(paths, max_line_bytes, tap=tap, progress_as_bytes=True):
        if isinstance(item, EventLogError):
            result.errors.append(str(item))
            if item.args and "not valid JSON" in str(item):
                observer.self_metrics.count("dropped", "malformed")
            continue
        if item.kind in (kinds.PROGRESS, kinds.STARTED) and isinstance(item.payload, dict):
            last_ts = _batch_end(parse_timestamp(item.payload.get("timestamp")), item.payload.get("batchDuration"), item.kind) or last_ts
        elif item.kind == kinds.PROGRESS and isinstance(item.payload, bytes):  # event logs' progress, as its JSON bytes
            text, duration = stamp_fields(item.payload)  # the decoder reads the same time next: memoized, parsed once
            last_ts = _batch_end(parse_timestamp_memo(text), duration, item.kind) or last_ts
        if item.kind.startswith(EXECUTOR_PREFIX):
            executors.change(item.payload, item.kind == RECORD_EXECUTOR_ADDED, item.timestamp)
            continue
        at = item.timestamp or last_ts or time.time()
        if before_event is not None:
            before_event(observer, at)
        dropped = observer.self_metrics.dropped.get("malformed", 0)
        observer.process(CapturedEvent(item.kind, item.payload, at, 0.0))
        if observer.self_metrics.dropped.get("malformed", 0) != dropped:  # refused by the model (bad UTF-8, odd values): said where
            result.errors.append(f"{item.source}: a malformed {item.kind} event, dropped")
        result.events += 1
        if progress is not None and result.events % 500 == 0:
            progress(result.events)
    observer.stop()  # flushes the sinks; the tracker and registry stay readable
    if tasks is not None and tasks.bad_lines:  # the record reader skips these lines unparsed: only placement saw them
        result.errors.append(f"{tasks.bad_lines} task, job or plan line(s) not readable JSON or too large: placement skipped them")
    if sink is not None and (sink.dropped_rows or sink.store is None):
        result.history_rows_dropped = sink.dropped_rows
        reason = sink.last_failure or sink.error or "unknown"
        result.errors.append(f"history {history}: {sink.dropped_rows} rows not written: {reason}")
    return result


def _json_object(line: bytes) -> dict[str, Any] | None:
    """``line`` parsed as a JSON object (None: unreadable; the record reader reports the line)."""
    try:
        value = loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _batch_end(stamp: float | None, duration: Any, kind: str) -> float | None:
    """When a live listener would have received the event: a progress when its batch ends (trigger time
    plus batch duration), a started event at its own time."""
    if stamp is not None and kind == kinds.PROGRESS and isinstance(duration, (int, float)) and 0 <= duration < 1e10:
        return stamp + duration / 1000.0
    return stamp


def terminal_progress(stream: TextIO = sys.stderr) -> Callable[[int], None] | None:
    """A one-line event counter on a terminal; nothing when output is not a terminal."""
    if not stream.isatty():
        return None
    started = time.monotonic()

    def show(n: int) -> None:
        rate = n / max(time.monotonic() - started, 1e-9)
        stream.write(f"\rreplayed {n:,} events ({rate:,.0f}/s)")
        stream.flush()

    return show
