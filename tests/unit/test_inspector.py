"""The checkpoint inspector on checkpoint trees laid out here the way Spark writes them (HDFS, RocksDB, joins)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT
from spark_state_observer.history.store import HistoryStore
from spark_state_observer.model.signal_kinds import RESTORE
from spark_state_observer.offline.checkpoint import inspect_checkpoint
from spark_state_observer.offline.checkpoint.render import render_text
from spark_state_observer.offline.checkpoint.report import CheckpointError
from spark_state_observer.offline.checkpoint.restore import (
    DEFAULT_BYTES_PER_SECOND,
    DEFAULT_REPLAY_BYTES_PER_SECOND,
    DEFAULT_SECONDS_PER_FILE,
    DEFAULT_SECONDS_PER_STORE,
    rates_from_history,
)

QUERY_ID = "6d4f2a53-0d5e-4d3c-9f5e-3f1d2b8a7c11"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def checkpoint(root: Path, provider: str, committed: int, planned: int) -> Path:
    """metadata, offsets/0..planned (the last with its conf) and commits/0..committed."""
    write(root / "metadata", json.dumps({"id": QUERY_ID}))
    for batch in range(planned + 1):
        meta = {
            "batchWatermarkMs": 1000 * batch,
            "batchTimestampMs": 1_800_000_000_000 + batch,
            "conf": {"spark.sql.streaming.stateStore.providerClass": provider, "spark.sql.shuffle.partitions": "2"},
        }
        write(root / "offsets" / str(batch), f'v1\n{json.dumps(meta)}\n{{"rate":{batch * 10}}}\n')
    for batch in range(committed + 1):
        write(root / "commits" / str(batch), 'v1\n{"nextBatchWatermarkMs":0}')
    return root


def operator_metadata(root: Path, operator: int, name: str, stores: list[str]) -> None:
    info = {
        "operatorInfo": {"operatorId": operator, "operatorName": name},
        "stateStoreInfo": [{"storeName": s, "numColsPrefixKey": 0, "numPartitions": 2} for s in stores],
    }
    write(root / "state" / str(operator) / "_metadata" / "metadata", f"v1\n{json.dumps(info)}")


def rocksdb_zip(sst_sizes: list[int]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(
            "metadata",
            "v1\n"
            + json.dumps({"sstFiles": [{"localFileName": f"{i}.sst", "sizeBytes": s} for i, s in enumerate(sst_sizes)], "numKeys": 10}),
        )
    return out.getvalue()


def test_hdfs_checkpoint_restore_work_and_estimate(tmp_path: Path) -> None:
    root = checkpoint(tmp_path / "ck", HDFS, committed=4, planned=5)
    operator_metadata(root, 0, "stateStoreSave", ["default"])
    p0, p1 = root / "state" / "0" / "0", root / "state" / "0" / "1"
    for v in range(1, 6):
        write(p0 / f"{v}.delta", b"d" * 100)
    write(p0 / "3.snapshot", b"s" * 1000)
    for v in (1, 2, 3, 5):  # version 4 was cleaned up: a restore from scratch would fail
        write(p1 / f"{v}.delta", b"d" * 10)
    write(p1 / ".5.delta.tmp", b"")

    report = inspect_checkpoint(str(root))
    assert (report.query_id, report.last_planned_batch, report.last_committed_batch, report.uncommitted_batch) == (QUERY_ID, 5, 4, 5)
    assert (report.provider, report.shuffle_partitions, report.batch_watermark_ms) == ("hdfs", 2, 5000)
    assert report.sources == ['{"rate":50}']
    (op,) = report.operators
    assert (op.operator_id, op.name, op.stores, op.num_partitions) == (0, "stateStoreSave", ["default"], 2)
    first, second = op.partitions
    assert (first.provider, first.newest_snapshot, first.latest_version) == ("hdfs", 3, 5)
    w = first.restore
    assert w is not None and (w.target_version, w.snapshot_version, w.snapshot_bytes, w.replay_files, w.replay_bytes) == (
        5,
        3,
        1000,
        2,
        200,
    )
    w2 = second.restore
    assert w2 is not None and (w2.snapshot_version, w2.replay_files, w2.replay_bytes, w2.missing_files) == (None, 4, 40, 1)
    assert any("1 delta file(s) between version 1 and 5 are missing" in p for p in report.problems)
    assert any(p.endswith(".5.delta.tmp: temporary or partially written file") for p in report.problems)

    e = report.estimate
    assert e is not None and (e.stores, e.files, e.bytes, e.basis) == (2, 2 + 1 + 4, 1200 + 40, "defaults")
    per = {
        "0/0/default": DEFAULT_SECONDS_PER_STORE
        + 2 * DEFAULT_SECONDS_PER_FILE
        + 200 / DEFAULT_REPLAY_BYTES_PER_SECOND
        + 1000 / DEFAULT_BYTES_PER_SECOND,
        "0/1/default": DEFAULT_SECONDS_PER_STORE + 4 * DEFAULT_SECONDS_PER_FILE + 40 / DEFAULT_REPLAY_BYTES_PER_SECOND,
    }
    assert e.seconds == pytest.approx(sum(per.values()))
    assert e.slowest_partition == "0/1/default" and e.skew == pytest.approx(per["0/1/default"] / (sum(per.values()) / 2))

    text = render_text(report)
    assert "batch 5 planned but not committed" in text and "p0/default hdfs: 6 files, newest snapshot v3" in text
    assert "restore estimate:" in text and "rates from defaults" in text
    assert json.loads(report.to_json())["operators"][0]["partitions"][0]["restore"]["replay_files"] == 2


def test_rocksdb_checkpoint_counts_snapshot_ssts_and_changelogs(tmp_path: Path) -> None:
    root = checkpoint(tmp_path / "ck", ROCKSDB, committed=4, planned=4)
    operator_metadata(root, 0, "dedupe", ["default"])
    part = root / "state" / "0" / "0"
    zipped = rocksdb_zip([300, 700])
    write(part / "2.zip", zipped)
    for v in range(1, 6):
        write(part / f"{v}.changelog", b"c" * 50)
    write(part / "SSTs" / "000008-uuid.sst", b"x" * 300)
    write(part / "SSTs" / "000009-uuid.sst", b"x" * 700)

    report = inspect_checkpoint(str(root))
    assert report.provider == "rocksdb" and report.uncommitted_batch is None
    (p,) = report.operators[0].partitions
    assert (p.provider, p.sst_files, p.sst_bytes, p.newest_snapshot) == ("rocksdb", 2, 1000, 2)
    w = p.restore
    assert w is not None and (w.snapshot_version, w.snapshot_bytes, w.replay_files, w.replay_bytes) == (2, len(zipped) + 1000, 3, 150)
    assert report.estimate is not None and report.estimate.files == 4 and report.estimate.skew == pytest.approx(1.0)


def test_rocksdb_v2_ids_and_join_stores(tmp_path: Path) -> None:
    """Checkpoint format v2 names files ``<version>_<uuid>``; a join keeps one folder per store."""
    root = checkpoint(tmp_path / "ck", ROCKSDB, committed=1, planned=1)
    stores = ["left-keyToNumValues", "right-keyToNumValues"]
    operator_metadata(root, 0, "symmetricHashJoin", stores)
    uid_small, uid_large = "0f0e0d0c-0b0a-0908-0706-050403020100", "1f1e1d1c-1b1a-1918-1716-151413121110"
    for store in stores:
        folder = root / "state" / "0" / "0" / store
        write(folder / f"1_{uid_small}.zip", rocksdb_zip([10]))
        write(folder / f"1_{uid_large}.zip", rocksdb_zip([10, 20, 30]))  # a retried commit: the larger one counts
        write(folder / f"2_{uid_small}.changelog", b"c" * 7)
    report = inspect_checkpoint(str(root))
    partitions = report.operators[0].partitions
    assert [(p.partition, p.store) for p in partitions] == [(0, s) for s in stores]
    for p in partitions:
        assert p.restore is not None and p.restore.snapshot_version == 1 and p.restore.replay_files == 1
        assert p.restore.snapshot_bytes == len(rocksdb_zip([10, 20, 30])) + 60
        assert {f.unique_id for f in p.files} == {uid_small, uid_large}


def test_what_is_not_a_local_checkpoint_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no such directory"):
        inspect_checkpoint(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="not a streaming checkpoint"):
        inspect_checkpoint(str(tmp_path / "empty"))
    with pytest.raises(CheckpointError, match="only local checkpoints"):
        inspect_checkpoint("s3a://bucket/ck")


def test_a_partially_written_offsets_file_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    root = checkpoint(tmp_path / "ck", HDFS, committed=1, planned=2)
    write(root / "offsets" / "2", "v1\n{not json")
    report = inspect_checkpoint(str(root))
    assert report.last_planned_batch == 2 and report.provider is None
    assert any("offsets/2 is partially written or unreadable" in p for p in report.problems)


def _history_with_restores(path: str) -> None:
    store = HistoryStore(path)
    for duration, stores in ((1.2, 4), (2.0, 4), (9.0, 4)):
        store.add_signal(RESTORE, QUERY_ID, "run", 1.8e9, {"method": "load_metrics", "duration_seconds": duration, "stores": stores})
    store.add_signal(RESTORE, QUERY_ID, "run", 1.8e9, {"method": "add_batch_excess", "duration_seconds": 50.0, "stores": 4})
    store.add_signal(RESTORE, "another-query", "run", 1.8e9, {"method": "load_metrics", "duration_seconds": 99.0, "stores": 1})
    store.flush()
    store.close()


def test_history_rates_are_the_median_measured_restore_per_store(tmp_path: Path) -> None:
    db = str(tmp_path / "history.db")
    _history_with_restores(db)
    assert rates_from_history(db, QUERY_ID) == {"seconds_per_store": pytest.approx(0.5), "restores": 3.0}
    assert rates_from_history(db, "unknown") is None


def test_one_estimate_per_checkpoint_says_whether_the_history_refined_it(tmp_path: Path) -> None:
    """Issue 51: the inspector's estimate, the same with a history, and the measured restore read as three
    estimates. The history refines the inspector's (its rate per store), and the estimate says which it is."""
    root = checkpoint(tmp_path / "ck", HDFS, committed=1, planned=1)
    for v in (1, 2):
        write(root / "state" / "0" / "0" / f"{v}.delta", b"d" * 10)
    db = str(tmp_path / "history.db")
    _history_with_restores(db)
    alone = inspect_checkpoint(str(root)).estimate
    refined = inspect_checkpoint(str(root), rates_from_history(db, QUERY_ID)).estimate
    assert alone is not None and refined is not None and alone.seconds != refined.seconds
    assert alone.described().startswith("the inspector's estimate at its default rates")
    assert refined.measured_restores == 3
    assert refined.described() == (
        "the inspector's estimate, refined by the history: its rate per store from 3 restores Spark measured for this query"
    )


def test_inspect_with_history_works_without_pandas(tmp_path: Path) -> None:
    root = checkpoint(tmp_path / "ck", HDFS, committed=1, planned=1)
    for v in (1, 2):
        write(root / "state" / "0" / "0" / f"{v}.delta", b"d" * 10)
    db = str(tmp_path / "history.db")
    _history_with_restores(db)
    script = (
        "import sys\nsys.modules['pandas'] = None\n"  # a plain install: any import of pandas fails
        "from spark_state_observer.cli import main\n"
        f"sys.exit(main(['inspect', {str(root)!r}, '--history', {db!r}, '--json']))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    estimate = json.loads(out.stdout)["estimate"]
    assert estimate["basis"] == "history"
    assert estimate["seconds"] == pytest.approx(0.5 + 2 * DEFAULT_SECONDS_PER_FILE + 20 / DEFAULT_REPLAY_BYTES_PER_SECOND)
    assert os.path.exists(db)


def test_footprint_per_operator_is_what_the_state_folders_hold(tmp_path: Path) -> None:
    """Snapshots, SSTs and changelogs summed per operator; the changelogs after the newest snapshot apart."""
    root = checkpoint(tmp_path / "ck", ROCKSDB, committed=6, planned=6)
    operator_metadata(root, 0, "dedupe", ["default"])
    for partition in (0, 1):
        part = root / "state" / "0" / str(partition)
        write(part / "3.zip", rocksdb_zip([300, 700]))
        write(part / "6.zip", rocksdb_zip([300, 700, 200]))
        for v in range(1, 8):
            write(part / f"{v}.changelog", b"c" * (10 + v))
        for i, size in enumerate((300, 700, 200)):
            write(part / "SSTs" / f"00000{i}-uuid.sst", b"x" * size)
    report = inspect_checkpoint(str(root))
    (fp,) = report.footprint
    on_disk = sum(f.stat().st_size for f in (root / "state" / "0").rglob("*") if f.is_file() and "_metadata" not in f.parts)
    assert fp.total_bytes == on_disk and fp.stores == 2
    assert (fp.snapshot_files, fp.sst_files, fp.sst_bytes, fp.replay_files) == (4, 6, 2400, 14)
    assert (fp.since_snapshot_files, fp.since_snapshot_bytes) == (2, 2 * 17)  # version 7, after snapshot 6
    assert fp.retained_versions == 7
    assert "footprint of operator 0 dedupe" in render_text(report)
    assert json.loads(report.to_json())["footprint"][0]["sst_bytes"] == 2400


def test_disk_forecast_from_the_recorded_growth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A recorded query whose state only grows (groupBy without watermark), replayed into a history."""
    from datetime import datetime

    from spark_state_observer.cli.main import main

    run = Path(ROOT) / "tests" / "fixtures" / "incidents" / "unbounded_growth" / "run1"
    progress = [json.loads(line) for line in (run / "progress.jsonl").read_text().splitlines() if line.strip()]
    db = str(tmp_path / "h.sqlite")
    assert main(["replay", str(run / "eventlog"), "--history", db]) == 0
    root = checkpoint(tmp_path / "ck", ROCKSDB, committed=1, planned=1)
    write(root / "metadata", json.dumps({"id": progress[0]["id"]}))
    operator_metadata(root, 0, "stateStoreSave", ["default"])
    write(root / "state" / "0" / "0" / "1.changelog", b"c" * 1000)
    capsys.readouterr()
    assert main(["inspect", str(root), "--history", db, "--disk-budget", "100m", "--json"]) == 0
    forecast = json.loads(capsys.readouterr().out)["disk_forecast"]
    # the growth, fitted here from the progress the run reported (times: its batch start, close to the history's)
    points = [
        (
            datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp(),
            p["stateOperators"][0]["customMetrics"]["rocksdbSstFileSize"],
        )
        for p in progress
    ]
    mean_t, mean_v = sum(t for t, _ in points) / len(points), sum(v for _, v in points) / len(points)
    slope = sum((t - mean_t) * (v - mean_v) for t, v in points) / sum((t - mean_t) ** 2 for t, _ in points)
    assert forecast["growth_bytes_per_hour"] == pytest.approx(slope * 3600, rel=0.1)
    assert forecast["footprint_bytes"] == 1000 and forecast["batches"] == len(progress)
    assert forecast["eta_seconds"] == pytest.approx((100 * 1024 * 1024 - 1000) / (forecast["growth_bytes_per_hour"] / 3600))
    assert main(["inspect", str(root), "--disk-budget", "100m"]) == 2  # no history: said, not a traceback
    assert "needs --history" in capsys.readouterr().err
    assert main(["inspect", str(root), "--history", db, "--disk-budget", "900"]) == 0
    assert "over the budget already" in capsys.readouterr().out
