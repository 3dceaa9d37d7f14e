"""What a metric spec is: ``MetricSpec``, the kinds and scopes, and the constructors the metric families use.

Kept apart from ``spark_state_observer.metrics.catalog`` so that the family modules (``spark_state_observer.metrics.families``), where the
specs are written, and the catalog, which assembles and checks them, share one definition.
"""

from __future__ import annotations

from dataclasses import dataclass

GAUGE = "gauge"
COUNTER = "counter"
CUMULATIVE_PER_RUN = "cumulative_per_run"
HISTOGRAM = "histogram"

MS = 0.001

# the labels every series of a scope carries, before the spec's own
SCOPE_LABELS: dict[str, tuple[str, ...]] = {
    "query": ("query", "query_id"),
    "sink": ("query", "query_id"),
    "source": ("query", "query_id", "source_index", "source"),
    "operator": ("query", "query_id", "operator_index", "operator"),
    "instance": ("query", "query_id", "operator_index", "operator", "partition", "store"),
    "app": (),
    "observer": (),
}


@dataclass(frozen=True, eq=False)  # identity equality: specs are singletons, and hashing them is on the hot path
class MetricSpec:
    """One exported metric: where its value comes from and how it is named, typed and labelled."""

    key: str  # field of the progress JSON, or custom metric name, or "" for derived metrics
    name: str  # Prometheus name without the "_total" suffix a counter gets
    kind: str  # GAUGE, COUNTER, CUMULATIVE_PER_RUN or HISTOGRAM
    unit: str  # base unit: seconds, bytes, rows, files, ... ("" for a plain number)
    help: str
    scope: str  # a key of SCOPE_LABELS: query, operator, source, sink, instance, app, observer
    source: str = "common"  # common, rocksdb, hdfs, dedup, join, transformWithState, signal, observer
    since: str = "3.5"
    scale: float = 1.0  # multiply Spark's value by this to get the base unit
    labels: tuple[str, ...] = ()  # labels beyond the scope's

    @property
    def prometheus_name(self) -> str:
        return self.name + "_total" if self.kind == COUNTER else self.name

    @property
    def prometheus_type(self) -> str:
        return {COUNTER: "counter", HISTOGRAM: "histogram"}.get(self.kind, "gauge")

    @property
    def label_names(self) -> tuple[str, ...]:
        """Every label of the metric's series: the scope's, then its own."""
        return SCOPE_LABELS[self.scope] + self.labels

    @property
    def carries_app(self) -> bool:
        """Whether the series also carry the application's identity (``APP_LABEL`` after the static labels).

        The exporter puts ``AppContext.labels`` before every series of an application, listener, watcher
        and replay alike; only the observer's own series (scope ``observer``) leave ``app`` out, since one
        watcher serves many applications. ``label_names`` lists the labels beyond that identity.
        """
        return self.scope != "observer"


def gauge(
    key: str,
    name: str,
    unit: str,
    help: str,
    scope: str = "operator",
    source: str = "common",
    since: str = "3.5",
    scale: float = 1.0,
    labels: tuple[str, ...] = (),
) -> MetricSpec:
    """A gauge spec: most specs are one, so the families write them without the kind."""
    return MetricSpec(key, name, GAUGE, unit, help, scope, source, since, scale, labels)


def counter(
    key: str,
    name: str,
    unit: str,
    help: str,
    scope: str = "operator",
    source: str = "common",
    since: str = "3.5",
    scale: float = 1.0,
    labels: tuple[str, ...] = (),
) -> MetricSpec:
    """A counter spec (a per-batch amount added to a ``_total`` counter)."""
    return MetricSpec(key, name, COUNTER, unit, help, scope, source, since, scale, labels)


def signal_metric(
    name: str, kind: str, unit: str, help: str, scope: str = "operator", labels: tuple[str, ...] = (), since: str = "3.5"
) -> MetricSpec:
    """A spec derived by ``spark_state_observer.signals`` (no Spark key, source ``signal``); the capacity family uses it too.
    ``since``: the Spark version whose progress first carries what it is derived from."""
    return MetricSpec("", name, kind, unit, help, scope, "signal", since=since, labels=labels)
