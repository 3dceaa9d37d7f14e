"""The watcher's runtime: every application found in event-log folders, through the listener's pipeline.

``EventLogWatcher`` (``spark_state_observer.fleet.eventlog_watch``) captures: per application its identity and raw
events. This module turns them into what a listener's ``Observer`` produces, for all applications at
once behind one ``/metrics`` endpoint:

- **One pipeline per application.** Each followed application gets an ``spark_state_observer.pipeline.runtime.Observer`` of
  its own (no thread, no endpoint: the watcher's thread calls ``process`` and ``tick``), whose identity
  is the application's (``AppContext``: ``app`` = its name, the configured static labels, and the id,
  attempt and log name for the info series). Tracker, signal state and executors are then per
  application exactly as in a listener, and dropping an application (``forgotten``) drops all of it:
  memory follows the applications followed, not the ones ever seen.
- **Shared around them**: the observer's own figures (one ``SelfMetrics``), the history sink (one
  database; each event reaches it through ``AppAwareSink.on_app_event`` with its application) and the
  endpoint and Pushgateway, which join every application's cached query lines with the watcher's own
  series (``spark_state_observer_watch_*``, from ``WatchCounts`` as of the end of the last round, so an
  application shows finished only once its events are in its series).
- **Restart**: the watcher runs with ``replay_on_resume``: after a restart it reads each followed log
  again from its start so the in-memory state (counters, signal state) is rebuilt, and
  ``spark_streaming_batches_total`` equals the log's progress events; events delivered before the
  restart (``RawEvent.replayed``) go through metrics and signals but not again into the history or
  OTLP logs.
- **Times**: an event is processed at its own time where Spark logged one (a progress's trigger time plus
  its duration, when the listener would have received it; a started or idle event's time; a termination,
  logged without one, at the latest time of the lines before it, as replay places it), else at the time
  the watcher read it; executors come from the log's executor events, the driver excluded, at the times
  Spark logged them (``LoggedExecutors``, as replay keeps them).
- **Across applications**: what the rules know of a query's runs (``RunState``: its last progress and
  termination, and the other rules' state carried with it: the restore's baseline, the growth windows, the
  Kafka offsets and read rate) is shared by query id, so a restart as a new application gives the downtime, restore, Kafka
  backlog and catch-up forecast a replay of both logs gives; a new run after a driver killed without a
  word (its log still in progress) takes the query over too (``spark_state_observer.signals.lifecycle``).
- **Counters across applications**: a query's series carry no application id (``spark_state_observer.model.identity``),
  so each application of it writes the same series; its running totals (starts, restarts, terminations, batches,
  rows and every other ``_total`` it carries) go on from the application before (``QueryTracker.inherit``, when
  the lifecycle takes the query over), as Prometheus expects of a counter: ``increase()`` over a crash loop of
  many applications counts every restart. No label is added. What a watcher restart re-reads it counts again the
  same way; logs it no longer reads (finished and forgotten before the restart) are not counted again.
- **A driver gone**: the watcher tells each application's lifecycle how long its log has been silent
  (``EventLogWatcher.silence``, on its own clock); a run still open past its query's cadence is ``lost``
  (``spark_state_observer.signals.lifecycle``), a lasting state kept after the application is forgotten.

One application's parts are in ``spark_state_observer.fleet.app_pipeline``; the watcher's own series in
``spark_state_observer.fleet.watch_series``.

Data flows one way: capture (the watcher) → model → signals → sinks; nothing here is called back.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from spark_state_observer.assembly import SinkOptions, assemble, sink_factory
from spark_state_observer.exporters.endpoint import Endpoint, open_endpoint
from spark_state_observer.exporters.exposition import Created, Families, QueryLines, join_parts
from spark_state_observer.exporters.http import MetricsServer
from spark_state_observer.exporters.openmetrics import openmetrics_text
from spark_state_observer.exporters.otel.config import otlp_enabled
from spark_state_observer.exporters.prometheus import histogram_text
from spark_state_observer.exporters.push import Pusher
from spark_state_observer.exporters.samples import labelled, render_lasting, render_self
from spark_state_observer.fleet.app_events import (
    PIPELINE_EVENTS,
    PLACEMENT_EVENTS,
    AppEvents,
    LoggedApp,
    WatchCounts,
)
from spark_state_observer.fleet.app_pipeline import AppPipeline as _AppPipeline
from spark_state_observer.fleet.app_pipeline import AppSide as _AppSide
from spark_state_observer.fleet.app_pipeline import Replayable as _Replayable
from spark_state_observer.fleet.app_pipeline import app_context as app_context
from spark_state_observer.fleet.app_pipeline import apply_executor_change as _executor_change
from spark_state_observer.fleet.app_pipeline import shared_sink as _shared_sink
from spark_state_observer.fleet.app_pipeline import streaming as _streaming
from spark_state_observer.fleet.eventlog_watch import EventLogWatcher
from spark_state_observer.fleet.heap import keep_freed_heap
from spark_state_observer.fleet.query_statuses import EXPORTER as QUERY_STATUS_EXPORTER
from spark_state_observer.fleet.query_statuses import QueryStatuses
from spark_state_observer.fleet.store_mirror import StoreMirror
from spark_state_observer.fleet.store_sync import StoreSync
from spark_state_observer.fleet.watch_positions import SavedPositions
from spark_state_observer.fleet.watch_series import render_store as render_store
from spark_state_observer.fleet.watch_series import render_watch as render_watch
from spark_state_observer.fleet.watch_state import StateFileError, load_state
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.selfmetrics import SelfMetrics
from spark_state_observer.model.checkpoint_work import expected_work_hook
from spark_state_observer.model.identity import AppContext
from spark_state_observer.model.plan_checkpoint import PlanCheckpoints
from spark_state_observer.model.plan_eviction import PlanEviction
from spark_state_observer.model.query_lifecycle import LOST
from spark_state_observer.model.spark_events import (
    EXECUTOR_ADDED,
    EXECUTOR_REMOVED,
)
from spark_state_observer.pipeline.runtime import Observer
from spark_state_observer.pipeline.sink import Sink, SinkContext
from spark_state_observer.placement.task_lines import wanted_line
from spark_state_observer.placement.task_log import EventLogSource
from spark_state_observer.settings import Settings
from spark_state_observer.signals.executors import LoggedExecutors
from spark_state_observer.signals.run_state import RunState

if TYPE_CHECKING:
    from spark_state_observer.history.sink import HistorySink

log = logging.getLogger("spark_state_observer")
HISTORY_DROPPED_KEY = "history_dropped_events"  # in the state file: events dropped before its positions, never to be written
MAX_UNSAVED = 64  # position snapshots waiting for the history writer (a long outage: the newest replaces the last)


PRERENDER_SECONDS = 10.0
"""How often the watcher renders its changed queries' ``/metrics`` lines ahead of a scrape. A rendering
refreshes whatever changed since the last, and a scrape's own rendering refreshes the rest, so a scrape never
reads stale lines: this only decides how much rendering the polls do. Rendering after every 1 s poll was a third
of the watcher's CPU with 200 applications writing a batch a second, for scrapes that come every 10-60 s."""


@dataclass(frozen=True)
class WatchOptions:
    """How the watcher follows its folders (the ``watch`` command's flags)."""

    poll_interval: float = 2.0
    shard: tuple[int, int] | None = None
    state_path: str | None = None  # positions saved here (a restart resumes); None: nothing saved
    grace_seconds: float = 300.0  # a finished or lost application is forgotten this long after
    lost_after_seconds: float = 600.0  # a log that does not grow for this long without an end is lost
    read_finished_at_start: bool = False  # also read logs already finished when the watcher starts
    follow_symlinks: bool = False  # follow links out of the watched folders too
    max_apps: int = 10_000
    history: bool = False  # write the shared history (settings.history_path)


class _TextCollector(Collector):
    """The endpoint's fallback (``name[]`` filters, other formats): the same text, parsed back into families."""

    def __init__(self, render: Callable[[], bytes]) -> None:
        self._render = render

    def collect(self) -> Iterator[Metric]:
        return iter(list(text_string_to_metric_families(self._render().decode())))


class FleetObserver:
    """Every application in event-log folders through the listener's pipeline, behind one endpoint.

    ``start()`` opens the endpoint (settings ``http_host``/``http_port``, TLS and basic auth as for a
    listener), starts pushing when a Pushgateway is set, and runs the watcher on a thread; ``stop()``
    stops it and saves the positions. ``poll_once()`` does one round on the calling thread (tests,
    benchmarks).
    """

    def __init__(
        self,
        dirs: Sequence[str],
        settings: Settings | None = None,
        options: WatchOptions | None = None,
        *,
        serve: bool = True,
        mirrors: Sequence[StoreMirror] = (),
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``mirrors``: object-store URLs mirrored into some of ``dirs`` (``spark_state_observer.fleet.store_mirror``):
        synced in threads of their own once following (``store_sync``), before each poll when the caller drives ``poll_once``.

        ``clock``: the wall clock everything time-dependent reads (timeouts, silences, ages and stalls), for tests
        and benchmarks that replay a recorded log and move time on instead of waiting; by default the system's
        (the watcher's timeouts then run on the monotonic clock)."""
        self.wall: Callable[[], float] = clock or time.time
        self.mirrors = list(mirrors)
        self._store_sync: StoreSync | None = None
        self.settings = settings or Settings.from_env()
        self.options = options or WatchOptions()
        self.static = self.settings.static_labels
        self.self_metrics = SelfMetrics()
        o = self.options
        # placement needs the task, job and SQL events: parsed only for streaming applications, and only when followed
        wanted = PIPELINE_EVENTS | PLACEMENT_EVENTS if self.settings.placement != "off" else PIPELINE_EVENTS
        self.watcher = EventLogWatcher(
            dirs,
            poll_interval=o.poll_interval,
            wanted_events=wanted,
            shard=o.shard,
            state_path=o.state_path,
            grace_seconds=o.grace_seconds,
            lost_after_seconds=o.lost_after_seconds,
            read_finished_at_start=o.read_finished_at_start,
            follow_symlinks=o.follow_symlinks,
            replay_on_resume=True,
            max_apps=o.max_apps,
            raw_events=PLACEMENT_EVENTS,  # placement decodes the few fields it reads, of the lines that matter to it
            raw_keep=wanted_line,
            progress_as_bytes=True,  # the pipeline decodes the progress object's JSON itself (spark_state_observer.model.decode)
            clock=clock or time.monotonic,
            wall_clock=self.wall,
        )
        self._apps: dict[str, _AppPipeline] = {}
        # what every application's rules know of each query's runs, by query id: a job restarted as a new
        # application (same query id and checkpoint) is a restart, and its restarts a crash loop, even when
        # it failed before its first batch (issue 25); rebuilt by the replay of the logs after a restart
        self._query_lives: dict[str, RunState] = {}
        self._lock = threading.Lock()  # the watcher thread changes ``_apps`` while scrapes read it
        self._shared: list[Sink] = []
        self._history: HistorySink | None = None
        # positions waiting for their rows to be written, with the history's drops counted when they were taken
        self._unsaved: deque[tuple[SavedPositions, int, int]] = deque()
        self._dropped_before = 0  # history events earlier runs dropped and saved positions past (the state file says so)
        if o.history:
            self._dropped_before = _history_dropped(o.state_path)
            if self._dropped_before:
                log.warning(
                    "spark-state-observer: the history misses %d events that earlier runs of this watcher dropped "
                    '(counted then in %s_total{reason="history"}; %s keeps the count)',
                    self._dropped_before,
                    catalog.EVENTS_DROPPED.name,
                    o.state_path,
                )

            # a writer thread for SQLite too: positions are then saved only as far as rows are written (a full
            # disk holds them back instead of skipping the rows it refused); one database for every application
            shared = SinkContext(None, self.settings, self.self_metrics, AppContext(static=self.static))
            self._history = cast("HistorySink", sink_factory("history", SinkOptions(background=True))(shared))
            self._shared.append(self._history)
            if self._history.store is None and o.state_path:
                log.warning(
                    "spark-state-observer: without its history this run saves no read positions: %s stays as it is, "
                    "and a start with a usable history writes what this one reads",
                    o.state_path,
                )
        # failed and crash-looping queries outlive their applications; restored from the history first
        self.statuses = QueryStatuses(
            self.settings.query_status_retention_days * 86400.0,
            self.settings.query_status_max_queries,
            history=self.settings.history_path if o.history else None,
            on_failure=lambda: self.self_metrics.count("export_failures", QUERY_STATUS_EXPORTER),
            clock=self.wall,
        )
        self.statuses.restore()
        self._otlp = otlp_enabled(self.settings)
        # executors of applications not (yet) streaming: a batch application costs this small set, no pipeline
        self._executors: dict[str, LoggedExecutors] = {}
        self._serve = serve
        self._endpoint = Endpoint()
        self.server: MetricsServer | None = None
        self.pusher: Pusher | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0  # polls done (tests wait on it)
        self._prerendered_at = float("-inf")  # monotonic time of the last pre-rendering round
        # the watcher's own figures as of the end of the last round: what the endpoint shows (``_publish_counts``)
        self._counts = _copy_counts(self.watcher.counts)

    # --- lifecycle ------------------------------------------------------------------------------------
    def start(self, follow: bool = True) -> FleetObserver:
        """Open the endpoint and start following; raises ``ExporterError`` when the port is taken.

        ``follow=False`` opens the endpoint only: the caller drives ``poll_once`` (benchmarks).
        """
        keep_freed_heap()  # the polls' pieces and lines reuse warm memory (spark_state_observer.fleet.heap)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_TextCollector(self.exposition))
        # one push of every application; the grouping key holds the static labels, the series their app
        self._endpoint = open_endpoint(
            self.settings,
            self.exposition,
            registry,
            serve=self._serve,
            grouping=dict(self.static),
            render_parts=self.exposition_parts,
            on_push_failure=lambda: self.self_metrics.count("export_failures", "pushgateway"),
            on_refused=lambda reason: self.self_metrics.count("http_refused", reason),
            openmetrics=openmetrics_text(self.exposition, self.created),
        )
        self.server, self.pusher = self._endpoint.server, self._endpoint.pusher
        if self.server is not None:
            log.info("spark-state-observer: watching %s; metrics at %s", ", ".join(self.watcher.dirs), self.server.url)
        if follow:
            if self.mirrors:  # a store that hangs never holds the local folders' polls
                self._store_sync = StoreSync(self.mirrors, self.options.poll_interval).start()
            self._thread = threading.Thread(target=self._run, name="spark-state-observer-watch", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the current round, save the positions, flush and close every sink, close the endpoint."""
        self._stop.set()
        if self._store_sync is not None:
            self._store_sync.stop(min(timeout, 5.0))
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            pipelines = list(self._apps.values())
        for pipeline in pipelines:
            pipeline.observer.stop(1.0)
        for sink in self._shared:
            self._guarded(sink, sink.close)  # writes what it can: positions are saved only as far as that
        self.statuses.close()
        self._save_written_positions()
        self._publish_counts()  # a last push shows them
        self._endpoint.stop()

    @property
    def http_port(self) -> int | None:
        return self.server.port if self.server is not None else None

    def _run(self) -> None:
        interval = self.options.poll_interval
        while not self._stop.is_set():
            started = time.monotonic()
            self.poll_once()
            if not self.watcher.backlog:
                self._stop.wait(max(0.0, interval - (time.monotonic() - started)))

    # --- one round --------------------------------------------------------------------------------------
    def poll_once(self, on_found: Callable[[list[AppEvents]], None] | None = None) -> None:
        """Poll the folders, feed what was found through each application's pipeline, tick, save positions.

        ``on_found`` sees what the poll found before it is processed (benchmarks measure delivery with it).
        """
        if self._store_sync is None:
            for mirror in self.mirrors:  # driven by the caller: new parts in object stores land in the folders first
                mirror.sync()
        found = self.watcher.poll()
        if self.mirrors:
            finished = self.watcher.finished_logs()
            for mirror in self.mirrors:  # what the watcher is done with leaves the mirrors: their disk stays bounded
                mirror.prune(finished)
        if on_found is not None:
            on_found(found)
        processed = 0
        # applications that started earlier first: the folders list in no order, and a query's runs in several
        # applications found in one poll (logs read again after a restart of the watcher, drivers killed without an
        # end still "running") link in the order they ran
        for app in sorted(found, key=_started_first):
            try:
                processed += self.handle(app)
            except Exception:  # one application's trouble never stops the others
                self.self_metrics.incr("failed")
                log.exception("spark-state-observer: watcher pipeline failed on %s", app.log_name)
        with self._lock:
            pipelines = list(self._apps.values())
        prerender = bool(processed) and self.server is not None and time.monotonic() - self._prerendered_at >= PRERENDER_SECONDS
        if prerender:
            self._prerendered_at = time.monotonic()
        for pipeline in pipelines:
            if pipeline.side.clock_known:  # before, a driver's skew (days, for an old log copied in now) reads as a stall
                lifecycle = pipeline.observer.engine.lifecycle
                verdicts = lifecycle.verdicts
                pipeline.observer.tick()
                if lifecycle.verdicts != verdicts:  # a query lost (or back): its lasting state now, not at its next event
                    self.statuses.observe(pipeline.observer.identity, pipeline.observer.view.lifecycles())
            if prerender:
                pipeline.collector.prerender()  # render changed queries off the scrape path
        self.statuses.round()
        for sink in self._shared:
            self._guarded(sink, lambda sink=sink: sink.tick(processed))  # type: ignore[misc]
            if processed:
                self._guarded(sink, sink.flush)
        self._save_written_positions()
        self._publish_counts()
        self.rounds += 1

    def _publish_counts(self) -> None:
        """Show the watcher's figures of this round only now that its events are in the applications' series.

        The watcher updates its counts (an application finished, events delivered) inside ``poll``, before the
        pipelines have processed what that poll found; a scrape in between saw an application finished while
        its counters still lacked the batches read with its end (a restarted watcher replays a whole log in
        one poll, so the gap was most of it). The endpoint shows this copy, taken once the round is done.
        """
        self._counts = _copy_counts(self.watcher.counts)

    def _save_written_positions(self) -> None:
        """Save the newest read positions whose events the history has written (or counted dropped).

        The history's background writer (SQLite and PostgreSQL alike) settles rows later, so a snapshot waits
        for its mark (at most ``MAX_UNSAVED`` kept: the newest replaces the last). A full disk, a database
        away or a kill in between: a restart re-reads what was not written yet instead of losing it. A
        snapshot that cannot be saved (the state file's own disk full) is tried again first next round.
        """
        history = self._history
        positions = self.watcher.snapshot()
        if positions is not None:
            entry = (positions, *((history.written_mark(), history.dropped_rows) if history is not None else (0, 0)))
            if len(self._unsaved) >= MAX_UNSAVED:
                self._unsaved[-1] = entry
            else:
                self._unsaved.append(entry)
        ready = None
        while self._unsaved and (history is None or history.is_written(self._unsaved[0][1])):
            ready = self._unsaved.popleft()
        if ready is None:
            return
        # the events dropped before these positions stay dropped once they are saved: the state file says how many
        extra = {HISTORY_DROPPED_KEY: self._dropped_before + ready[2]} if history is not None else None
        if not self.watcher.save(ready[0], extra):
            self._unsaved.appendleft(ready)

    def handle(self, found: AppEvents) -> int:
        """Apply what one poll found for one application; returns the number of events processed."""
        pipeline = self._apps.get(found.log_name)
        if pipeline is None and found.identity is not None and _streaming(found):
            pipeline = self._admit(found.identity)
        if pipeline is not None:
            pipeline.side.clock_skew, pipeline.side.clock_known = found.clock_skew, found.clock_known
        done = 0
        for event in found.events:
            if pipeline is not None:
                done += pipeline.apply(event)
            elif event.event_type in (EXECUTOR_ADDED, EXECUTOR_REMOVED):
                _executor_change(self._executors.setdefault(found.log_name, LoggedExecutors()), event)
        for change in found.status_changes:
            if pipeline is not None and change.status in ("finished", "lost", "forgotten"):
                pipeline.observer.engine.lifecycle.release()  # a restart as a new application may continue its queries
            if change.status == "lost":
                log.warning("spark-state-observer: %s", change.message)
            elif change.status == "forgotten":
                self._forget(found.log_name)
        if pipeline is not None and done:
            self.statuses.observe(pipeline.observer.identity, pipeline.observer.view.lifecycles())
        return done

    def _admit(self, identity: LoggedApp) -> _AppPipeline:
        context = app_context(identity, self.static)
        while len(self._query_lives) > self.options.max_apps:  # bounded: the queries seen first go first
            del self._query_lives[next(iter(self._query_lives))]
        checkpoints, eviction = PlanCheckpoints(), PlanEviction()
        side = _AppSide(self._executors.pop(identity.log_name, LoggedExecutors()), self.wall)
        placement = EventLogSource() if self.settings.placement != "off" else None
        observer: Observer = assemble(
            self.settings,
            context,
            # the shared sinks (the history) first, then the application's own (OTLP): neither takes events read again
            sinks=[*(_shared_sink(sink, side, context) for sink in self._shared), *(["otel"] if self._otlp else [])],
            wrap=lambda sink: _Replayable(sink, side, context, owned=True),
            live=True,
            clock=side.clock,
            executor_ids=side.executor_ids,
            self_metrics=self.self_metrics,
            query_lives=self._query_lives,
            checkpoint=checkpoints,
            eviction=eviction,
            # how long its log has said nothing, as the watcher saw it grow: a driver gone without a word is lost
            silence=lambda: self.watcher.silence(identity.log_name),
            last_life=lambda: self.watcher.last_life(identity.log_name),  # dates a loss found long after it happened
            spark_conf=dict(identity.spark_conf),
            placement=placement,
            # a restore's ETA starts from the work in the checkpoint its plans name; its operators are named as
            # this Spark's progress names them
            expected_work=expected_work_hook(checkpoints) if placement is not None else None,
            spark_version=identity.spark_version if placement is not None else None,
        )
        if observer.placement is not None:
            for executor, cores in side.executors.cores.items():  # came before the application was admitted
                observer.placement.restore_progress.on_executor_cores(executor, cores)
        pipeline = _AppPipeline(observer, side, placement, checkpoints, eviction, log_name=identity.log_name)
        with self._lock:
            self._apps[identity.log_name] = pipeline
        log.info("spark-state-observer: observing %s (%s)", context.name, context.log_name)
        return pipeline

    def _forget(self, log_name: str) -> None:
        self._executors.pop(log_name, None)
        with self._lock:
            pipeline = self._apps.pop(log_name, None)
        if pipeline is not None:
            pipeline.observer.engine.lifecycle.detach()  # its queries' totals stay, for a later application of them
            pipeline.observer.stop(1.0)  # closes its own sinks (OTLP); its series go with it

    # --- exposition ---------------------------------------------------------------------------------------
    def exposition(self) -> bytes:
        """Every application's series, then the observer's own and the watcher's, in text format 0.0.4."""
        return b"".join(self.exposition_parts())

    def exposition_parts(self) -> Iterator[bytes]:
        """``exposition()`` one metric family at a time (the endpoint compresses them as they come).

        Two applications with the same name (a job restarted while its previous run is still within its
        grace period, or two running at once: a counted ``duplicate_name`` problem) would write the same
        series: the newest one's are kept, per query id for query series and for the application-wide
        ones (executors); every application keeps its info series, which its application id tells apart.
        """
        with self._lock:
            pipelines = list(self._apps.values())
        queries: list[QueryLines] = []
        rest: QueryLines = []
        count = 0
        seen_queries: set[tuple[str, str]] = set()
        live: set[str] = set()  # query ids some followed application exports: their lifecycle is its own
        seen_apps: set[str] = set()
        for pipeline in reversed(pipelines):  # newest first
            name = pipeline.observer.identity.name
            keyed, app = pipeline.collector.application_lines()
            for query_id, lines in keyed:
                live.add(query_id)
                if (name, query_id) not in seen_queries:
                    seen_queries.add((name, query_id))
                    queries.append(lines)
            rest.extend(app if name not in seen_apps else [(spec, text) for spec, text in app if spec is catalog.APPLICATION_INFO])
            seen_apps.add(name)
            count += pipeline.observer.view.query_count()
        lasting = Families()
        for row in self.statuses.exported:
            if row.query_id not in live:  # its application forgotten: the state lasts
                query = (("query", row.name or row.query_id), ("query_id", row.query_id))
                labels = AppContext(row.app, row.static).labels + query
                render_lasting(lasting, labels, row.status, row.run_start, row.schedule_seconds, row.since if row.status == LOST else None)
        queries.append(lasting.lines())
        own = Families()
        snapshot = self.self_metrics.snapshot(0, count)
        render_self(own, snapshot, self.static)
        render_watch(labelled(own, self.static), self._counts)
        render_store(labelled(own, self.static), self.mirrors)
        yield from join_parts(queries, rest + own.lines())
        yield histogram_text(snapshot, self.static)

    def created(self) -> Created:
        """When each followed application's query counter series was first rendered (OpenMetrics ``_created``)."""
        with self._lock:
            pipelines = list(self._apps.values())
        return {key: at for pipeline in pipelines for key, at in pipeline.collector.created().items()}

    def applications(self) -> dict[str, AppContext]:
        """The applications observed now, by log name."""
        with self._lock:
            return {name: p.observer.identity for name, p in self._apps.items()}

    def _guarded(self, sink: Sink, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:
            self.self_metrics.count("export_failures", sink.name)
            log.warning("spark-state-observer: %s failed: %r", sink.name, exc)


def _history_dropped(state_path: str | None) -> int:
    """History events earlier runs dropped (``HISTORY_DROPPED_KEY`` of the state file); 0 without one. The
    watcher itself reports a state file it cannot read."""
    if not state_path:
        return 0
    try:
        state = load_state(state_path)
    except StateFileError:
        return 0
    dropped = state.get(HISTORY_DROPPED_KEY) if state else None
    return dropped if type(dropped) is int and dropped > 0 else 0


def _copy_counts(counts: WatchCounts) -> WatchCounts:
    return dataclasses.replace(counts, problems=counts.problems.copy())


def _started_first(found: AppEvents) -> tuple[float, str]:
    """The order in which a poll's applications are processed: by their start time (unknown last), then name."""
    start = found.identity.start_time_ms if found.identity is not None else None
    return (float("inf") if start is None else float(start), found.log_name)
