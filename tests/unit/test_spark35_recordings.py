"""The signals on the incidents and clean runs recorded with PySpark 3.5.8 (``scripts/record_*.py --suffix _35``).

What Spark 3.5 reports differs from 4.x in ways the signals must reason about (``../shared/spark-state-metrics.md``):
no ``SnapshotLastUploaded`` instance metrics (4.1+), no RocksDB load metrics (4.1+), no ``batchDuration`` in the
progress JSON, and a session window named ``defaultName`` (its writer has no short name of its own before 4.0).
The precision judge holds every ``*_35`` recording to its truth (``tests/unit/test_precision.py``); these are the
3.5-specific findings, each replayed from its recording.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

from bench import precision
from conftest import eventlog_dir
from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.metrics import catalog
from spark_state_observer.model.signal_kinds import SNAPSHOT_LAGGING, SignalEvent
from spark_state_observer.offline.replay import ReplayResult, replay
from spark_state_observer.settings import Settings

WITHIN = os.path.join(precision.INCIDENTS, "late_within_delay_35")
SESSION = os.path.join(precision.INCIDENTS, "restore_session_35")
# what the recorded jobs ran with (spark_state_observer.cli.demo.spark_session): a snapshot every 5 deltas, maintenance every 5 s
MAINTENANCE = {"spark.sql.streaming.stateStore.maintenanceInterval": "5s"}


def _progress(run_dir: str) -> list[dict[str, Any]]:
    with io.BufferedReader(open_decompressed(os.path.join(run_dir, "progress.jsonl.zstd"))) as f:
        return [json.loads(line) for line in f if line.strip()]


def _checkpoint_at_first_batch(root: str, progress: dict[str, Any], versions: int = 1) -> str:
    """The state folders of the recorded query's checkpoint as Spark 3.5 leaves them after ``versions`` batches with
    RocksDB changelog checkpointing and no snapshot uploaded yet: per operator and state partition of the progress,
    ``1.changelog`` to ``<versions>.changelog`` (the listing reads names only)."""
    for index, op in enumerate(progress["stateOperators"]):
        for partition in range(op["numShufflePartitions"]):
            folder = os.path.join(root, "state", str(index), str(partition))
            os.makedirs(folder)
            for version in range(1, versions + 1):
                open(os.path.join(folder, f"{version}.changelog"), "w").close()
    return root


def _replay_listed(run_dir: str, checkpoint: str) -> tuple[ReplayResult, list[SignalEvent]]:
    got: list[SignalEvent] = []

    def conf(observer: Any, _at: float) -> None:
        observer.set_spark_conf(MAINTENANCE)

    result = replay(
        [eventlog_dir(run_dir)],
        Settings(http_enabled=False, placement="off"),
        on_signal=got.append,
        checkpoint=lambda _q, _r: checkpoint,
        before_event=conf,
    )
    return result, got


def test_a_stale_listing_is_no_snapshot_lag_where_spark_reports_no_upload(tmp_path: Any) -> None:
    """Live, late_within_delay_35's observer listed the checkpoint every 30 s (1 s batches, maintenance every 5 s) and
    told snapshot_lagging three times on a clean run: Spark 3.5 reports no upload, and between two listings every
    version since the last one counted as lag (26 > 20 + 5 s / 1 s), as if maintenance had uploaded nothing since.
    Replayed against the checkpoint as its first batch left it (listed again every 30 s, never newer): the lag is what
    the listing saw, one version, and nothing is told."""
    run = os.path.join(WITHIN, "run1")
    with open(os.path.join(run, "signals.jsonl")) as f:
        live = [json.loads(line) for line in f]
    assert [s["attributes"]["source"] for s in live if s["kind"] == SNAPSHOT_LAGGING] == ["checkpoint"] * 3  # the live run's
    progress = _progress(run)
    assert not any(k.startswith("SnapshotLastUploaded") for p in progress for op in p["stateOperators"] for k in op["customMetrics"])
    checkpoint = _checkpoint_at_first_batch(str(tmp_path / "checkpoint"), progress[0])
    result, signals = _replay_listed(run, checkpoint)
    assert [s.attributes for s in signals if s.kind == SNAPSHOT_LAGGING] == []
    (record,) = result.observer.tracker.snapshot()
    lags = {v for (spec, _labels), v in record.signal_gauges.items() if spec is catalog.SNAPSHOT_MAX_LAG_BATCHES}
    assert lags == {1.0}


def test_a_listing_that_shows_the_lag_still_tells_it(tmp_path: Any) -> None:
    """The same run against a checkpoint whose listing itself shows more versions without a snapshot than normal
    (20 + a maintenance interval of batches): told, from the checkpoint."""
    run = os.path.join(WITHIN, "run1")
    progress = _progress(run)
    versions = len(progress) + 5  # more than any batch of the run: each one lags by what the listing shows
    checkpoint = _checkpoint_at_first_batch(str(tmp_path / "checkpoint"), progress[0], versions)
    _, signals = _replay_listed(run, checkpoint)
    (told,) = [s.attributes for s in signals if s.kind == SNAPSHOT_LAGGING]
    assert told["source"] == "checkpoint" and told["max_lag_batches"] > told["allowed_lag_batches"]
    assert told["instances_never_uploaded"] == progress[0]["stateOperators"][0]["numShufflePartitions"]
