"""The observer runtime: the worker that turns captured events into metric state, signals and exports.

Data flows one way (``docs/architecture.md``): capture (``spark_state_observer.capture``) → queue → ``Observer.process``
→ model (``spark_state_observer.model.parse``) → tracker (``spark_state_observer.metrics``) → signals (``spark_state_observer.signals``, which
return facts: the tracker applies their values, the bus calls the callbacks) → sinks (Prometheus,
OpenTelemetry, history), each given the event and then the signals it caused. The pipeline builds no
exporter of its own choice: ``spark_state_observer.assembly`` hands the constructor sink factories, which it
calls over ``Observer.view``, so this package never imports ``spark_state_observer.exporters`` (the import
contract in ``pyproject.toml`` keeps it so). ``attach()``, ``watch``, ``replay`` and ``backtest`` all build one
through ``assemble``; ``replay`` uses the same ``process`` synchronously, so live and replayed runs give the
same metrics.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from functools import partial
from typing import AbstractSet, Any, Callable, Mapping, Sequence, cast

from spark_state_observer.capture.queue import CapturedEvent, CaptureQueue
from spark_state_observer.metrics.selfmetrics import SelfMetrics
from spark_state_observer.metrics.tracker import QueryTracker
from spark_state_observer.metrics.view import MetricsView
from spark_state_observer.model import kinds, spark_events
from spark_state_observer.model.capacity import read_conf, relevant
from spark_state_observer.model.events import Event, QueryProgress, QueryStarted, QueryTerminated
from spark_state_observer.model.identity import AppContext
from spark_state_observer.model.parse import MalformedEvent, parse_event
from spark_state_observer.model.plan_eviction import EvictionLocator
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.model.spark_time import no_data_progress_seconds
from spark_state_observer.pipeline.sink import AppAwareSink, PlacementAwareSink, Sink, SinkContext, SinkFactory
from spark_state_observer.placement.feed import PlacementFeed, PlacementSource
from spark_state_observer.placement.restore_progress import ExpectedWorkHook
from spark_state_observer.placement.restores import TaskRestores
from spark_state_observer.settings import Settings
from spark_state_observer.signals.bus import SignalBus
from spark_state_observer.signals.engine import SignalEngine
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.run_state import LastAliveHint, RunState
from spark_state_observer.signals.snapshots import CheckpointLocator

log = logging.getLogger("spark_state_observer")
ENDED_WITH_APP_KEPT = 1024  # runs ended with their application remembered, for a termination logged after the end
TICK_SECONDS = 1.0


class Observer:
    """Owns the queue, the metric state, the signals and the sinks of one attached listener.

    Sinks (Prometheus, OpenTelemetry, history) come in as factories, built over ``view`` in the constructor;
    ``spark_state_observer.embedded.prometheus_observer.PrometheusObserver`` is this with its Prometheus sink.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        live: bool = True,
        executor_ids: Callable[[], AbstractSet[str] | None] | None = None,
        last_alive_hint: LastAliveHint | None = None,
        clock: Callable[[], float] = time.time,
        identity: AppContext | None = None,
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
        sinks: Sequence[SinkFactory] = (),
    ) -> None:
        """Every collaborator comes in here; ``spark_state_observer.assembly.assemble`` is the one caller that chooses them.

        ``silence``: how long the application's event log has said nothing (the watcher's; a run open past its
        cadence is then lost), and ``last_life``: when it last showed life (dates a loss found late). ``spark_conf``: the application's configuration as known at the start.
        ``placement``: where state partitions run, with what a running restore's ETA reads (``expected_work``,
        ``spark_version``). ``sinks``: built here, in order, over this observer's view; if one fails, those
        already built are closed and the error raised.
        """
        self.settings = settings or Settings.from_env()
        # whose events these are: every series, signal and sink call carries it (the static labels alone when
        # the application is unknown, e.g. a replay of progress JSON lines)
        self.identity = identity or AppContext(static=self.settings.static_labels)
        self.queue = CaptureQueue(self.settings.queue_size)
        self.tracker = QueryTracker(self.settings.max_queries)
        self.self_metrics = self_metrics or SelfMetrics()  # the watcher's applications share one set
        self.view = MetricsView(
            self.tracker,
            self.self_metrics,
            queue_len=lambda: len(self.queue),
            partition_top_k=self.settings.partition_top_k,
            identity=self.identity,
        )
        # ``query_lives``: the watcher's applications share what they know of each query's runs, so a restart
        # as a new application is linked to the runs before it by query id, whether or not it reached a batch,
        # and its counters go on from the runs before
        self.engine = SignalEngine(
            self.settings,
            self.tracker.get,
            clock=clock,
            live=live,
            last_alive_hint=last_alive_hint,
            query_lives=query_lives,
            checkpoint=checkpoint,
            eviction=eviction,
            counters=self.tracker if query_lives is not None else None,  # counters go on across the applications
        )
        self.signals = SignalBus(on_callback_failure=lambda: self.self_metrics.incr("callback_failures"))
        self._sinks: list[Sink] = []
        # per sink, whether it takes the application too (``AppAwareSink``): decided once, as a runtime Protocol
        # check costs ~8 µs per sink, which per event was a twentieth of the pipeline
        self._app_aware: list[bool] = []
        self._executor_ids = executor_ids if self.settings.poll_executors else None
        self._stop = threading.Event()
        self._taken = 0  # events the worker has finished with
        self._sink_flush_wanted = 0  # flush() asks the worker (the sinks' only thread) to flush them...
        self._sink_flush_done = 0  # ...and waits for this to catch up
        self._worker: threading.Thread | None = None
        self._last_queue_drops = 0
        self._error_logged: set[str] = set()
        # runs that ended with their application: a termination Spark logs for one after the application's end is
        # the stop's own echo (its query thread failing under the stopped context), not a crash; the latest only
        self._ended_with_app: dict[tuple[str, str], None] = {}
        self.engine.lifecycle.silence = silence
        self.engine.lifecycle.last_life = last_life
        self.placement: PlacementFeed | None = None  # where state partitions run (set_placement)
        self.capacity_conf = read_conf({})  # the application's RocksDB and executor memory settings (set_spark_conf)
        if spark_conf is not None:
            self.set_spark_conf(spark_conf)
        if placement is not None:
            self.set_placement(placement, expected_work, spark_version)
        context = SinkContext(self.view, self.settings, self.self_metrics, self.identity)
        try:
            for build in sinks:
                self.add_sink(build(context))
        except BaseException:
            self._close_sinks()
            raise

    # --- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> Observer:
        """Start the worker thread (the caller starts the exporters it built: they may refuse, e.g. a taken port)."""
        self._worker = threading.Thread(target=self._run, name="spark-state-observer-worker", daemon=True)
        self._worker.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Process what is queued, stop the worker, then close the sinks (a last push, the endpoint)."""
        self.flush(timeout)
        self._stop.set()
        self.queue.wake()
        if self._worker is not None:
            self._worker.join(timeout)
        if self._worker is None or not self._worker.is_alive():  # the worker is gone: this thread may touch its state
            self._guarded("rules", self._settle_rules)
            if self.placement is not None:
                self._guarded("placement", self._finish_placement)
        self._close_sinks()

    def _close_sinks(self) -> None:
        for sink in self._sinks:
            self._guarded_sink(sink, sink.close)
        if self.placement is not None:
            self._guarded("placement", self.placement.close)

    def _settle_rules(self) -> None:
        """The verdicts the rules' cadence still holds back (a log that ends without the query's end)."""
        facts = self.engine.settle()
        if facts.signals or facts.updates:
            self._deliver(None, facts, self.engine.clock())

    def _finish_placement(self) -> None:
        """Restores still waiting for later batches' task times (a log that ends without the query's end)."""
        facts = SignalFacts()
        if self.placement is not None:
            self.placement.finish(facts)
        if facts.signals or facts.updates:
            self._deliver(None, facts, self.engine.clock())

    def add_sink(self, sink: Sink) -> None:
        """Hand every event and the signals it caused to ``sink`` too (history, OpenTelemetry); see ``spark_state_observer.pipeline.sink``."""
        self._sinks.append(sink)
        self._app_aware.append(isinstance(sink, AppAwareSink))
        if self.placement is not None:
            _follow(sink, self.placement)

    def set_placement(
        self, source: PlacementSource, expected_work: ExpectedWorkHook | None = None, spark_version: str | None = None
    ) -> PlacementFeed:
        """Follow where state partitions run, from ``source`` (live REST polling, or an event log's task events).

        At each progress event the worker takes the batches the source completed; their migrations become
        ``partition_migrated`` signals and their figures placement metrics, delivered with that event. The
        same tasks measure the restores Spark reports no figure for (``spark_state_observer.placement.restores``).
        """
        restores = TaskRestores(self.engine.restores, source.name)
        restores.attach()
        self.placement = PlacementFeed(
            source,
            top_k=self.settings.partition_top_k,
            restores=restores,
            conf=self.capacity_conf,
            expected_work=expected_work,
            spark_version=spark_version,
        )
        for sink in self._sinks:
            _follow(sink, self.placement)
        return self.placement

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """The sinks every event is handed to, in order."""
        return tuple(self._sinks)

    def set_spark_version(self, version: str | None) -> None:
        """The application's Spark version, once known (a replayed log's start): a running restore names its
        operators as that Spark's progress does."""
        if self.placement is not None:
            self.placement.restore_progress.spark_version = version

    def set_spark_conf(self, conf: Mapping[str, str]) -> None:
        """The application's Spark configuration (``spark.conf``, or the log's ``SparkListenerEnvironmentUpdate``):
        the RocksDB memory estimate, its budget and the plausibility of Spark's reports follow it
        (``spark_state_observer.signals.capacity``). Only the entries the estimate reads are kept."""
        self.capacity_conf = read_conf(relevant(conf))
        self.engine.capacity.conf = self.capacity_conf
        self.engine.snapshots.set_conf(relevant(conf))
        # the query's own cadence: a live driver logs at least every no-data progress interval
        self.engine.lifecycle.no_data_seconds = no_data_progress_seconds(conf)
        if self.placement is not None:
            self.placement.capacity.conf = self.capacity_conf

    def on(self, kind: str, callback: Callable[[SignalEvent], Any]) -> None:
        """Call ``callback(event)`` for every signal event of ``kind`` ("*" for all); see ``spark_state_observer.model.signal_kinds``."""
        self.signals.subscribe(kind, callback)

    # --- intake ---------------------------------------------------------------------------------------
    def submit(self, item: CapturedEvent) -> None:
        """Hand an event to the worker; called from Spark's listener thread, so it only enqueues."""
        self.queue.put(item)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything submitted so far has been processed and the sinks flushed.

        Spark delivers listener events asynchronously: right after ``query.stop()`` its terminated event
        may not have been submitted yet, and this does not wait for events still on Spark's bus.
        """
        target = self.queue.put_count
        self._sink_flush_wanted += 1
        wanted = self._sink_flush_wanted
        self.queue.wake()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._taken + self.queue.dropped >= target and self._sink_flush_done >= wanted:
                return True
            if self._worker is None or not self._worker.is_alive():
                self._drain_once(0)
                return not len(self.queue)
            time.sleep(0.01)
        return False

    # --- worker ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self._guarded("worker", lambda: self._drain_once(TICK_SECONDS))  # the worker outlives any bug
        self._guarded("worker", lambda: self._drain_once(0))

    def _drain_once(self, timeout: float) -> None:
        items = self.queue.drain(timeout)
        for item in items:
            self.process(item)
            self._taken += 1
        drops = self.queue.dropped
        if drops != self._last_queue_drops:
            self.self_metrics.count("dropped", "queue_full", drops - self._last_queue_drops)
            self._last_queue_drops = drops
        self.tick()
        for sink in self._sinks:
            self._guarded_sink(sink, partial(sink.tick, len(items)))
        wanted = self._sink_flush_wanted
        if wanted != self._sink_flush_done and not len(self.queue):
            for sink in self._sinks:
                self._guarded_sink(sink, sink.flush)
            self._sink_flush_done = wanted

    def tick(self) -> None:
        """Derive what only the passing of time tells (stalls, seconds since progress) and hand it on.

        The worker calls it about once a second; the alert backtest calls it at every simulated scrape.
        """
        facts = self._guarded("tick", self.engine.tick)
        if facts is not None and self.placement is not None:
            self._guarded("placement", partial(self.placement.tick, facts, self._label))
        if facts is not None and (facts.signals or facts.updates):
            self._deliver(None, facts, self.engine.clock())

    def process(self, item: CapturedEvent) -> None:
        """Parse one captured event and apply it; never raises (errors are counted and logged once)."""
        started = time.perf_counter()
        metrics = self.self_metrics
        with metrics.lock:  # one acquisition per event for both (``SelfMetrics.count``, inlined)
            metrics.received[item.kind] += 1
            metrics.callback.observe(item.callback_seconds)
        if item.error is not None or item.payload is None:
            metrics.count("dropped", "capture_error")
            self._log_once("capture", "spark-state-observer: could not take a %s event from Spark: %s", item.kind, item.error)
            return
        if item.kind == kinds.APPLICATION_END:
            for ended in self._ended_with_application(item.payload):
                self._apply(ended, item)
        else:
            try:
                event = parse_event(item.kind, item.payload)
            except Exception as exc:  # MalformedEvent, or input the parser did not foresee: this event only
                metrics.count("dropped", "malformed")
                reason = "malformed" if isinstance(exc, MalformedEvent) else f"malformed:{type(exc).__name__}"
                self._log_once(reason, "spark-state-observer: dropped a malformed %s event: %s", item.kind, _short(exc))
                return
            problems = getattr(event, "problems", ())
            if problems:
                metrics.incr("problems", len(problems))
            if not (isinstance(event, QueryTerminated) and (event.query_id, event.run_id) in self._ended_with_app):
                self._apply(event, item)
        with metrics.lock:
            metrics.processing.observe(time.perf_counter() - started)

    def _ended_with_application(self, payload: Any) -> list[QueryTerminated]:
        """The terminations of the runs still open when the application ended (an event log's
        ``SparkListenerApplicationEnd``): Spark logs none for a query whose application stopped under it (a
        SIGTERM, as Kubernetes sends for a deploy, runs the shutdown hook that ends the application but posts no
        query termination). Exit code 0, or none logged: the run stopped with its application, no crash; another
        exit code: it failed with it. A driver killed without a word logs no application end: its runs' ends stay
        unseen (a crash). When the query's own termination reaches the log after the application's end (its thread
        failed under the stopped context: ``IllegalStateException``, the SparkContext was shut down), the run has
        ended already and that termination is left out (``process``)."""
        exit_code = spark_events.application_end(payload)[1] if isinstance(payload, Mapping) else None
        failure = (
            None
            if not exit_code
            else f"The application ended with exit code {exit_code} while the query was running (Spark logged no termination of the query)."
        )
        ended = self.tracker.open_runs()
        for run in ended:
            self._ended_with_app[run] = None
        while len(self._ended_with_app) > ENDED_WITH_APP_KEPT:
            del self._ended_with_app[next(iter(self._ended_with_app))]
        return [QueryTerminated(query_id, run_id, failure, None, with_application=True, exit_code=exit_code) for query_id, run_id in ended]

    def _apply(self, event: Event, item: CapturedEvent) -> None:
        """Apply one parsed event: the tracker, the signals, placement, then the subscribers and sinks."""
        metrics = self.self_metrics
        evicted_before, labels_before = self.tracker.evicted, self.tracker.label_values_dropped
        try:
            record = self.tracker.apply(event)
            executors = None
            if self._executor_ids is not None and item.kind == kinds.PROGRESS:
                try:  # as ``_guarded``, without a call layer per event
                    executors = self._executor_ids()
                except Exception as exc:
                    self._failed("executors", exc)
            facts = self.engine.on_event(event, record, received_at=item.received_at, executors=executors)
            if facts.problems:
                metrics.incr("problems", facts.problems)
                self._log_once(
                    "time_back",
                    "spark-state-observer: progress of query %s went back in time (logs concatenated or replayed twice, "
                    "a clock stepped back); its windows start again from there",
                    event.query_id,
                )
            if self.placement is not None and isinstance(event, QueryProgress):
                try:  # as ``_guarded``, without a closure and a call layer per event
                    self.placement.on_progress(event, facts, self._label, event.timestamp or item.received_at)
                except Exception as exc:
                    self._failed("placement", exc)
            elif self.placement is not None and isinstance(event, QueryStarted):
                self._guarded("placement", partial(self.placement.on_started, event.query_id, event.run_id))
            elif self.placement is not None and isinstance(event, QueryTerminated):
                self._guarded("placement", partial(self.placement.on_terminated, event.query_id, event.run_id, facts))
            self._deliver(event, facts, item.received_at)
        except Exception as exc:  # the observer's own bug must not reach Spark; count it and go on
            metrics.incr("failed")
            self._log_once(f"failed:{type(exc).__name__}", "spark-state-observer: failed to process a %s event: %r", item.kind, exc)
        if self.tracker.evicted != evicted_before:
            metrics.count("dropped", "too_many_queries", self.tracker.evicted - evicted_before)
        if self.tracker.label_values_dropped != labels_before:  # beyond a query's label budget (spark_state_observer.metrics.labels)
            metrics.incr("problems", self.tracker.label_values_dropped - labels_before)
            self._log_once(
                "labels",
                "spark-state-observer: query %s has more distinct phases, sources, operators or metric keys "
                "than the observer keeps per query; the least recently used are dropped",
                event.query_id,
            )

    def _label(self, query_id: str) -> str:
        record = self.tracker.get(query_id)
        return record.label if record is not None else query_id

    def _deliver(self, event: Event | None, facts: SignalFacts, received_at: float) -> None:
        """Apply what the signals derived, tell the subscribers, then every sink: the event, then its signals."""
        self.tracker.apply_updates(facts.updates)
        signals: Sequence[SignalEvent] = facts.signals
        if signals:  # most events cause none
            app = self.identity.labels
            if app:
                signals = [dataclasses.replace(s, app=app) for s in signals]
            self.signals.publish(signals)
        for sink, app_aware in zip(self._sinks, self._app_aware):
            try:
                if app_aware:
                    cast(AppAwareSink, sink).on_app_event(self.identity, event, signals, received_at)
                else:
                    sink.on_event(event, signals, received_at)
            except Exception as exc:  # as ``_guarded_sink``, without a closure per sink and event
                self._sink_failed(sink, exc)

    def _guarded(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:
            self._failed(what, exc)
            return None

    def _failed(self, what: str, exc: Exception) -> None:
        """Count and log once a part's failure (``_guarded``); the event goes on without that part."""
        self.self_metrics.incr("failed")
        self._log_once(f"{what}:{type(exc).__name__}", "spark-state-observer: %s failed: %r", what, exc)

    def _guarded_sink(self, sink: Sink, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:  # a sink's trouble (disk full, collector down) never stops the rest
            self._sink_failed(sink, exc)

    def _sink_failed(self, sink: Sink, exc: Exception) -> None:
        self.self_metrics.count("export_failures", sink.name)
        self._log_once(f"sink:{sink.name}:{type(exc).__name__}", "spark-state-observer: %s failed: %r", sink.name, exc)

    def _log_once(self, key: str, message: str, *args: Any) -> None:
        """Log the first occurrence of each kind of problem; the counters carry the rest."""
        if key not in self._error_logged and len(self._error_logged) < 100:
            self._error_logged.add(key)
            log.warning(message, *args)


def _short(exc: BaseException) -> str:
    """An exception as one bounded, printable line (its text may quote the hostile input)."""
    return repr(exc)[:300].encode("utf-8", "backslashreplace").decode("utf-8")


def _follow(sink: Sink, feed: PlacementFeed) -> None:
    """Sinks that declare they keep per-partition placement (``PlacementAwareSink``: the history) get the feed."""
    if isinstance(sink, PlacementAwareSink):
        sink.follow_placement(feed)
