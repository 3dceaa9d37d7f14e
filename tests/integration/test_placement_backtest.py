"""The backtest, with real Prometheus, fires partitions-migrating where state keeps moving."""

from __future__ import annotations

import pytest
from test_placement import scenario


@pytest.mark.slow
def test_backtest_fires_partitions_migrating_where_state_keeps_moving(tmp_path) -> None:
    """The alert through a real Prometheus on the recorded runs: state moving in two batches of a short run fires it
    (threshold lowered to 2 batches, no ``for``); one executor loss (one batch with moves) does not."""
    from conftest import need
    from spark_state_observer.mixin.config import load_config
    from spark_state_observer.mixin.rules import rule_files
    from spark_state_observer.offline import backtest as bt

    need("prometheus")
    config = load_config(None, ["thresholds.partition_migration_batches=2", "for_durations.SparkStatePartitionsMigrating=0m"])
    paths = []
    for name, text in rule_files(config).items():
        paths.append(str(tmp_path / name))
        with open(paths[-1], "w") as f:
            f.write(text)
    fired = {}
    for name in ("locality", "kill"):
        _, eventlog = scenario(name)
        report = bt.run_backtest([eventlog], paths, scrape_interval=5, eval_interval=5, work_dir=str(tmp_path / name))
        fired[name] = [f for f in report.fired() if f.alert == "SparkStatePartitionsMigrating"]
    assert fired["locality"] and {f.labels["operator"] for f in fired["locality"]} == {"stateStoreSave"}
    assert fired["kill"] == []
