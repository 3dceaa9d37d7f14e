"""Each alert's ``for`` can fire on the recorded incident it exists for, and a clean recording fires nothing:
`backtest` (a real Prometheus evaluating the exported rules over the replayed recordings)."""

from __future__ import annotations

import glob
import os

import pytest

from conftest import FIXTURES, ROOT, need
from spark_state_observer.offline import backtest as bt
from spark_state_observer.offline.backtest import formats

pytestmark = pytest.mark.slow
RULES = [os.path.join(ROOT, "alerts", "recording.yml"), os.path.join(ROOT, "alerts", "rules.yml")]
# alert -> the recording of the incident it exists for (tests/fixtures)
INCIDENTS = {
    "SparkStreamingQueryFailed": "incidents/fail_udf_value_error",
    "SparkStreamingQueryCrashLooping": "incidents/crash_loop_503",
    "SparkStreamingQueryStalled": "incidents/pace_stall",
    "SparkStreamingQueryFallingBehind": "incidents/pace_falling_behind",
    "SparkStreamingKafkaDataLossRisk": "incidents/kafka_records_deleted_tolerated",
    "SparkStreamingKafkaLagGrowing": "incidents/kafka_lag_growing",
    "SparkStreamingLateRowsDropped": "incidents/late_future_record",
    "SparkStateUnbounded": "incidents/unbounded_growth",
    "SparkStateSnapshotUploadLagging": "snapshot_health/never_uploaded",
    "SparkStateSkewed": "skew/bytes",
}
# recordings on which no alert may fire: a clean run, a deploy (SIGTERM, the query back in the next run), two
# executor kills (each one verdict: no state that keeps moving), a restart with its restore, and two Kafka
# queries that keep up (one at its rate limit, one on a transactional topic)
QUIET = (
    "incidents/clean_busy_90s",
    "incidents/deploy_sigterm",
    "placement/kill",
    "incidents/restore_aggregation",
    "incidents/kafka_steady_rate_limited",
    "incidents/kafka_steady_transactional",
)


def _logs(scenario: str) -> list[str]:
    base = os.path.join(FIXTURES, *scenario.split("/"))
    paths = sorted(glob.glob(os.path.join(base, "run*", "eventlog", "*"))) or sorted(glob.glob(os.path.join(base, "eventlog", "*")))
    assert paths, f"no recorded event logs for {scenario}"
    return paths


def _fired(scenario: str, work: str) -> tuple[set[str], bt.BacktestReport]:
    need("prometheus")
    need("promtool")
    report = bt.run_backtest(_logs(scenario), RULES, scrape_interval=5, eval_interval=5, work_dir=work)
    return {f.alert for f in report.fired()}, report


@pytest.mark.parametrize("alert", sorted(INCIDENTS))
def test_each_alert_fires_on_its_recorded_incident(alert: str, tmp_path) -> None:
    fired, report = _fired(INCIDENTS[alert], str(tmp_path / "bt"))
    assert alert in fired, formats.render_table(report)


@pytest.mark.parametrize("scenario", QUIET)
def test_no_alert_fires_on_a_clean_recording(scenario: str, tmp_path) -> None:
    fired, report = _fired(scenario, str(tmp_path / "bt"))
    assert fired == set(), formats.render_table(report)
