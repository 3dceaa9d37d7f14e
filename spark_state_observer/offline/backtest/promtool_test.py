"""A ``promtool test rules`` file written from a backtest's own series and findings: promtool passing it
means Prometheus' rule unit tests and the backtest agree on when each alert fired."""

from __future__ import annotations

import os

import yaml

from spark_state_observer.mixin.prometheus_text import format_duration
from spark_state_observer.offline.backtest.report import BacktestReport
from spark_state_observer.offline.backtest.rules import METRIC_NAME, load_rules

TIMESTAMP_SUFFIX = "_timestamp_seconds"  # a gauge whose value is a Unix time (Prometheus' naming)


def read_series(om_path: str, names: set[str]) -> dict[str, dict[float, float]]:
    """The samples of the metrics named ``names`` in an OpenMetrics file: series text -> {time: value}."""
    series: dict[str, dict[float, float]] = {}
    with open(om_path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                continue
            name_end = min((i for i in (line.find("{"), line.find(" ")) if i >= 0), default=-1)
            if name_end < 0 or line[:name_end] not in names:
                continue
            head, value, stamp = line.rstrip("\n").rsplit(" ", 2)
            series.setdefault(head, {})[float(stamp)] = float(value)
    return series


def write_promtool_test(report: BacktestReport, om_path: str, rule_files: list[str], out_dir: str, eval_times: list[float]) -> str:
    """A ``promtool test rules`` file with the backtest's own input series and, at each of ``eval_times``,
    the alerts the backtest says were firing then: promtool passing it means both evaluations agree.

    The rules are copied without annotations (promtool would compare their rendered templates too,
    which says nothing about when an alert fires). promtool's clock starts at 0 where the backtest's starts at
    ``report.start``: the values of Unix-time series (named ``*_timestamp_seconds``, Prometheus' convention) are
    moved by as much, so a rule comparing one with ``time()`` (the scheduled-run overdue alert) judges alike, and
    one comparing two of them keeps their difference. Returns the test file's path.
    """
    recording, alerting = load_rules(rule_files)
    exprs = [r.expr for r in alerting] + [r.expr for r in recording]
    wanted = {n for expr in exprs for n in METRIC_NAME.findall(expr)}
    series = read_series(om_path, wanted)
    base = report.start
    n_points = int(round((report.end - base) / report.scrape_interval)) + 1
    input_series = []
    for head, points in sorted(series.items()):
        values = []
        shift = base if head.split("{", 1)[0].endswith(TIMESTAMP_SUFFIX) else 0.0
        for i in range(n_points):
            v = points.get(round(base + i * report.scrape_interval, 3))
            v = None if v is None else v - shift
            values.append("_" if v is None else repr(v).replace("inf", "Inf").replace("nan", "NaN"))
        input_series.append({"series": head, "values": " ".join(values)})
    copies = []
    for n, path in enumerate(rule_files):
        with open(path) as f:
            doc = yaml.safe_load(f)
        for group in doc.get("groups", []):
            for rule in group.get("rules", []):
                rule.pop("annotations", None)
        copy = os.path.join(out_dir, f"rules-{n}.yml")
        with open(copy, "w") as f:
            yaml.safe_dump(doc, f)
        copies.append(copy)
    tests = []
    for t in eval_times:
        for rule in alerting:
            firing = [
                f
                for f in report.firings
                if f.alert == rule.name and f.firing_at is not None and f.firing_at <= t and (f.resolved_at is None or t < f.resolved_at)
            ]
            tests.append(
                {
                    "eval_time": format_duration(round(t - base, 3)),
                    "alertname": rule.name,
                    "exp_alerts": [{"exp_labels": f.labels} for f in firing],
                }
            )
    doc = {
        "rule_files": copies,
        "evaluation_interval": format_duration(report.eval_interval),
        "tests": [{"interval": format_duration(report.scrape_interval), "input_series": input_series, "alert_rule_test": tests}],
    }
    test_path = os.path.join(out_dir, "backtest_test.yml")
    with open(test_path, "w") as f:
        yaml.safe_dump(doc, f, width=1 << 20)
    return test_path
