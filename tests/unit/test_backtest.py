"""Alert backtest (issue 18): recorded runs through the real rules, a real Prometheus and promtool."""

from __future__ import annotations

import glob
import os

import pytest

from conftest import FIXTURES, ROOT
from spark_state_observer.offline import backtest as bt
from spark_state_observer.offline.backtest import evaluation, promtool_test, recording, rules

RULES = [
    os.path.join(os.path.dirname(__file__), "..", "..", "alerts", "recording.yml"),
    os.path.join(os.path.dirname(__file__), "..", "..", "alerts", "rules.yml"),
]


def _logs(scenario: str) -> list[str]:
    paths = sorted(glob.glob(os.path.join(FIXTURES, scenario, "run*", "eventlog", "*")))
    assert paths, f"no recorded event logs for {scenario}"
    return paths


# --- fast: the evaluation semantics ------------------------------------------------------------------
def test_parse_duration() -> None:
    assert rules.parse_duration("0m") == 0
    assert rules.parse_duration("1h30m") == 5400
    assert rules.parse_duration("90s") == 90
    with pytest.raises(bt.BacktestError):
        rules.parse_duration("ten minutes")


def test_recording_rules_are_backfilled_in_dependency_order() -> None:
    recording, _ = bt.load_rules(RULES)
    levels = rules.dependency_levels(recording)
    done: set[str] = set()
    for level in levels:
        for rule in level:
            assert not ({r.record for r in recording} - done) & set(rules.METRIC_NAME.findall(rule.expr)) - {rule.record}
        done |= {r.record for r in level}
    assert len(levels) >= 2  # the shipped rules do chain (batch duration mean reads the batch rate)


def test_for_makes_an_alert_pending_then_firing_and_a_gap_resolves_it() -> None:
    rule = rules.AlertRule("X", "up", 60.0, {"severity": "warning"}, {"summary": "x on {{ $labels.query }} is {{ $value }}"})
    steps = [float(t) for t in range(0, 300, 30)]
    # active at 30..120, absent at 150, active again at 180..270
    values = [[t, "1"] for t in (30, 60, 90, 120, 180, 210, 240, 270)]
    firings = evaluation.evaluate_alert(rule, [{"metric": {"__name__": "up", "query": "q"}, "values": values}], steps)
    assert [(f.pending_at, f.firing_at, f.resolved_at) for f in firings] == [(30, 90, 150), (180, 240, None)]
    assert firings[0].labels == {"query": "q", "severity": "warning"} and firings[0].summary == "x on q is 1"
    assert firings[0].firing_seconds(300) == 60 and firings[1].firing_seconds(300) == 60


def test_an_alert_active_shorter_than_its_for_never_fires() -> None:
    rule = rules.AlertRule("X", "up", 120.0, {}, {})
    firings = evaluation.evaluate_alert(rule, [{"metric": {}, "values": [[0, "1"], [30, "1"]]}], [0.0, 30.0, 60.0])
    assert len(firings) == 1 and not firings[0].fired and firings[0].resolved_at == 60.0


def test_unreadable_rules_are_a_clear_error(tmp_path) -> None:
    bad = tmp_path / "r.yml"
    bad.write_text("groups: [")
    with pytest.raises(bt.BacktestError, match="cannot read rule file"):
        bt.load_rules([str(bad)])
    bad.write_text("alerts: []")
    with pytest.raises(bt.BacktestError, match="not a Prometheus rule file"):
        bt.load_rules([str(bad)])


def test_scrapes_carry_the_original_timestamps_and_the_target_labels(tmp_path) -> None:
    logs = _logs("rocksdb_restart")
    recorder, signals, events, errors = recording.record_series(logs, str(tmp_path / "s.om"), 5.0)
    assert not errors and events > 0
    series = promtool_test.read_series(str(tmp_path / "s.om"), {"spark_streaming_batches_total"})
    ((head, points),) = series.items()
    assert 'job="spark_state_observer"' in head and 'instance="backtest"' in head
    times = sorted(points)
    assert recorder.first <= times[0] and times[-1] == recorder.last and all(b - a == 5.0 for a, b in zip(times, times[1:]))
    # the counter counts the batches seen by each scrape time: it never goes down and ends at the log's count
    values = [points[t] for t in times]
    from spark_state_observer.offline.eventlog import read_records

    batches = sum(1 for r in read_records(logs) if getattr(r, "kind", None) == "progress")
    assert values == sorted(values) and values[-1] == batches
    starts = [s["time"] for s in signals if s["kind"] == "query_started"]
    assert len(starts) == 2 and recorder.first <= starts[0] < starts[1] <= recorder.last


CUSTOM = os.path.join(ROOT, "tests", "data", "mixin-custom.yaml")


def test_scrapes_are_labelled_as_the_configuration_selects() -> None:
    """The scrape target's labels satisfy the configured selectors; the default keeps the observer's job."""
    from spark_state_observer.mixin.config import MixinConfig, MixinConfigError, load_config

    assert recording.target_labels(MixinConfig()) == recording.TARGET_LABELS
    custom = load_config(CUSTOM)  # selector job=~"spark-.*" with test_labels.job
    assert recording.target_labels(custom) == {"job": "spark-drivers", "instance": "backtest"}
    pinned = load_config(None, ['selector=env="prod", app="shop"', 'observer_selector=job="fleet"'])
    assert recording.target_labels(pinned) == {"job": "fleet", "env": "prod", "instance": "backtest"}  # app is the recording's own
    with pytest.raises(MixinConfigError, match=r"test_labels\.team"):
        recording.target_labels(load_config(None, ['selector=team=~"a.+"']))


def test_the_history_tells_a_re_fire_from_an_instance_cut_by_an_idle_gap() -> None:
    """Resolved then active again is a re-fire; cut by an idle gap and active where the data resumes is the same instance."""
    from spark_state_observer.offline.backtest.history import CONTINUED, FIRED, GAP, REFIRED, RESOLVED, alert_history
    from spark_state_observer.offline.backtest.report import BacktestReport, Firing, QueryRun

    def firing(pending: float, fired: float, resolved: float | None) -> Firing:
        return Firing("X", {"query_id": "q"}, "critical", "", "", pending, fired, resolved)

    report = BacktestReport(0.0, 1000.0, 15.0, 15.0, [], 0, 0, gaps=[(300.0, 600.0)])
    report.runs = [QueryRun("q", "r1", "app-1", 10.0), QueryRun("q", "r2", "app-2", 100.0)]
    report.firings = [firing(30, 30, 120), firing(150, 150, 300), firing(600, 600, None)]
    history = alert_history(report)
    assert [(t.time, t.change, t.application, t.run) for t in history] == [
        (30, FIRED, "app-1", 1),
        (120, RESOLVED, "app-2", 2),
        (150, REFIRED, "app-2", 2),
        (300, GAP, "app-2", 2),
        (600, CONTINUED, "app-2", 2),
    ]
