"""PromQL building blocks for the dashboards; every metric name is checked against the catalog.

Going through ``metric()`` means a renamed or removed metric fails ``python -m dashboards.generate``
(and the staleness test) instead of leaving an empty panel in somebody's Grafana.
"""

from __future__ import annotations

from observer.metrics.catalog import BY_NAME, UnknownMetricError

HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")

Q = 'query=~"$query"'
QO = 'query=~"$query", operator=~"$operator"'
QUERY = "query, query_id"
OPERATOR = "query, query_id, operator_index, operator"
RATE = "$__rate_interval"


def metric(name: str) -> str:
    """The name itself, or ``UnknownMetricError`` (a KeyError) when the catalog does not export it."""
    base = next((name[: -len(s)] for s in HISTOGRAM_SUFFIXES if name.endswith(s) and name[: -len(s)] in BY_NAME), name)
    if base not in BY_NAME:
        raise UnknownMetricError(f"{name} is not a metric of observer.metrics.catalog")
    return name


def sel(name: str, matchers: str = Q) -> str:
    return f"{metric(name)}{{{matchers}}}" if matchers else metric(name)


def rate(name: str, by: str, matchers: str = Q) -> str:
    return f"sum by ({by}) (rate({sel(name, matchers)}[{RATE}]))"


def per_batch(name: str, by: str = OPERATOR, matchers: str = QO) -> str:
    """Mean amount per micro-batch: the counter's rate over the batches' rate of the same query."""
    batches = rate("spark_streaming_batches_total", QUERY)
    return f"{rate(name, by, matchers)} / on (query, query_id) group_left {batches}"


def or_zero(expr: str, by: str = OPERATOR, matchers: str = QO) -> str:
    """``expr``, or 0 for every operator where it is absent.

    The observer adds a per-batch counter only once Spark reports a non-zero amount, so an absent
    series means "none yet"; showing 0 tells the reader the metric is fine rather than missing.
    """
    return f"({expr}) or (sum by ({by}) ({sel('spark_state_operator_info', matchers)}) * 0)"
