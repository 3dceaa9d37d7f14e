"""The observer runtime: the worker that turns captured events into metrics, signals and exports.

Data flows one way: capture (``observer.listener``) → queue → ``Observer.process`` → model
(``observer.model``) → tracker → signals → exporters. ``attach()`` builds one of these; ``replay`` uses the
same ``process`` synchronously, so live and replayed runs give the same metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from prometheus_client import CollectorRegistry

from observer.capture_queue import CaptureQueue, CapturedEvent
from observer.exporters.http import MetricsServer, Pusher
from observer.exporters.prometheus import StateCollector
from observer.model import MalformedEvent, parse_event
from observer.selfmetrics import SelfMetrics
from observer.settings import Settings
from observer.signals.engine import SignalEngine, SignalEvent
from observer.sinks import Sink
from observer.tracker import QueryTracker

log = logging.getLogger("observer")
TICK_SECONDS = 1.0


class Observer:
    """Owns the queue, the tracker, the signals and the exporters of one attached listener."""

    def __init__(self, settings: Settings | None = None, *, serve: bool | None = None, live: bool = True,
                 executor_ids: Callable[[], set[str] | None] | None = None,
                 last_alive_hint: Callable[[str, float], float | None] | None = None, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings or Settings.from_env()
        self.queue = CaptureQueue(self.settings.queue_size)
        self.tracker = QueryTracker(self.settings.max_queries)
        self.self_metrics = SelfMetrics()
        self.signals = SignalEngine(self.settings, self.tracker, clock=clock, live=live, last_alive_hint=last_alive_hint)
        self.collector = StateCollector(self.tracker, self.self_metrics, self.signals, queue_len=lambda: len(self.queue),
                                        partition_top_k=self.settings.partition_top_k)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self._executor_ids = executor_ids if self.settings.poll_executors else None
        self._stop = threading.Event()
        self._taken = 0  # events the worker has finished with
        self._sink_flush_wanted = 0  # flush() asks the worker (the sinks' only thread) to flush them...
        self._sink_flush_done = 0  # ...and waits for this to catch up
        self._worker: threading.Thread | None = None
        self.server: MetricsServer | None = None
        self.pusher: Pusher | None = None
        self._serve = self.settings.http_enabled if serve is None else serve
        self._last_queue_drops = 0
        self._error_logged: set[str] = set()
        self._sinks: list[Sink] = []

    # --- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> "Observer":
        """Start the exporters and the worker thread. Raises ``ExporterError`` if the port is taken."""
        s = self.settings
        auth = (s.basic_auth_user, s.basic_auth_password) if s.basic_auth_user else None
        if self._serve:
            self.server = MetricsServer(self.collector.exposition, self.registry, s.http_host, s.http_port,
                                        certfile=s.tls_certfile, keyfile=s.tls_keyfile,
                                        client_cafile=s.tls_client_cafile, basic_auth=auth)
            log.info("spark-state-observer: metrics at %s", self.server.url)
        if s.pushgateway_url:
            self.pusher = Pusher(self.registry, s.pushgateway_url, s.pushgateway_job, s.push_interval_seconds,
                                 s.push_timeout_seconds, auth, {}, lambda: self.self_metrics.count("export_failures", "pushgateway"))
        self._worker = threading.Thread(target=self._run, name="spark-state-observer-worker", daemon=True)
        self._worker.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Process what is queued, stop the worker, push a last time and close the endpoint."""
        self.flush(timeout)
        self._stop.set()
        self.queue.wake()
        if self._worker is not None:
            self._worker.join(timeout)
        for sink in self._sinks:
            self._guarded_sink(sink, sink.close)
        if self.pusher is not None:
            self.pusher.stop()
        if self.server is not None:
            self.server.stop()

    @property
    def http_port(self) -> int | None:
        return self.server.port if self.server else None

    def add_sink(self, sink: Sink) -> None:
        """Hand every event and signal to ``sink`` too (history store, OpenTelemetry); see ``observer.sinks``."""
        self._sinks.append(sink)

        def forward(signal: SignalEvent) -> None:
            self._guarded_sink(sink, lambda: sink.on_signal(signal))

        self.signals.subscribe("*", forward)

    def on(self, kind: str, callback: Callable[[SignalEvent], Any]) -> None:
        """Call ``callback(event)`` for every signal event of ``kind`` ("*" for all); see ``observer.signals``."""
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
            if self._taken + self.queue.dropped >= target and (not self._sinks or self._sink_flush_done >= wanted):
                return True
            if self._worker is None or not self._worker.is_alive():
                self._drain_once(0)
                return not len(self.queue)
            time.sleep(0.01)
        return False

    # --- worker ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self._drain_once(TICK_SECONDS)
        self._drain_once(0)

    def _drain_once(self, timeout: float) -> None:
        items = self.queue.drain(timeout)
        for item in items:
            self.process(item)
            self._taken += 1
        drops = self.queue.dropped
        if drops != self._last_queue_drops:
            self.self_metrics.count("dropped", "queue_full", drops - self._last_queue_drops)
            self._last_queue_drops = drops
        self._guarded("tick", lambda: self.signals.tick())
        if items and self.server is not None:
            self._guarded("prerender", self.collector.prerender)
        wanted = self._sink_flush_wanted
        if wanted != self._sink_flush_done and not len(self.queue):
            for sink in self._sinks:
                if hasattr(sink, "flush"):
                    self._guarded_sink(sink, sink.flush)
            self._sink_flush_done = wanted

    def process(self, item: CapturedEvent) -> None:
        """Parse one captured event and apply it; never raises (errors are counted and logged once)."""
        started = time.perf_counter()
        metrics = self.self_metrics
        metrics.count("received", item.kind)
        with metrics.lock:
            metrics.callback.observe(item.callback_seconds)
        if item.error is not None or item.payload is None:
            metrics.count("dropped", "capture_error")
            self._log_once("capture", "spark-state-observer: could not take a %s event from Spark: %s", item.kind, item.error)
            return
        try:
            event = parse_event(item.kind, item.payload)
        except MalformedEvent as exc:
            metrics.count("dropped", "malformed")
            self._log_once("malformed", "spark-state-observer: dropped a malformed %s event: %s", item.kind, exc)
            return
        problems = getattr(event, "problems", ())
        if problems:
            metrics.incr("problems", len(problems))
        evicted_before = self.tracker.evicted
        try:
            record = self.tracker.apply(event)
            executors = None
            if self._executor_ids is not None and item.kind == "progress":
                executors = self._guarded("executors", self._executor_ids)
            self.signals.on_event(event, record, received_at=item.received_at, executors=executors)
            for sink in self._sinks:
                self._guarded_sink(sink, lambda: sink.on_event(event, item.received_at))
        except Exception as exc:  # the observer's own bug must not reach Spark; count it and go on
            metrics.incr("failed")
            self._log_once(f"failed:{type(exc).__name__}", "spark-state-observer: failed to process a %s event: %r", item.kind, exc)
        if self.tracker.evicted != evicted_before:
            metrics.count("dropped", "too_many_queries", self.tracker.evicted - evicted_before)
        with metrics.lock:
            metrics.processing.observe(time.perf_counter() - started)

    def _guarded(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:
            self.self_metrics.incr("failed")
            self._log_once(f"{what}:{type(exc).__name__}", "spark-state-observer: %s failed: %r", what, exc)
            return None

    def _guarded_sink(self, sink: Sink, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:  # a sink's trouble (disk full, collector down) never stops the rest
            self.self_metrics.count("export_failures", sink.name)
            self._log_once(f"sink:{sink.name}:{type(exc).__name__}", "spark-state-observer: %s failed: %r", sink.name, exc)

    def _log_once(self, key: str, message: str, *args: Any) -> None:
        """Log the first occurrence of each kind of problem; the counters carry the rest."""
        if key not in self._error_logged and len(self._error_logged) < 100:
            self._error_logged.add(key)
            log.warning(message, *args)
