"""Split from tests/unit/test_snapshot_health.py: the tests of it that need a real Prometheus and promtool."""

from __future__ import annotations

import glob
import os
import subprocess

import pytest
from test_snapshot_health import HERE, NEVER, NORMAL, _truth

from conftest import eventlog_dir, need, progress_lines
from spark_state_observer.offline import backtest as bt


@pytest.mark.slow
def test_the_snapshot_alert_fires_on_never_uploaded_and_not_on_a_normal_run(tmp_path) -> None:
    """Through a real Prometheus (backtest) and promtool: the alert reads the observer's own judgement of the lag
    (its snapshot_lag_batches plus a maintenance interval's batches), the snapshot_lagging signal's."""
    need("prometheus")
    need("promtool")
    from spark_state_observer.mixin.config import load_config
    from spark_state_observer.mixin.rules import rule_files

    rules = []
    overrides = ("for_durations.SparkStateSnapshotUploadLagging=0m",)
    for name, text in rule_files(load_config(None, overrides)).items():
        (tmp_path / name).write_text(text)
        rules.append(str(tmp_path / name))
    fired = {}
    for scenario in (NEVER, NORMAL):
        logs = [
            os.path.join(eventlog_dir(os.path.join(scenario, "run1")), n) for n in os.listdir(eventlog_dir(os.path.join(scenario, "run1")))
        ]
        work = str(tmp_path / os.path.basename(scenario))
        report = bt.run_backtest(logs, sorted(rules), scrape_interval=5, eval_interval=5, work_dir=work)
        fired[scenario] = sorted({(f.alert, f.labels["operator"]) for f in report.fired() if f.alert == "SparkStateSnapshotUploadLagging"})
        steps = [report.start + i * report.eval_interval for i in range(int((report.end - report.start) // report.eval_interval) + 1)]
        test = bt.write_promtool_test(report, os.path.join(work, "series.om"), sorted(rules), work, steps)
        done = subprocess.run([need("promtool"), "test", "rules", test], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    assert fired[NEVER] == [("SparkStateSnapshotUploadLagging", "dedupe"), ("SparkStateSnapshotUploadLagging", "stateStoreSave")]
    assert fired[NORMAL] == []


@pytest.mark.slow
def test_a_snapshot_corrupted_on_purpose_is_auto_repaired_and_alerts(tmp_path) -> None:
    """The newest snapshot of every store overwritten between the runs (truth.json names them); the restart with
    auto-repair skips them. The dedup operator reports its 8 repairs; the aggregation reloads twice on a restart
    and reports 0 (documented in ../shared/spark-state-metrics.md), so only the dedup operator can alert."""
    need("prometheus")
    need("promtool")
    scenario = os.path.join(HERE, "auto_repair")
    truth = _truth(scenario)
    first = progress_lines(os.path.join(scenario, "run2"))[0]
    dedupe = next(op for op in first["stateOperators"] if op["operatorName"] == "dedupe")
    corrupted = [c for c in truth["corrupted"] if c.startswith(f"state/{first['stateOperators'].index(dedupe)}/")]
    assert dedupe["customMetrics"]["rocksdbNumSnapshotsAutoRepaired"] == len(corrupted) == truth["partitions"]
    logs = sorted(glob.glob(os.path.join(scenario, "run*", "eventlog", "*")))
    rules = [os.path.join(os.path.dirname(__file__), "..", "..", "alerts", n) for n in ("recording.yml", "rules.yml")]
    work = str(tmp_path / "bt")
    report = bt.run_backtest(logs, rules, scrape_interval=5, eval_interval=5, work_dir=work)
    fired = [f for f in report.fired() if f.alert == "SparkStateSnapshotAutoRepaired"]
    assert [(f.labels["operator"], f.value) for f in fired] == [("dedupe", float(len(corrupted)))], bt.render_table(report)
    restart = min(s["time"] for s in report.signals if s["kind"] == "query_restarted")
    assert fired[0].firing_at >= restart
    steps = [report.start + i * report.eval_interval for i in range(int((report.end - report.start) // report.eval_interval) + 1)]
    done = subprocess.run(
        [need("promtool"), "test", "rules", bt.write_promtool_test(report, os.path.join(work, "series.om"), rules, work, steps)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
