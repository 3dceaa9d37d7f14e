"""OpenTelemetry names, units and instruments derived from the catalog's ``MetricSpec``s.

There is no second list of names: each OpenTelemetry name is computed from the Prometheus one by the
OpenTelemetry conventions (https://opentelemetry.io/docs/specs/semconv/general/metrics/):

- dots separate the name's components: ``spark_state_rows_updated`` -> ``spark.state.rows.updated``;
- the unit moves to the unit field (UCUM): seconds -> ``s``, bytes -> ``By``, rows -> ``{row}``,
  files -> ``{file}``, a plain number or ratio -> ``1``; rates get ``/s``;
- a unit word inside a name that is not its unit names the quantity: ``seconds`` -> ``time``,
  ``bytes`` -> ``size`` (``spark_state_partition_bytes_skew_ratio`` -> ``spark.state.partition.size.skew.ratio``);
- time spent (a counter in seconds) is a ``.duration``: ``spark_state_rocksdb_commit_flush_seconds_total``
  -> ``spark.state.rocksdb.commit.flush.duration``; a point in time keeps ``.timestamp``;
- a gauge that would share its name with the counter summing the same figure per batch (the latest
  batch's duration, the latest phase durations) gets ``.last``;
- counters are monotonic cumulative sums (observable counters), gauges and per-run cumulative values
  are observable gauges; histograms stay Prometheus-only (the OpenTelemetry API has no observable
  histogram).

Labels become attributes in the ``spark.`` namespace (``query`` -> ``spark.query.name``).
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import MetricSpec

COUNTER = "counter"
GAUGE = "gauge"

_UNITS = {"seconds": "s", "bytes": "By", "rows": "{row}", "records": "{record}", "files": "{file}", "ratio": "1", "": "1"}
_UNIT_WORDS = {"seconds": "s", "bytes": "By"}  # dropped from the name; row and file counts keep their noun
_ATTRIBUTES = {
    "query": "spark.query.name",
    "query_id": "spark.query.id",
    "run_id": "spark.query.run_id",
    "status": "spark.query.status",
    "operator": "spark.operator.name",
    "operator_index": "spark.operator.index",
    "source": "spark.source.name",
    "source_index": "spark.source.index",
    "partition": "spark.state.partition",
    "store": "spark.state.store",
    "provider": "spark.state.provider",
    "phase": "spark.batch.phase",
    "batch_id": "spark.batch.id",
    "executor_id": "spark.executor.id",
    "message": "exception.message",
    # the application's identity (spark_state_observer.model.identity), named as its resource attributes are
    "app": "spark.app.name",
    "app_id": "spark.app.id",
    "attempt": "spark.app.attempt.id",
    "log_name": "spark.eventlog.name",
}


@dataclass(frozen=True)
class OtelMetric:
    """How one catalog metric is exported over OTLP."""

    name: str
    unit: str
    instrument: str  # COUNTER (observable counter) or GAUGE (observable gauge)
    description: str
    spec: MetricSpec

    @property
    def prometheus_name(self) -> str:
        return self.spec.prometheus_name


def _base_name(spec: MetricSpec) -> str:
    words = spec.name.split("_")
    if words[-2:] == ["per", "second"]:
        words = words[:-2] + ["rate"]
    elif "seconds" in words and words[-1] != "seconds":  # e.g. seconds_since_progress
        words[words.index("seconds")] = "time"
    elif "bytes" in words and words[-1] != "bytes":  # e.g. partition_bytes_skew_ratio: a ratio of sizes
        words[words.index("bytes")] = "size"
    elif words[-1] in _UNIT_WORDS:
        words = words[:-1]
        if spec.unit == "seconds" and spec.kind == catalog.COUNTER and words[-1] != "duration":
            words.append("duration")
    return ".".join(words)


def _unit(spec: MetricSpec, name: str) -> str:
    unit = _UNITS.get(spec.unit, "1")
    return unit + "/s" if name.endswith(".rate") else unit


def _build(specs: tuple[MetricSpec, ...]) -> dict[str, OtelMetric]:
    out: dict[str, OtelMetric] = {}
    counters = {_base_name(s) for s in specs if s.kind == catalog.COUNTER}
    for spec in specs:
        if spec.kind == catalog.HISTOGRAM or spec.prometheus_name in out:
            continue
        name = _base_name(spec)
        instrument = COUNTER if spec.kind == catalog.COUNTER else GAUGE
        if instrument == GAUGE and name in counters:
            name += ".last"
        out[spec.prometheus_name] = OtelMetric(name, _unit(spec, name), instrument, spec.help, spec)
    return out


METRICS: dict[str, OtelMetric] = _build(catalog.CATALOG)
"""Every exported metric but the histograms, by its Prometheus name."""


def otel_metric(spec: MetricSpec) -> OtelMetric:
    """The OpenTelemetry name, unit and instrument of a catalog spec."""
    return METRICS[spec.prometheus_name]


def attribute_name(label: str) -> str:
    """The OpenTelemetry attribute for a Prometheus label: namespaced under ``spark.``."""
    return _ATTRIBUTES.get(label) or "spark." + label


def attributes(labels: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Prometheus labels as OpenTelemetry attributes."""
    return {attribute_name(k): v for k, v in labels}
