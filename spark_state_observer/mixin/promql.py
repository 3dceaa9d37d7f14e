"""PromQL building blocks shared by the rules and the dashboards, bound to one ``MixinConfig``.

Every metric goes through ``metric()``, which takes the catalog's spec objects (``spark_state_observer.metrics.catalog``),
never a name written out: a renamed metric changes every rule and panel with it, and a spec built outside
the catalog fails generation and the tests, not a pager at night or a panel. Histogram series (``_bucket``)
and recording-rule names are derived from the spec too (``bucket``, ``recorded``). Every selector carries the
configured matchers, and every aggregation keeps the identity labels, so an alert and the panel that
explains it see the same series.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_state_observer.metrics.catalog import (
    BATCHES,
    CATALOG,
    HISTOGRAM,
    OPERATOR_INFO,
    QUERY_STATUS,
    MetricSpec,
    UnknownMetricError,
    check,
)
from spark_state_observer.mixin.config import MixinConfig, parse_matchers, quote

SPECS = {s.prometheus_name: s for s in CATALOG}
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")
RATE = "$__rate_interval"


@dataclass(frozen=True)
class Series:
    """One series family of a histogram spec: the spec plus ``_bucket``, ``_count`` or ``_sum``."""

    spec: MetricSpec
    suffix: str

    def __post_init__(self) -> None:
        if self.spec.kind != HISTOGRAM or self.suffix not in HISTOGRAM_SUFFIXES:
            raise ValueError(f"{self.spec.prometheus_name}{self.suffix}: only histograms have {', '.join(HISTOGRAM_SUFFIXES)} series")


Metric = MetricSpec | Series  # what selectors take


def bucket(spec: MetricSpec) -> Series:
    """The ``_bucket`` series of a histogram spec, for ``histogram_quantile``."""
    return Series(spec, "_bucket")


def metric(what: Metric | str) -> str:
    """The exported name of a catalog spec or histogram series; a name string is checked against the catalog.

    ``UnknownMetricError`` (a ``KeyError``) for a spec built outside the catalog or a name it does not export.
    """
    if isinstance(what, Series):
        return check(what.spec).prometheus_name + what.suffix
    if isinstance(what, MetricSpec):
        return check(what).prometheus_name
    base = next((what[: -len(s)] for s in HISTOGRAM_SUFFIXES if what.endswith(s) and what[: -len(s)] in SPECS), what)
    if base not in SPECS:
        raise UnknownMetricError(f"{what} is not a metric of spark_state_observer.metrics.catalog")
    return what


def recorded(level: str, spec: MetricSpec, what: str, name: str | None = None) -> str:
    """A recording rule's name, ``level:metric:operations`` (Prometheus' convention), from a catalog spec.

    ``name`` replaces the spec's base name for a quantity derived from it (a ratio of two counters).
    """
    return f"{level}:{name or check(spec).name}:{what}"


def number(value: float) -> str:
    """A threshold as PromQL and prose write it (``7200``, ``1.1``, ``6.87195e+09``)."""
    return f"{value:g}"


class PromQL:
    """Selectors and groupings for one configuration; ``dashboard`` adds the template variables' matchers."""

    def __init__(self, config: MixinConfig, dashboard: bool = False) -> None:
        self.config = config
        self.identity = ", ".join(config.identity_labels)
        self.query = f"{self.identity}, query, query_id"
        self.operator = f"{self.query}, operator_index, operator"
        base = [config.selector.strip()] if config.selector.strip() else []
        # the observer's own series carry no app label: a selector matcher on it would hide them
        no_app = [
            f"{label}{op}{quote(value)}" for label, op, value in parse_matchers(config.selector, "selector") if label != config.app_label
        ]
        static = [f'{label}=~"${label}"' for label in config.static_labels] if dashboard else []
        app = [f'{config.app_label}=~"${config.app_label}"'] if dashboard else []
        query = ['query=~"$query"'] if dashboard else []
        self.endpoint = ", ".join(no_app + static)  # matchers of the observer's own series
        self.app = ", ".join(base + static + app)  # of application-level series
        self.q = ", ".join(base + static + app + query)  # of query-level series
        self.qo = ", ".join([*base, *static, *app, *query, 'operator=~"$operator"']) if dashboard else self.q  # of operator-level series

    def by(self, labels: str) -> str:
        """``labels`` prefixed with the identity labels, for ``by (...)`` and ``on (...)``.

        A grouping by ``query`` also keeps ``query_id``: a query is its id, its name only labels it. Two
        applications with the same name may run queries of the same name with different checkpoints (a job
        redeployed with a new checkpoint while the old run is within the watcher's grace period); summed by
        name, the ended run's last gauges added to the new run's values.
        """
        names = [name.strip() for name in labels.split(",") if name.strip()]
        if "query" in names and "query_id" not in names:
            names.insert(names.index("query") + 1, "query_id")
        return ", ".join([self.identity, *names])

    def running(self, expr: str) -> str:
        """``expr`` only for queries whose current status is active or idle.

        A query that terminated or failed keeps its last gauges (its last batch's rates) until the
        observer forgets it; on a pace panel they would read as a query still processing rows.
        """
        status = self.sel(QUERY_STATUS, extra='status=~"active|idle"')
        return f"({expr}) and on ({self.query}) ({status} == 1)"

    def how_many(self, name: Metric, extra: str = "") -> str:
        """The number of queries for which the 0/1 gauge ``name`` is 1, and 0 when none is.

        Each query counts once however many endpoints export it (``max by`` its identity), and a fleet
        where no query is in that state reads 0, not "No data": some signals are only exported while set.
        """
        return f"sum(max by ({self.query}) ({self.sel(name, extra=extra)})) or vector(0)"

    def sel(self, name: Metric, matchers: str | None = None, extra: str = "") -> str:
        """``name{matchers, extra}``; ``matchers`` defaults to the query-level matchers."""
        parts = [p for p in ((self.q if matchers is None else matchers), extra) if p]
        return f"{metric(name)}{{{', '.join(parts)}}}" if parts else metric(name)

    def rate(self, name: Metric, by: str, matchers: str | None = None, window: str = RATE) -> str:
        return f"sum by ({by}) (rate({self.sel(name, matchers)}[{window}]))"

    def per_batch(self, name: MetricSpec, by: str | None = None, matchers: str | None = None) -> str:
        """Mean amount per micro-batch: the counter's rate over the batches' rate of the same query."""
        by = self.operator if by is None else by
        matchers = self.qo if matchers is None else matchers
        batches = self.rate(BATCHES, self.query)
        return f"{self.rate(name, by, matchers)} / on ({self.query}) group_left {batches}"

    def or_zero(self, expr: str, by: str | None = None, matchers: str | None = None) -> str:
        """``expr``, or 0 for every operator where it is absent.

        The observer adds a per-batch counter only once Spark reports a non-zero amount, so an absent
        series means "none yet"; showing 0 tells the reader the metric is fine rather than missing.
        """
        by = self.operator if by is None else by
        matchers = self.qo if matchers is None else matchers
        return f"({expr}) or (sum by ({by}) ({self.sel(OPERATOR_INFO, matchers)}) * 0)"
