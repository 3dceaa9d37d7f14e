"""Reading Spark event logs as Spark wrote them, and surviving damaged or hostile ones."""

from __future__ import annotations

import glob
import os
import shutil
import tracemalloc

import pytest
import zstandard

from conftest import FIXTURES, eventlog_dir, progress_lines
from spark_state_observer.offline.eventlog import EventLogError, Record, expand, read_records


def _event_files(scenario: str) -> list[str]:
    return sorted(glob.glob(os.path.join(FIXTURES, scenario, "run1", "eventlog", "*", "events_*")))


@pytest.mark.parametrize(
    "scenario, codec", [("rocksdb_restart", "zstd"), ("hdfs", "lz4"), ("rocksdb_nochangelog_snappy", "snappy"), ("rocksdb_plain_log", None)]
)
def test_every_codec_yields_the_runs_progress_events(scenario: str, codec: str | None) -> None:
    files = _event_files(scenario)
    assert files and all((f.endswith("." + codec) if codec else "." not in os.path.basename(f)) for f in files)
    run = os.path.join(FIXTURES, scenario, "run1")
    items = list(read_records([eventlog_dir(run)]))
    assert not [i for i in items if isinstance(i, EventLogError)]
    batches = [i.payload["batchId"] for i in items if isinstance(i, Record) and i.kind == "progress"]
    assert batches == [p["batchId"] for p in progress_lines(run)]
    kinds = [i.kind for i in items if isinstance(i, Record) and not i.kind.startswith("executor")]
    assert kinds[0] == "started" and kinds[-2:] == ["terminated", "application_end"]


def test_rolling_folder_is_read_in_index_order(tmp_path) -> None:
    """Spark rolls event logs into events_1_*, events_2_*, ... with 10 sorting before 2 as text."""
    source = _event_files("rocksdb_plain_log")[0]
    lines = open(source, "rb").read().splitlines(keepends=True)
    folder = tmp_path / "eventlog_v2_app"
    folder.mkdir()
    size = max(1, len(lines) // 11 + 1)
    for n in range(11):
        (folder / f"events_{n + 1}_app").write_bytes(b"".join(lines[n * size : (n + 1) * size]))
    files = expand([str(folder)])
    assert [os.path.basename(f) for f in files][:3] == ["events_1_app", "events_2_app", "events_3_app"]
    original = [i.payload for i in read_records([source]) if isinstance(i, Record)]
    rolled = [i.payload for i in read_records([str(folder)]) if isinstance(i, Record)]
    assert rolled == original


def test_truncated_compressed_log_keeps_what_came_before(tmp_path) -> None:
    source = _event_files("rocksdb_restart")[0]
    data = open(source, "rb").read()
    cut = tmp_path / "events_1_cut.zstd"
    cut.write_bytes(data[: len(data) * 2 // 3])
    items = list(read_records([str(cut)]))
    records = [i for i in items if isinstance(i, Record) and not i.kind.startswith("executor")]
    errors = [i for i in items if isinstance(i, EventLogError)]
    assert records and records[0].kind == "started"
    assert len(errors) >= 1 and str(cut) in str(errors[-1])


def test_truncated_last_line_is_reported_and_skipped(tmp_path) -> None:
    source = _event_files("rocksdb_plain_log")[0]
    data = open(source, "rb").read()
    partial = tmp_path / "events_partial"
    partial.write_bytes(data + data.splitlines(keepends=True)[5][:40])
    items = list(read_records([str(partial)]))
    assert isinstance(items[-1], EventLogError) and "not valid JSON" in str(items[-1])
    assert len([i for i in items if isinstance(i, Record)]) == len([i for i in read_records([source]) if isinstance(i, Record)])


def test_wrong_codec_gives_a_clear_error(tmp_path) -> None:
    source = _event_files("rocksdb_restart")[0]
    wrong = tmp_path / "events_1_app.lz4"
    shutil.copy(source, wrong)
    items = list(read_records([str(wrong)]))
    assert len(items) == 1 and isinstance(items[0], EventLogError) and "lz4" in str(items[0])


def test_decompression_bomb_stays_bounded(tmp_path) -> None:
    """200 MB of one endless line compresses to a few KB; reading it must not hold it in memory."""
    bomb = tmp_path / "events_1_bomb.zstd"
    cctx = zstandard.ZstdCompressor(level=3)
    with open(bomb, "wb") as f, cctx.stream_writer(f) as w:
        block = b"x" * (1 << 20)
        for _ in range(200):
            w.write(block)
    assert os.path.getsize(bomb) < 1_000_000
    tracemalloc.start()
    items = list(read_records([str(bomb)], max_line_bytes=4 << 20))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(items) == 1 and "longer than" in str(items[0])
    assert peak < 40 << 20


def test_missing_path_is_an_error() -> None:
    with pytest.raises(EventLogError, match="no such file"):
        list(read_records(["/nonexistent/eventlog"]))


def test_a_termination_takes_the_time_of_the_events_before_it_and_never_precedes_its_run() -> None:
    """Spark's QueryTerminatedEvent has no time; a run must never end before it started (issue 12)."""
    from spark_state_observer.model.parse import parse_timestamp as _ts

    logs = sorted(glob.glob(os.path.join(FIXTURES, "schema_failure", "run*", "eventlog", "*")))
    started: list[float] = []
    ended: list[float] = []
    for r in read_records(logs):
        if getattr(r, "kind", None) == "started":
            started.append(_ts(r.payload["timestamp"]))
        elif getattr(r, "kind", None) == "terminated":
            assert r.timestamp is not None
            ended.append(r.timestamp)
    assert len(started) == len(ended) == 2
    for start, end in zip(started, ended):
        assert end >= start
    assert ended[0] < started[1]  # the first run ended before the second began


def test_time_before_reads_spark_times_and_progress_ends() -> None:
    from spark_state_observer.offline.eventlog import time_before

    lines = [
        b'{"Event":"SparkListenerJobEnd","Job ID":3,"Completion Time":1795309223565,"Job Result":{}}\n',
        b'{"Event":"x","progress":{"timestamp":"2026-11-22T01:00:20.000Z","batchDuration":1500}}\n',
    ]
    assert time_before(lines) == 1795309223.565
    assert time_before(lines[1:]) == pytest.approx(1795309221.5)
    assert time_before([b"garbage", b'{"Completion Time":99}']) is None
