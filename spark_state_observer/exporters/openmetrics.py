"""The exposition in OpenMetrics, with each counter's creation time (``_created``), written by prometheus-client.

A watcher that catches up a log inside one scrape interval shows a counter for the first time at its
final value. Prometheus then has no earlier sample, and ``increase()`` reads 0. OpenMetrics carries
when each counter series was created; Prometheus run with
``--enable-feature=created-timestamp-zero-ingestion`` stores a 0 at that time, so the rise is counted.

The text format 0.0.4 stays the default and stays as it was: a client gets OpenMetrics only when it asks
for ``format=openmetrics`` in the URL and accepts it (``choose_encoder``). The OpenMetrics text is
made from the 0.0.4 text, parsed back, with the creation times added: the two agree on every sample.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.exposition import choose_encoder
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

if TYPE_CHECKING:  # the endpoint's server imports this module: it stays free of the metric model
    from spark_state_observer.exporters.exposition import Created


# the query parameter that asks for OpenMetrics (Prometheus: ``params: {format: [openmetrics]}`` in the scrape config)
FORMAT_PARAMETER = "format"
FORMAT_VALUE = "openmetrics"
_PLAIN_CONTENT_TYPE = re.compile(r"[A-Za-z0-9/.=;, _-]{1,200}")


Encoder = Callable[[Collector], bytes]


def negotiated(formats: list[str], accept: str) -> tuple[Encoder, str] | None:
    """prometheus-client's OpenMetrics encoder and content type, when the URL names the format and Accept allows it.

    None otherwise, and for an Accept header prometheus-client cannot read: such a client gets the text format.
    """
    if FORMAT_VALUE not in formats:
        return None
    try:
        encoder, content_type = choose_encoder(accept)
    except (TypeError, ValueError):  # a version it cannot compare (``version=\x7f``): the text format, as to anyone
        return None
    # prometheus-client echoes the asked version into the content type: only plain characters go back
    if not content_type.startswith("application/openmetrics-text") or not _PLAIN_CONTENT_TYPE.fullmatch(content_type):
        return None
    return encoder, content_type


class _Parsed(Collector):
    """The families of a text format 0.0.4 exposition, each query counter sample followed by its ``_created`` sample."""

    def __init__(self, text: bytes, created: Created) -> None:
        self._text, self._created = text, created

    def collect(self) -> Iterator:  # type: ignore[type-arg]  # prometheus-client's Metric
        for metric in text_string_to_metric_families(self._text.decode()):
            if metric.type == "counter":
                samples: list[Sample] = []
                for sample in metric.samples:
                    samples.append(sample)
                    at = self._created.get((sample.name, sample.labels.get("query_id", "")))
                    if at is not None and sample.name.endswith("_total"):
                        samples.append(Sample(sample.name[: -len("_total")] + "_created", sample.labels, at))
                metric.samples = samples
            yield metric


def openmetrics_text(render: Callable[[], bytes], created: Callable[[], Created]) -> Callable[[], Collector]:
    """A collector of ``render()``'s samples for an encoder, counters with the creation times of ``created()``."""
    return lambda: _Parsed(render(), created())
