"""Prometheus text format 0.0.4 written directly, each query's lines cached until the query changes.

prometheus-client's ``generate_latest`` formats every sample at every scrape (label-name validation,
sorting, escaping, float formatting): about 1 s for 100 queries x 4 operators. Here a query's samples
are formatted once per record version (``QueryRecord.version``), grouped by metric family, and a
rendering joins the cached lines family by family (``join_parts``), re-rendering only the queries that
changed since the last one. The endpoint serves such renderings through ``spark_state_observer.exporters.latest``.

The text is what ``generate_latest`` prints for the same families: families in order of first
appearance, ``# HELP``/``# TYPE`` once per family (counters as ``<name>_total``), then its samples in
order, label names sorted, label values escaped, values through ``floatToGoString``. Both paths group
samples with ``Families`` and name and type them with ``family()``, so they agree on which series exist;
tests/unit/test_exposition.py checks that the two texts parse to the same samples.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache, partial
from typing import Callable, Iterable, Iterator, cast

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import UNDERSCORES, escape_label_name, escape_metric_name
from prometheus_client.utils import floatToGoString

from spark_state_observer.exporters.samples import SampleSink, labelled, render_progress, render_signal_gauges, render_totals
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import COUNTER, MetricSpec
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.metrics.view import MetricsView

Samples = list[tuple[Labels, float]]
# prometheus-client's value formatting (unannotated), memoized: most values recur (zeros, counts, sizes),
# and formatting was a third of rendering a fleet's changed queries (bench/render_scale.py --fleet)
_go_float = cast(Callable[[float], str], lru_cache(maxsize=4096)(floatToGoString))  # bounded: ~0.7 MB at most
# one query's rendered samples: (family spec, its sample lines), families in order of first appearance
QueryLines = list[tuple[MetricSpec, bytes]]
# (a counter's sample name, a query id) -> when the query first rendered that counter (Unix seconds)
Created = dict[tuple[str, str], float]


@dataclass(frozen=True)
class Family:
    """How one metric family is exposed."""

    name: str  # the catalog's Prometheus name, in # HELP, # TYPE and every sample line: counters end in _total
    type: str  # counter or gauge
    help: str

    @cached_property
    def escaped_name(self) -> str:
        """The name as sample lines write it (escaped once per family, not once per query rendered)."""
        return escape_metric_name(self.name, UNDERSCORES)

    @property
    def header(self) -> bytes:
        """The family's ``# HELP`` and ``# TYPE`` lines, escaped as ``generate_latest`` does."""
        name = escape_metric_name(self.name, UNDERSCORES)
        doc = self.help.replace("\\", r"\\").replace("\n", r"\n")
        return f"# HELP {name} {doc}\n# TYPE {name} {self.type}\n".encode()

    def metric(self, samples: Samples) -> Metric:
        """The family as a prometheus-client metric, for registry users (``generate_latest``, the WSGI fallback).

        Each sample keeps its own label names, exactly as ``lines`` writes them.
        """
        cls = CounterMetricFamily if self.type == "counter" else GaugeMetricFamily
        metric = cls(self.name, self.help)
        for labels, value in samples:
            metric.add_sample(self.name, dict(labels), value)
        return metric

    def lines(self, samples: Samples, labels_text: dict[Labels, str]) -> bytes:
        """The family's sample lines in text format 0.0.4; ``labels_text`` memoizes each label set's ``{...}``."""
        name = self.escaped_name
        out = []
        for labels, value in samples:
            if labels:
                text = labels_text.get(labels)
                if text is None:
                    text = labels_text[labels] = _labels_text(labels)
                out.append(f"{name}{text} {_go_float(value)}\n")
            else:
                out.append(f"{name} {_go_float(value)}\n")
        return "".join(out).encode()


def _labels_text(labels: Labels) -> str:
    """``{name="value",...}``, names sorted; a repeated label name keeps its last value, as in prometheus-client."""
    return "{" + ",".join(f'{_label_name(n)}="{_label_value(v)}"' for n, v in sorted(dict(labels).items())) + "}"


@lru_cache(maxsize=1024)  # one entry per spec of the catalog
def family(spec: MetricSpec) -> Family:
    """How the samples of ``spec`` are exposed; a spec that is not the catalog's is an ``UnknownMetricError``."""
    catalog.check(spec)
    return Family(spec.prometheus_name, "counter" if spec.kind == COUNTER else "gauge", spec.help)


@lru_cache(maxsize=256)  # label names come from the code, a few dozen
def _label_name(name: str) -> str:
    return escape_label_name(name, UNDERSCORES)


def _label_value(value: str) -> str:
    """Escaped as prometheus-client escapes label values (backslash, newline, double quote)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class Families:
    """A ``SampleSink`` that groups samples by family, families in order of first appearance."""

    def __init__(self) -> None:
        self.samples: dict[MetricSpec, Samples] = {}

    def add(self, spec: MetricSpec, labels: Labels, value: float) -> None:
        group = self.samples.get(spec)
        if group is None:
            group = self.samples[spec] = []
        group.append((labels, value))

    def lines(self) -> QueryLines:
        """Each family's sample lines. A query's label sets recur on most of its lines: each is written once."""
        labels_text: dict[Labels, str] = {}
        return [(spec, family(spec).lines(samples, labels_text)) for spec, samples in self.samples.items()]

    def counter_names(self) -> Iterator[str]:
        """The sample names of the counters it holds."""
        return (family(spec).name for spec in self.samples if spec.kind == COUNTER)


@dataclass(frozen=True)
class _Entry:
    """One query's lines in ``render_query``'s three parts, and the record versions they show."""

    version: int
    state_version: int
    totals: QueryLines
    gauges: QueryLines
    progress: QueryLines
    created: dict[str, float]  # its counters by sample name, each with when the query first rendered it


def _families(render: Callable[[SampleSink], None], prefix: Labels = ()) -> Families:
    families = Families()
    render(labelled(families, prefix))
    return families


def _lines(render: Callable[[SampleSink], None], prefix: Labels = ()) -> QueryLines:
    return _families(render, prefix).lines()


def _created(before: dict[str, float], rendered: Iterable[Families], now: float) -> dict[str, float]:
    """The counters of ``rendered``, each with its time in ``before`` or, new, ``now``."""
    return {name: before.get(name, now) for families in rendered for name in families.counter_names()}


class QueryLinesCache:
    """Each tracked query's rendered lines, as of the record version they were rendered from.

    Holds at most one entry per query the tracker keeps; a forgotten query's entry goes at the next
    ``refresh``. Only records whose version changed are copied out of the tracker and re-rendered, and
    of those whose ``state_version`` did not change (the tick rewrote a signal gauge) only the gauges.

    Each entry also remembers when each of its counters was first rendered: the creation time of the
    counter's series of that query in OpenMetrics (``_created``). One time per counter and query, not per
    label set: a fleet's cache would otherwise grow by about a third. The worker renders right after each round of events
    (``StateCollector.prerender``), so a counter born at its final value between two scrapes gets a
    creation time before the scrape that first shows it, and Prometheus can count its rise from zero.
    """

    def __init__(self, top_k: int) -> None:
        self._top_k = top_k
        self._lock = threading.Lock()  # concurrent scrapes take turns refreshing
        self._entries: dict[str, _Entry] = {}

    def refresh(self, view: MetricsView) -> list[QueryLines]:
        """Every tracked query's lines, in the tracker's order."""
        return [lines for _, lines in self.refresh_keyed(view)]

    def refresh_keyed(self, view: MetricsView) -> list[tuple[str, QueryLines]]:
        """Every tracked query's id and lines, in the tracker's order."""
        with self._lock:
            order, changed = view.changed_since({qid: e.version for qid, e in self._entries.items()})
            prefix = view.identity.labels
            entries: dict[str, _Entry] = {}
            for qid, _ in order:
                entry, record = self._entries.get(qid), changed.get(qid)
                if record is None:
                    assert entry is not None  # unchanged means rendered before
                elif entry is not None and entry.state_version == record.state_version:
                    entry = replace(entry, version=record.version, gauges=_lines(partial(render_signal_gauges, record=record), prefix))
                else:
                    totals = _families(partial(render_totals, record=record), prefix)
                    gauges = _families(partial(render_signal_gauges, record=record), prefix)
                    progress = _families(partial(render_progress, record=record, top_k=self._top_k), prefix)
                    before = entry.created if entry is not None else {}
                    entry = _Entry(
                        record.version,
                        record.state_version,
                        totals.lines(),
                        gauges.lines(),
                        progress.lines(),
                        _created(before, (totals, progress), time.time()),
                    )
                entries[qid] = entry
            self._entries = entries
            return [(qid, e.totals + e.gauges + e.progress) for qid, e in entries.items()]

    def created(self) -> Created:
        """When each query rendered so far first rendered each of its counters (as of the last ``refresh``)."""
        with self._lock:
            return {(name, qid): at for qid, entry in self._entries.items() for name, at in entry.created.items()}


def join_parts(queries: Iterable[QueryLines], rest: QueryLines) -> Iterator[bytes]:
    """The exposition of the queries' lines followed by ``rest``, one family at a time: each family's header
    once, then its lines, families in order of first appearance; the text is their concatenation.

    The endpoint compresses the parts as they come: a fleet's 48 MB text is never held whole.
    """
    by_family: dict[MetricSpec, list[bytes]] = {}
    for lines in (*queries, rest):
        for spec, text in lines:
            parts = by_family.get(spec)
            if parts is None:
                parts = by_family[spec] = [family(spec).header]
            parts.append(text)
    for parts in by_family.values():
        yield b"".join(parts)
