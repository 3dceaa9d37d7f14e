"""Sinks by name: the one table an observer's sinks are chosen from, as OpenTelemetry's SDK chooses exporters.

Three are built in: ``prometheus`` (a listener's endpoint and Pushgateway), ``history`` (SQLite or PostgreSQL)
and ``otel`` (OTLP). Each entry point names the built-in ones its settings ask for. Any other sink is built for
every observer: the listener's, each watched application's, a replay's and a backtest's. It is registered with
``register_sink``, or declared by an installed package under the ``spark_state_observer.sinks`` entry-point
group (the object named there is a ``SinkBuilder``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points

from spark_state_observer.exporters.http import ExporterError
from spark_state_observer.metrics.view import MetricsView
from spark_state_observer.pipeline.sink import Sink, SinkContext, SinkFactory

log = logging.getLogger("spark_state_observer")
ENTRY_POINT_GROUP = "spark_state_observer.sinks"


@dataclass(frozen=True)
class SinkOptions:
    """What the built-in sinks need beyond the observer's ``SinkContext``."""

    history_path: str | None = None  # the history's database; None: the settings' ``history_path``
    background: bool = False  # the history writes on a thread of its own (the watcher saves positions behind it)
    resource: Mapping[str, str] = field(default_factory=dict)  # OTLP resource attributes beyond the application's


SinkBuilder = Callable[[SinkContext, SinkOptions], Sink]


def _view(context: SinkContext, name: str) -> MetricsView:
    if context.view is None:
        raise ValueError(f"the {name} sink exports one observer's metrics: it cannot be shared")
    return context.view


def _prometheus(context: SinkContext, options: SinkOptions) -> Sink:
    from spark_state_observer.exporters.prometheus import PrometheusSink

    metrics = context.self_metrics
    return PrometheusSink(
        _view(context, "prometheus"),
        context.settings,
        lambda: metrics.count("export_failures", "pushgateway"),
        lambda reason: metrics.count("http_refused", reason),
    )


def _history(context: SinkContext, options: SinkOptions) -> Sink:
    from spark_state_observer.history.sink import HistorySink

    path = options.history_path or context.settings.history_path
    return HistorySink(path, context.self_metrics, context.settings, app=context.identity, background=options.background)


def _otel(context: SinkContext, options: SinkOptions) -> Sink:
    try:
        from spark_state_observer.exporters.otel.sink import OtelSink
    except ImportError as exc:
        raise ExporterError(
            f"OTLP export is configured but OpenTelemetry is not installed ({exc}); pip install 'spark-state-observer[otel]'"
        ) from exc
    metrics = context.self_metrics
    attributes = {**context.identity.attributes(), **options.resource}
    return OtelSink(_view(context, "otel"), context.settings, lambda: metrics.count("export_failures", OtelSink.name), attributes)


BUILT_IN = ("prometheus", "history", "otel")
SINKS: dict[str, SinkBuilder] = {"prometheus": _prometheus, "history": _history, "otel": _otel}


def register_sink(name: str, builder: SinkBuilder) -> None:
    """Build ``builder``'s sink for every observer from now on (a built-in name cannot be taken)."""
    if name in BUILT_IN:
        raise ValueError(f"{name!r} is a built-in sink")
    SINKS[name] = builder


def extra_sinks() -> list[str]:
    """The names of the sinks every observer gets: those registered, then those of the entry-point group."""
    _load_entry_points()
    return [name for name in SINKS if name not in BUILT_IN]


@functools.cache
def _load_entry_points() -> None:
    """Read the entry-point group once per process; a plugin that cannot be loaded is logged and left out."""
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in SINKS:
            continue
        try:
            SINKS[point.name] = point.load()
        except Exception as exc:  # a broken plugin costs its own sink, never the observer
            log.warning("spark-state-observer: sink %r from %s not loaded: %r", point.name, point.value, exc)


def sink_factory(name: str, options: SinkOptions | None = None, wrap: Callable[[Sink], Sink] | None = None) -> SinkFactory:
    """The factory of the sink named ``name`` (``wrap`` wraps what it builds); ``ValueError`` for an unknown name."""
    builder = SINKS.get(name)
    if builder is None:
        raise ValueError(f"no sink named {name!r}; known: {', '.join(sorted(SINKS))}")
    opts = options or SinkOptions()

    def build(context: SinkContext) -> Sink:
        sink = builder(context, opts)
        return wrap(sink) if wrap is not None else sink

    return build
