"""``attach(spark)``: the one line a job adds to be observed."""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable, cast

from spark_state_observer.assembly import SinkOptions, assemble
from spark_state_observer.embedded.listener import StateObserverListener
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.exporters.otel.config import otlp_enabled
from spark_state_observer.model.capacity import SESSION_KEYS, relevant
from spark_state_observer.model.checkpoint_listing import last_commit_before
from spark_state_observer.model.checkpoint_work import expected_work_hook
from spark_state_observer.model.identity import AppContext
from spark_state_observer.model.plan_eviction import EvictionLocator, PlanEviction
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.settings import Settings
from spark_state_observer.signals.restore_listener import RestoreListener, subscribe_restore_listener

log = logging.getLogger("spark_state_observer")


class ObserverHandle:
    """What ``attach`` returns: the running observer, and ``stop()`` to detach it."""

    def __init__(self, spark: Any, observer: PrometheusObserver, listener: StateObserverListener) -> None:
        self.spark, self.observer, self.listener = spark, observer, listener
        self._stopped = False

    @property
    def http_port(self) -> int | None:
        return self.observer.http_port

    @property
    def url(self) -> str | None:
        return self.observer.server.url if self.observer.server else None

    def on(self, kind: str, callback: Any) -> None:
        """Register ``callback(SignalEvent)`` for a signal kind (see ``spark_state_observer.model.signal_kinds.SIGNAL_KINDS``)."""
        self.observer.on(kind, callback)

    def add_restore_listener(self, listener: RestoreListener) -> None:
        """Call ``listener``'s ``on_restore_start`` / ``on_restore_progress`` / ``on_restore_end`` as state
        stores restore (Kafka Streams' ``StateRestoreListener`` shape), on the observer's worker thread."""
        subscribe_restore_listener(self.observer.on, listener)

    @property
    def signals(self) -> list[SignalEvent]:
        return list(self.observer.signals.recent)

    def flush(self, timeout: float = 10.0) -> bool:
        return self.observer.flush(timeout)

    def stop(self) -> None:
        """Remove the listener from Spark, then drain, push a last time and close the endpoint."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self.spark.streams.removeListener(self.listener)
        except Exception as exc:  # the session may already be gone
            log.debug("spark-state-observer: removeListener: %r", exc)
        self.observer.stop()


def attach(spark: Any, **settings: Any) -> ObserverHandle:
    """Attach the observer to ``spark``: every streaming query of that session is observed.

    Settings are keyword arguments or ``SPARK_STATE_OBSERVER_*`` environment variables (README); with an
    OTLP endpoint (``otlp_endpoint`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``) the OpenTelemetry sink is added.
    Raises ``ExporterError`` (with the address) when the metrics port cannot be bound, or when OTLP export
    is configured without the ``otel`` extra installed. A session zero-code attach already observes
    (``spark-state-observer run``, ``opentelemetry-instrument``) keeps its observer: that handle is returned,
    so a job that also calls ``attach`` is observed once and binds no second port.
    """
    zero_code = sys.modules.get("spark_state_observer.zerocode.sessions")
    existing = zero_code.attached_handle(spark) if zero_code is not None else None
    if existing is not None:
        log.warning(
            "spark-state-observer: this session is already observed (attached without code changes); attach() returns that observer%s",
            ", its keyword settings are not applied" if settings else "",
        )
        return cast(ObserverHandle, existing)
    resolved = Settings.from_env(**settings)
    identity = app_context(spark, resolved)
    observer = assemble(
        resolved,
        identity,
        observer_type=PrometheusObserver,
        sinks=[name for name, wanted in (("history", resolved.history_enabled), ("otel", otlp_enabled(resolved))) if wanted],
        sink_options=SinkOptions(resource=spark_resource_attributes(spark) if otlp_enabled(resolved) else {}),
        executor_ids=_executor_ids(spark),
        last_alive_hint=_checkpoint_last_commit(spark),
        checkpoint=_checkpoint_location(spark),
        eviction=_plan_eviction(spark),
        spark_conf=_spark_conf(spark),
        **_placement(spark, resolved),
    )
    try:
        observer.start()
    except Exception:
        observer.stop()  # closes the sinks it already opened
        raise
    listener = StateObserverListener(observer)
    try:
        spark.streams.addListener(listener)
    except Exception:
        observer.stop()
        raise
    return ObserverHandle(spark, observer, listener)


def _spark_conf(spark: Any) -> dict[str, str]:
    """What the RocksDB capacity estimate reads of the application's configuration, once at attach.

    The SparkContext's conf holds the executor settings; the session's (``spark.conf``, also under Spark
    Connect) the SQL ones set after start. A value that cannot be read leaves Spark's default to the estimate.
    """
    conf: dict[str, str] = {}
    if not is_connect(spark):
        try:
            conf.update(relevant(dict(spark.sparkContext.getConf().getAll())))
        except Exception as exc:
            log.debug("spark-state-observer: cannot read the SparkContext's conf: %r", exc)
    for key in SESSION_KEYS:
        try:
            value = spark.conf.get(key, None)
        except Exception as exc:
            log.debug("spark-state-observer: cannot read %s: %r", key, exc)
            continue
        if value is not None:
            conf[key] = str(value)
    return conf


def _placement(spark: Any, settings: Settings) -> dict[str, Any]:
    """Follow state partitions through the driver's REST API when Spark's UI is on (``placement`` auto|on|off):
    ``assemble``'s ``placement``, ``expected_work`` and ``spark_version``, or nothing.

    The poll runs on the observer's worker at each progress event, never on Spark's listener thread;
    without a UI (or on Spark Connect) there is nothing to poll: ``on`` says so, ``auto`` stays quiet.
    """
    if settings.placement == "off":
        return {}
    from spark_state_observer.placement.task_poll import polling_source

    source = None if is_connect(spark) else polling_source(spark, settings.placement_every)
    if source is not None:
        locate = _checkpoint_location(spark)
        return {
            "placement": source,
            # a restore's ETA starts from its checkpoint's work (listed on the worker, bounded)
            "expected_work": None if locate is None else expected_work_hook(locate, _task_slots(spark), _estimate_problem),
            "spark_version": _spark_version(spark),  # a restore names its operators as this Spark's progress does
        }
    if settings.placement == "on":
        log.warning(
            "spark-state-observer: placement=on but the driver has no UI to poll (spark.ui.enabled=false or Spark Connect); "
            "per-partition placement is available from event logs (replay, watch)"
        )
    return {}


def _spark_version(spark: Any) -> str | None:
    """The session's Spark version; None when it cannot be read."""
    try:
        version = spark.version
    except Exception:  # a session being torn down: the 4.x names are assumed
        return None
    return version if isinstance(version, str) else None


def _task_slots(spark: Any) -> Callable[[], int | None]:
    """The cores the application's tasks run on (``defaultParallelism``: local[N]'s N, else the executors' cores)."""

    def slots() -> int | None:
        try:
            n = int(spark.sparkContext.defaultParallelism)
        except Exception:  # the context is stopping
            return None
        return n if n > 0 else None

    return slots


def _estimate_problem(why: str) -> None:
    log.info("spark-state-observer: restore ETA without the checkpoint's estimate: %s", why)


def is_connect(spark: Any) -> bool:
    """A Spark Connect session: no JVM on this side, so no ``sparkContext`` or ``_jsparkSession``."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def app_context(spark: Any, settings: Settings) -> AppContext:
    """The session's application as the watcher would name it from its event log.

    ``app`` is ``spark.app.name``; the info series gets ``spark.app.id``, the attempt (cluster managers
    with attempts set ``spark.app.attempt.id``; none in local and client mode) and the event-log name
    Spark gives this application (``<appId>[_<attemptId>]``), so listener and watcher write the same series.
    A value that cannot be read is left empty, never a failed attach.

    In a classic session the SparkContext's own conf is read, not the session's: a later
    ``SparkSession.builder.appName(...).getOrCreate()`` in the same driver rewrites the session's
    ``spark.app.name`` but not the application's, and the event log (the watcher's name) carries the application's.
    """
    values: dict[str, str] = {}
    for key in ("spark.app.name", "spark.app.id", "spark.app.attempt.id"):
        try:
            # a key that is not set raises (classic and Connect alike); Connect has no SparkContext here
            value = spark.conf.get(key) if is_connect(spark) else spark.sparkContext.getConf().get(key)
        except Exception as exc:  # an unset key, a stopped session: an emptier identity
            log.debug("spark-state-observer: no %s: %r", key, exc)
            value = None
        values[key] = str(value) if value else ""
    app_id, attempt = values["spark.app.id"], values["spark.app.attempt.id"]
    return AppContext(
        values["spark.app.name"], settings.static_labels, app_id, attempt, f"{app_id}_{attempt}" if app_id and attempt else app_id
    )


def spark_resource_attributes(spark: Any) -> dict[str, str]:
    """OpenTelemetry resource attributes of the application: ``spark.app.id``, ``spark.app.name``, ``spark.version``.

    Read from the application's conf (the session's under Spark Connect, which answers from the server) and
    ``spark.version``; a value that cannot be read is left out.
    """
    out: dict[str, str] = {}

    def conf() -> Any:  # the application's, as in app_context
        return spark.conf if is_connect(spark) else spark.sparkContext.getConf()

    readers: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("spark.app.id", lambda: conf().get("spark.app.id")),
        ("spark.app.name", lambda: conf().get("spark.app.name")),
        ("spark.version", lambda: spark.version),
    )
    for attribute, read in readers:
        try:
            value = read()
        except Exception as exc:  # an attribute less, never a failed attach
            log.debug("spark-state-observer: no %s: %r", attribute, exc)
            continue
        if value:
            out[attribute] = str(value)
    return out


def _jsc(spark: Any) -> Any:
    if is_connect(spark):
        return None
    try:
        return spark.sparkContext._jsc
    except Exception:  # a session without a JVM on this side
        return None


def _executor_ids(spark: Any) -> Callable[[], set[str]] | None:
    """One JVM call listing executor ids (the driver excluded); None where there is no JVM."""
    jsc = _jsc(spark)
    if jsc is None:
        return None

    def poll() -> set[str]:
        text = jsc.sc().getExecutorIds().mkString(",")
        return {x for x in text.split(",") if x}

    return poll


def _jss(spark: Any) -> Any:
    """The session's JVM side (its streams and their runs), or None under Spark Connect or without a JVM here."""
    try:
        return None if is_connect(spark) else spark._jsparkSession
    except Exception:  # no JVM on this side
        return None


def _checkpoint_location(spark: Any) -> Callable[[str, str | None], str | None] | None:
    """Query id -> the checkpoint root of an active query (one JVM call, on the worker thread); for the
    snapshot state of every store instance (``spark_state_observer.signals.snapshots``). None under Spark Connect."""
    jss = _jss(spark)
    if jss is None:
        return None

    def location(query_id: str, run_id: str | None) -> str | None:
        query = jss.streams().get(query_id)
        return None if query is None else str(query.streamingQuery().resolvedCheckpointRoot())

    return location


def _plan_eviction(spark: Any) -> EvictionLocator | None:
    """Which state operators the watermark evicts by key, from a live run's executed plan (``lastExecution``: one
    JVM call per run, on the worker thread, once its first batch has run), as the event log's plans tell it to
    ``watch`` and ``replay`` (``spark_state_observer.model.plan_eviction``). None under Spark Connect."""
    jss = _jss(spark)
    if jss is None:
        return None
    plans = PlanEviction()

    def evicts(query_id: str, run_id: str | None, operator_index: int, operator_name: str) -> bool | None:
        if run_id is not None and not plans.knows(run_id):
            try:
                query = jss.streams().get(query_id)
                execution = None if query is None else query.streamingQuery().lastExecution()
                if execution is None:
                    return None  # no batch has run yet: asked again at the next
                plans.feed_tree(run_id, str(execution.executedPlan().treeString()))
            except Exception as exc:  # a JVM that cannot tell costs only the plan's view of this run
                log.debug("spark-state-observer: the plan of run %s not read: %r", run_id, exc)
                plans.feed_tree(run_id, "")
        return plans(query_id, run_id, operator_index, operator_name)

    return evicts


def _checkpoint_last_commit(spark: Any) -> Callable[[str, float], float | None] | None:
    """For a query restarted in a new process: when did its previous run last commit a batch?

    Reads the modification time of the newest ``commits/`` file of a local checkpoint (on the worker
    thread, never the callback). Returns None for remote checkpoints or when anything is missing.
    """
    jss = _jss(spark)
    if jss is None:
        return None

    def last_commit(query_id: str, before: float) -> float | None:
        query = jss.streams().get(query_id)
        if query is None:
            return None
        return last_commit_before(str(query.streamingQuery().resolvedCheckpointRoot()), before)

    return last_commit
