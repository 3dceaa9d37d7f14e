"""Signals on recorded real runs: restarts, crash loops, callbacks that fail, classification."""

from __future__ import annotations

import json
import os

from conftest import eventlog_dir, fixture_runs, progress_lines
from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.metrics import catalog
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings
from spark_state_observer.signals.classify import classify_exception

RESTART = fixture_runs("rocksdb_restart")


KILLED_LEAVE_OUT = (b"QueryTerminatedEvent", b"SparkListenerApplicationEnd")  # what a driver killed without a word never logs


def _without_terminations(run_dir: str, folder: str) -> str:
    """``run_dir``'s event log as a driver killed without a word (SIGKILL, the OOM killer) leaves it: every line but
    the query's termination and the application's end (its shutdown hook never ran)."""
    source = next(os.path.join(r, f) for r, _, files in os.walk(eventlog_dir(run_dir)) for f in files if f.startswith("events_"))
    with open_decompressed(source) as f:
        lines = [line for line in f.read().splitlines(keepends=True) if not any(end in line for end in KILLED_LEAVE_OUT)]
    path = os.path.join(folder, "events_1_killed")
    with open(path, "wb") as out:
        out.writelines(lines)
    return path


def test_crash_loop_counts_restarts_after_a_crash_not_after_a_clean_stop(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The recording's first run was stopped cleanly: its restart is a restart, not a crash loop's, however
    low the threshold. The same log with the first run's end never seen (its driver killed) is a crash."""
    logs = [eventlog_dir(r) for r in RESTART]
    clean = replay(logs, Settings(http_enabled=False, crash_loop_restarts=1))
    said = [e.kind for e in clean.observer.signals.recent]
    assert "query_restarted" in said and "crash_loop" not in said
    killed = replay([_without_terminations(RESTART[0], str(tmp_path)), logs[1]], Settings(http_enabled=False, crash_loop_restarts=1))
    loops = [e for e in killed.observer.signals.recent if e.kind == "crash_loop"]
    assert [e.attributes["restarts"] for e in loops] == [1]
    calm = replay([_without_terminations(RESTART[0], str(tmp_path)), logs[1]], Settings(http_enabled=False, crash_loop_restarts=3))
    assert "crash_loop" not in [e.kind for e in calm.observer.signals.recent]


def test_a_failing_callback_is_counted_and_the_rest_goes_on() -> None:
    obs = PrometheusObserver(Settings(http_enabled=False), serve=False, live=False)
    got: list = []

    def broken(event) -> None:  # type: ignore[no-untyped-def]
        raise RuntimeError("user bug")

    obs.on("*", broken)
    obs.on("*", got.append)
    for p in progress_lines(RESTART[1]):
        obs.process(CapturedEvent("progress", json.dumps(p), 0.0, 0.0))
    assert got and obs.self_metrics.callback_failures == len(got)
    assert obs.tracker.snapshot()[0].last_progress.batch_id == progress_lines(RESTART[1])[-1]["batchId"]


def test_unknown_signal_kind_is_rejected() -> None:
    obs = PrometheusObserver(Settings(http_enabled=False), serve=False)
    try:
        obs.on("restored", print)
    except ValueError as exc:
        assert "restore" in str(exc)
    else:
        raise AssertionError("expected ValueError")


def test_watermark_lag_and_growth_gauges_come_from_the_batches() -> None:
    run = RESTART[0]
    progress = progress_lines(run)
    obs = replay([run + "/progress.jsonl"]).observer
    record = obs.tracker.snapshot()[0]
    last = progress[-1]
    from spark_state_observer.model.parse import parse_timestamp

    lag = parse_timestamp(last["timestamp"]) - parse_timestamp(last["eventTime"]["watermark"])
    assert record.signal_gauges[(catalog.WATERMARK_LAG, ())] == lag
    growth = {labels: v for (spec, labels), v in record.signal_gauges.items() if spec is catalog.ROWS_GROWTH_RATE}
    assert len(growth) == 2


def test_exception_classes() -> None:
    assert classify_exception("STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE", "...") == "state_schema"
    assert classify_exception(None, "java.lang.OutOfMemoryError: Java heap space") == "out_of_memory"
    assert classify_exception("CANNOT_LOAD_STATE_STORE.UNCATEGORIZED", "") == "checkpoint_corruption"
    # the error classes of Spark 4.1-4.3 (error-conditions.json of the 4.3.0 jar) that say the checkpoint cannot be used
    for error_class in (
        "STREAMING_CHECKPOINT_MISSING_METADATA_FILE",
        "CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED",
        "STATE_STORE_ROW_CHECKSUM_VERIFICATION_FAILED",
        "STATE_STORE_BASE_CHECKPOINT_ID_MISMATCH",
        "CANNOT_LOAD_STATE_STORE.AUTO_SNAPSHOT_REPAIR_FAILED",
        "STATE_REPARTITION_INVALID_CHECKPOINT.LAST_BATCH_FAILED",
        "STREAMING_UNFINISHED_REPARTITION_DETECTED",
    ):
        assert classify_exception(error_class, "") == "checkpoint_corruption", error_class
    assert classify_exception("STATE_STORE_INVALID_CONFIG_AFTER_RESTART", "") == "configuration"
    assert classify_exception(None, "org.apache.kafka.common.errors.TimeoutException") == "source"
    assert classify_exception(None, "ZeroDivisionError") == "other"
    # the query plan Spark appends names the checkpoint location; that alone is no checkpoint problem
    plan = "Exception thrown in awaitResult:\n=== Streaming Query ===\n  checkpointLocation=/tmp/ck]\nCaused by: java.lang.ArithmeticException: / by zero"
    assert classify_exception(None, plan) == "other"


def test_spark35_state_file_errors_are_checkpoint_corruption() -> None:
    """Spark 3.5 has no CANNOT_LOAD_STATE_STORE / CANNOT_READ_*_FILE classes: its state stores throw the messages of
    HDFSBackedStateStoreProvider and StateStoreChangelogReader (strings of the 3.5.8 spark-sql jar), or a bare
    FileNotFoundException under RocksDBFileManager, naming the file. With a checkpoint whose path does not say
    "checkpoint" nothing else tells a corrupt or missing state file from any failure."""
    p = "s3a://warehouse/orders_agg/state/0/3"
    lost = "Job aborted due to stage failure: Task 3 in stage 2.0 failed 4 times, most recent failure: Lost task 3.0 in stage 2.0 (TID 9) (10.0.0.5 executor 1): "
    state = "\tat org.apache.spark.sql.execution.streaming.state."
    missing_delta = (
        f"{lost}java.lang.IllegalStateException: Error reading delta file {p}/12.delta of HDFSStateStoreProvider[id = (op=0,part=3),"
        f"dir = {p}]: {p}/12.delta does not exist\n{state}HDFSBackedStateStoreProvider.updateFromDeltaFile(HDFSBackedStateStoreProvider.scala:461)\n"
        f"Caused by: java.io.FileNotFoundException: No such file or directory: {p}/12.delta\n"
    )
    bad_delta = (
        f"{lost}org.apache.spark.SparkException: Error reading delta file {p}/12.delta of HDFSStateStoreProvider[id = (op=0,part=3),"
        f"dir = {p}]: key size cannot be -559038737.\n\tat org.apache.spark.sql.errors.QueryExecutionErrors$.failedToReadDeltaFileError(QueryExecutionErrors.scala:1)\n"
    )
    bad_snapshot = f"{lost}org.apache.spark.SparkException: Error reading snapshot file {p}/10.snapshot of HDFSStateStoreProvider[id = (op=0,part=3),dir = {p}]: key size cannot be 7\n"
    bad_changelog = (
        f"{lost}org.apache.spark.SparkException: Error reading streaming state file {p}/12.changelog: key size cannot be -559038737\n"
    )
    missing_zip = (
        f"{lost}java.io.FileNotFoundException: No such file or directory: {p}/12.zip\n\tat org.apache.hadoop.fs.s3a.S3AFileSystem.open(S3AFileSystem.java:1)\n"
        f"{state}RocksDBFileManager.unzipToFile(RocksDBFileManager.scala:1)\n{state}RocksDBFileManager.loadCheckpointFromDfs(RocksDBFileManager.scala:1)\n"
    )
    for text in (missing_delta, bad_delta, bad_snapshot, bad_changelog, missing_zip):
        assert classify_exception(None, text) == "checkpoint_corruption", text
    # an S3 file the source cannot find is no state file
    assert (
        classify_exception(None, f"{lost}java.io.FileNotFoundException: No such file or directory: s3a://landing/part-0.parquet\n")
        == "other"
    )
