"""Alerting rules evaluated as Prometheus' rule manager does: pending from the first evaluation that returns
a series, firing once pending for the rule's ``for``, resolved at the first evaluation without it."""

from __future__ import annotations

import json
from typing import Any

from spark_state_observer.mixin.prometheus_text import render_template
from spark_state_observer.offline.backtest.report import Firing
from spark_state_observer.offline.backtest.rules import AlertRule
from spark_state_observer.offline.prometheus_server import PrometheusServer

QUERY_POINTS = 10_000


def _labels_of(metric: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in metric.items() if k != "__name__"}


def evaluate_alert(rule: AlertRule, matrix: list[dict[str, Any]], steps: list[float]) -> list[Firing]:
    """Pending/firing/resolved periods of ``rule`` from its expression's values at each evaluation step."""
    firings: list[Firing] = []
    for series in matrix:
        labels = _labels_of(series.get("metric", {}))
        active = {round(float(t), 3): float(v) for t, v in series.get("values", [])}
        current: Firing | None = None
        for t in steps:
            value = active.get(round(t, 3))
            if value is not None:
                if current is None:
                    all_labels = {**labels, **rule.labels}
                    current = Firing(
                        rule.name,
                        all_labels,
                        rule.labels.get("severity", ""),
                        render_template(rule.annotations.get("summary", ""), all_labels, value),
                        rule.annotations.get("runbook_url", ""),
                        pending_at=t,
                        firing_at=None,
                        resolved_at=None,
                    )
                    firings.append(current)
                current.value = value
                if current.firing_at is None and t - current.pending_at >= rule.for_seconds:
                    current.firing_at = t
            elif current is not None:
                current.resolved_at = t
                current = None
    return firings


def steps_between(start: float, end: float, step: float) -> list[float]:
    count = int((end - start) // step) + 1
    return [start + i * step for i in range(max(count, 1))]


def query_steps(server: PrometheusServer, expr: str, steps: list[float], step: float) -> list[dict[str, Any]]:
    """``query_range`` over ``steps`` in chunks Prometheus accepts, the values of each series merged."""
    merged: dict[str, dict[str, Any]] = {}
    for i in range(0, len(steps), QUERY_POINTS):
        chunk = steps[i : i + QUERY_POINTS]
        for series in server.query_range(expr, chunk[0], chunk[-1], step):
            key = json.dumps(series.get("metric", {}), sort_keys=True)
            merged.setdefault(key, {"metric": series.get("metric", {}), "values": []})["values"].extend(series.get("values", []))
    return list(merged.values())
