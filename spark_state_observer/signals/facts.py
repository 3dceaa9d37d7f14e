"""What an event (or a tick of the clock) implies: the signals, in order, and the metric values.

Every signal module writes into a ``SignalFacts`` and nothing else: it neither touches the tracker nor calls
anyone. The runtime then applies ``updates`` to the tracker and hands ``signals`` to the bus and the
sinks, after the event that caused them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.metrics.tracker import QueryRecord
from spark_state_observer.metrics.updates import Labels, Update
from spark_state_observer.model.signal_kinds import SignalEvent

_update = tuple.__new__  # ``Update(...)`` without its generated ``__new__``: ~15 per event on the worker's hot path


@dataclass
class SignalFacts:
    signals: list[SignalEvent] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)
    problems: int = 0  # what the event had wrong that the rules worked around (the runtime counts them)

    def signal(self, kind: str, record: QueryRecord, run_id: str | None, ts: float, **attributes: Any) -> None:
        """A signal about ``record``'s query."""
        self.signals.append(SignalEvent(kind, record.query_id, record.label, run_id, ts, attributes))

    def set(self, record: QueryRecord, spec: MetricSpec, labels: Labels, value: float | None) -> None:
        """A gauge of the query (``None`` removes it)."""
        self.updates.append(_update(Update, (spec, labels, value, record.query_id)))

    def set_many(self, record: QueryRecord, labels: Labels, values: tuple[tuple[MetricSpec, float | None], ...]) -> None:
        """Several gauges of one series' labels, in order: ``set`` for each, in one call (a rule sets ~5 per operator and batch)."""
        query_id = record.query_id
        self.updates.extend([_update(Update, (spec, labels, value, query_id)) for spec, value in values])

    def add(self, record: QueryRecord, spec: MetricSpec, labels: Labels, amount: float = 1.0) -> None:
        """Add to a counter of the query; 0 creates it."""
        self.updates.append(_update(Update, (spec, labels, amount, record.query_id)))

    def app(self, spec: MetricSpec, labels: Labels, value: float) -> None:
        """An application-wide value: a gauge is set, a counter added to."""
        self.updates.append(Update(spec, labels, value, None))
