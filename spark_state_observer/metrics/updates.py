"""Metric values derived from events (by the signals), as data: the tracker applies them.

The signals decide *what* an event implies (a restore happened: one more restore, this long); the
tracker owns *where* the value lives. An update names its metric by catalog spec, never by string: a
counter's value is added (0 creates it, so ``increase()`` sees its first real increment), a gauge's is
set (``None`` removes it).
"""

from __future__ import annotations

from typing import NamedTuple

from spark_state_observer.metrics.catalog import MetricSpec

Labels = tuple[tuple[str, str], ...]
"""A series' labels beyond the query's own, as ``(name, value)`` pairs in the order they are written."""


class Update(NamedTuple):  # a tuple: a busy job derives a dozen per batch, on the worker's hot path
    """One derived value: ``query_id`` None means application-wide (executors)."""

    spec: MetricSpec
    labels: Labels
    value: float | None
    query_id: str | None = None
