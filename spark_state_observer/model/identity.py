"""Which Spark application an event, a series or a signal belongs to, for the listener and the watcher alike.

A fleet is observed through one Prometheus and one set of dashboards, so every series needs the
application's *stable* identity: ``app`` (the Spark application name, ``spark.app.name``) plus static
labels the operator configures once (the ``labels`` setting, e.g. ``cluster=a,namespace=b``). The
volatile identity (application id, attempt, event-log name) changes with every run; it goes on one info
series only (``spark_streaming_application_info``), never on every series, so a restarted job keeps its
series. The listener reads the name from its session's configuration, the watcher from the log's
``SparkListenerApplicationStart``: the same job gets the same labels either way.

A leaf module (the standard library and ``spark_state_observer.model.bounded``): the settings, the model, the metrics
and the sinks read it.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from spark_state_observer.model.bounded import clean_label

Pairs = tuple[tuple[str, str], ...]
"""Label pairs in the order they are written (``spark_state_observer.metrics.updates.Labels`` is the same shape)."""

APP_LABEL = "app"
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# the labels an application's identity writes itself (the info series'); every other label a series
# carries is the metric catalog's (``spark_state_observer.metrics.catalog.RESERVED_LABELS``, which the settings check)
IDENTITY_LABELS = frozenset({APP_LABEL, "app_id", "attempt", "log_name"})
MAX_STATIC_LABELS = 10
# a static label's value is cleaned and bounded like every label value taken from an event (``spark_state_observer.model.parse``)
MAX_LABEL_VALUE = 200


class LabelsError(ValueError):
    """A ``labels`` setting that cannot be used; the message says which part and why."""


def parse_labels(text: str, reserved: Collection[str] = IDENTITY_LABELS) -> Pairs:
    """``"cluster=a,namespace=b"`` as label pairs, in the order given.

    Names must be Prometheus label names and not in ``reserved``, the labels the observer writes itself
    (a static label of that name would be overwritten by the series' own, or overwrite it); values may
    be any text but a comma, cleaned as event strings are (``bounded.clean_label``: no lone surrogates
    or control characters, at most ``MAX_LABEL_VALUE`` characters). Empty text means no static labels.
    """
    pairs: list[tuple[str, str]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise LabelsError(f"labels: {clean_label(part, 80)!r} is not name=value")
        if not LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise LabelsError(f"labels: {clean_label(name, 80)!r} is not a Prometheus label name")
        if name in reserved:
            raise LabelsError(f"labels: {name!r} is a label the observer writes itself; choose another name")
        if any(name == n for n, _ in pairs):
            raise LabelsError(f"labels: {name!r} is given twice")
        pairs.append((name, clean_label(value, MAX_LABEL_VALUE)))
    if len(pairs) > MAX_STATIC_LABELS:
        raise LabelsError(f"labels: at most {MAX_STATIC_LABELS} static labels, got {len(pairs)}")
    return tuple(pairs)


@dataclass(frozen=True)
class AppContext:
    """One application's identity as the pipeline carries it: stable labels, and the volatile ids for the info series."""

    name: str = ""  # the ``app`` label: spark.app.name ("" when unknown: no app label then)
    static: Pairs = ()  # the configured static labels
    app_id: str = ""
    attempt_id: str = ""
    log_name: str = ""  # the event log's name (watcher only)

    @property
    def labels(self) -> Pairs:
        """What every series of this application carries: the static labels, then ``app``."""
        return self.static + ((APP_LABEL, self.name),) if self.name else self.static

    @property
    def info_labels(self) -> Pairs:
        """The info series' labels: the stable ones plus the application id, attempt and log name."""
        return self.labels + (("app_id", self.app_id), ("attempt", self.attempt_id), ("log_name", self.log_name))

    @property
    def known(self) -> bool:
        """Whether there is anything to say about the application (an info series is worth writing)."""
        return bool(self.name or self.app_id or self.log_name)

    def attributes(self) -> dict[str, Any]:
        """OpenTelemetry resource attributes: ``spark.app.name``, ``spark.app.id``, ``spark.app.attempt.id``,
        ``spark.eventlog.name`` where known, and each static label under its own name."""
        out: dict[str, Any] = dict(self.static)
        for key, value in (
            ("spark.app.name", self.name),
            ("spark.app.id", self.app_id),
            ("spark.app.attempt.id", self.attempt_id),
            ("spark.eventlog.name", self.log_name),
        ):
            if value:
                out[key] = value
        return out
