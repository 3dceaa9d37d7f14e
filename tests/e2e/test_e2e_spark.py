"""End to end on real Spark: queries attached through the public API, scraped over HTTP."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

import spark_state_observer as observer
from checks import assert_matches_progress
from conftest import ROOT, eventlog_dir, run_script
from inspect_checks import assert_inspector_matches_files
from spark_state_observer.cli.demo import HDFS, ROCKSDB, dedup_window_query, unbounded_query
from spark_state_observer.history.loaders import load_batches
from spark_state_observer.offline import state_reader
from spark_state_observer.offline.checkpoint import inspect_checkpoint
from spark_state_observer.offline.checkpoint.restore import DEFAULT_BYTES_PER_SECOND, DEFAULT_SECONDS_PER_FILE, DEFAULT_SECONDS_PER_STORE
from spark_state_observer.offline.replay import replay

pytestmark = pytest.mark.slow


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.25)


def batches(query) -> int:  # type: ignore[no-untyped-def]
    alive(query)
    return len(query.recentProgress)


def alive(query) -> bool:  # type: ignore[no-untyped-def]
    """True while the query runs; a query that died fails the test with Spark's exception."""
    if not query.isActive and query.exception() is not None:
        raise AssertionError(f"query {query.name} failed: {query.exception()}")
    return True


def drained(obs, terminations: int = 1) -> None:  # type: ignore[no-untyped-def]
    """Wait until Spark's listener bus delivered the terminations (it is asynchronous), then flush."""
    wait_for(lambda: obs.self_metrics.received["terminated"] >= terminations, 60, "the terminated events")
    assert obs.flush()


def progress_json(query) -> list[dict]:  # type: ignore[no-untyped-def]
    return [json.loads(p.json) if hasattr(p, "_jdict") else p for p in query.recentProgress]


def test_rocksdb_query_scraped_equals_its_progress(spark, tmp_path) -> None:
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    handle = observer.attach(spark, http_port=0)
    try:
        query = dedup_window_query(spark, str(tmp_path / "ck"), name="e2e_rocksdb")
        wait_for(lambda: batches(query) >= 5, 180, "5 batches")
        query.stop()
        drained(handle.observer)
        text = urllib.request.urlopen(handle.url, timeout=10).read().decode()
        progress = progress_json(query)
        assert_matches_progress(text, progress)
        assert 'spark_state_operator_info{app="spark-state-observer-demo",operator="dedupe",operator_index="1",provider="rocksdb"' in text
        assert_inspector_matches_files(str(tmp_path / "ck"), progress[-1]["batchId"])
        # the history was written while the query ran, and holds what Spark reported
        recorded = load_batches(handle.observer.settings.history_path, progress[-1]["id"], run_id=progress[-1]["runId"])
        assert recorded.batch_id.tolist() == [p["batchId"] for p in progress]
        # the state itself, through Spark's state readers (4.0+): the rows the query holds
        if tuple(int(x) for x in spark.version.split(".")[:2]) < (4, 0):
            with pytest.raises(state_reader.StateReaderUnavailable, match=r"Spark 4\.0"):
                state_reader.operators(spark, str(tmp_path / "ck"))
            return
        ops = state_reader.operators(spark, str(tmp_path / "ck"))
        assert sorted(o["operatorName"] for o in ops) == ["dedupe", "stateStoreSave"]
        per_partition = state_reader.rows_per_partition(spark, str(tmp_path / "ck"), operator_id=1)
        assert sum(per_partition.values()) == progress[-1]["stateOperators"][1]["numRowsTotal"]
        page = state_reader.sample(spark, str(tmp_path / "ck"), operator_id=0, limit=3)
        assert len(page) == min(3, progress[-1]["stateOperators"][0]["numRowsTotal"]) and "key" in page[0]["key"]
        wanted = str(page[0]["key"]["key"])
        found = state_reader.sample(spark, str(tmp_path / "ck"), operator_id=0, key_contains=f'"key":{wanted}', limit=50)
        assert found and all(r["key"]["key"] == page[0]["key"]["key"] for r in found)
        changes = state_reader.change_feed(spark, str(tmp_path / "ck"), start_batch=1, operator_id=1, limit=20)
        assert changes and {c["change_type"] for c in changes} <= {"update", "delete"}
        received = handle.observer.self_metrics.received
        assert received["progress"] == len(query.recentProgress) and received["started"] == 1 and received["terminated"] == 1
        # the fast path: one JVM call per event, so the callback costs milliseconds, not PySpark's ~0.5 s
        callback = handle.observer.self_metrics.callback
        assert callback.sum / sum(callback.counts) < 0.1
    finally:
        handle.stop()


def test_hdfs_query_through_the_listener_class(spark, tmp_path) -> None:
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", HDFS)
    listener = observer.StateObserverListener(http_port=0)
    spark.streams.addListener(listener)
    try:
        query = dedup_window_query(spark, str(tmp_path / "ck"), name="e2e_hdfs")
        wait_for(lambda: batches(query) >= 4, 180, "4 batches")
        query.stop()
        drained(listener.observer)
        text = urllib.request.urlopen(listener.observer.server.url, timeout=10).read().decode()
        assert_matches_progress(text, progress_json(query))
        assert 'provider="hdfs"' in text
        assert_inspector_matches_files(str(tmp_path / "ck"), progress_json(query)[-1]["batchId"])
    finally:
        spark.streams.removeListener(listener)
        listener.observer.stop()
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)


def test_a_blocked_sink_is_reported_as_stalled(spark, tmp_path) -> None:
    release = threading.Event()
    seen: list[int] = []

    def sink(df, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        df.count()  # Spark 4.3 fails a batch whose foreachBatch did not read its data (state commit validation)
        seen.append(batch_id)
        if len(seen) == 4:
            release.wait(120)  # the sink hangs, as a stuck external system would

    handle = observer.attach(spark, http_port=0, stall_min_seconds=4, stall_factor=3)
    stalls: list = []
    handle.on("stalled", stalls.append)
    try:
        df = spark.readStream.format("rate").option("rowsPerSecond", 20).load().groupBy("value").count()
        query = (
            df.writeStream.foreachBatch(sink)
            .outputMode("update")
            .queryName("e2e_stall")
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(processingTime="1 second")
            .start()
        )
        wait_for(lambda: alive(query) and len(seen) >= 4, 180, "the sink to block")
        blocked_at = time.monotonic()
        wait_for(lambda: bool(stalls), 60, "a stalled signal")
        assert time.monotonic() - blocked_at < 30
        assert stalls[0].query == "e2e_stall" and stalls[0].attributes["seconds_without_progress"] >= 4
        text = urllib.request.urlopen(handle.url, timeout=10).read().decode()
        assert (
            'spark_streaming_query_stalled{app="spark-state-observer-demo",query="e2e_stall"' in text
            and "} 1.0" in text.split("spark_streaming_query_stalled{")[1]
        )
        release.set()
        wait_for(lambda: any(e.kind == "stall_recovered" for e in handle.signals), 60, "recovery")
        query.stop()
    finally:
        release.set()
        handle.stop()


def test_bounded_and_unbounded_state_are_told_apart(spark, tmp_path) -> None:
    handle = observer.attach(spark, http_port=0, growth_window_seconds=40, growth_min_batches=8)
    try:
        bounded = dedup_window_query(spark, str(tmp_path / "b"), name="e2e_bounded", rows_per_second=40)
        unbounded = unbounded_query(spark, str(tmp_path / "u"), name="e2e_unbounded", rows_per_second=40)
        verdicts: dict[str, dict] = {}

        def judged() -> bool:
            for e in handle.signals:
                if e.kind in ("state_unbounded", "state_bounded"):
                    verdicts.setdefault(e.query, {})[e.attributes["operator"]] = e.kind
            return "e2e_unbounded" in verdicts and len(verdicts.get("e2e_bounded", {})) == 2

        wait_for(judged, 240, "growth verdicts for both queries")
        handle.flush()
        bounded.stop()
        unbounded.stop()
        assert verdicts["e2e_unbounded"] == {"stateStoreSave": "state_unbounded"}
        assert set(verdicts["e2e_bounded"].values()) == {"state_bounded"}
        text = urllib.request.urlopen(handle.url, timeout=10).read().decode()
        assert (
            'spark_state_unbounded{app="spark-state-observer-demo",operator="stateStoreSave",operator_index="0",query="e2e_unbounded"'
            in text
        )
    finally:
        handle.stop()


@pytest.mark.slow
def test_a_watcher_following_the_restart_live_says_what_replay_says(restarted_run, tmp_path) -> None:
    """The same two processes, followed by a watcher while they ran: the restart's downtime, the restores, every
    signal with its time and the browser's verdicts equal replay's of the same logs (``restarted_run`` runs the
    watcher)."""
    from test_fleet import parse, value
    from test_watch_restart_costs import placements, signals

    from spark_state_observer.browser import data
    from spark_state_observer.settings import Settings

    replayed_history = str(tmp_path / "replay.db")
    result = replay([eventlog_dir(run) for run in restarted_run["runs"]], Settings(http_enabled=False), history=replayed_history)
    live, replayed = signals(restarted_run["watch_history"]), signals(replayed_history)
    assert live == replayed
    (restart,) = [json.loads(attrs) for kind, _, _, attrs in live if kind == "query_restarted"]
    assert restart["downtime_seconds"] > 0 and restart["gap_since_previous_run_seconds"] == restart["downtime_seconds"]
    assert [kind for kind, _, _, _ in live].count("restore") >= 1
    name = "spark_streaming_query_last_downtime_seconds"
    watched = value(parse(restarted_run["watch_exposition"]), name)
    assert watched == pytest.approx(restart["downtime_seconds"], abs=1e-3)
    assert watched == pytest.approx(value(parse(result.exposition()), name), abs=1e-3)
    assert placements(restarted_run["watch_history"]) == placements(replayed_history)
    query_id = next(e.query_id for e in result.observer.signals.recent if e.kind == "query_restarted")
    now = max(ts for _, _, ts, _ in live) + 1.0
    said = {
        path: [v.text for v in data.query_verdicts(path, data.token(path), query_id, now)]
        for path in (restarted_run["watch_history"], replayed_history)
    }
    assert said[restarted_run["watch_history"]] == said[replayed_history]
    assert any("down" in text for text in said[replayed_history]), said


@pytest.mark.slow
def test_a_watcher_that_never_saw_the_first_run_gives_the_listeners_downtime(restarted_run) -> None:
    """Started after the first process ended, the watcher reads the second one's log only: the restart's downtime is
    then the listener's in that process, from the checkpoint's last commit (its plans name the checkpoint)."""
    from test_fleet import parse, value

    from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
    from spark_state_observer.settings import Settings

    run2 = restarted_run["runs"][1]
    fleet = FleetObserver([eventlog_dir(run2)], Settings(http_enabled=False), WatchOptions(read_finished_at_start=True), serve=False)
    for _ in range(3):
        fleet.poll_once()
    watched = value(parse(fleet.exposition().decode()), "spark_streaming_query_last_downtime_seconds")
    fleet.stop()
    with open(os.path.join(run2, "signals.jsonl")) as f:
        restart = next(s for s in map(json.loads, f) if s["kind"] == "query_restarted")["attributes"]
    assert restart["gap_since_previous_run_seconds"] is None and restart["downtime_seconds"] > 0  # the listener's, from the checkpoint
    assert watched == pytest.approx(restart["downtime_seconds"], abs=1e-3)


def test_restart_in_a_new_process(restarted_run) -> None:
    """Two processes on one checkpoint: the second one's observer reports the restart and the restore."""
    run1, run2 = restarted_run["runs"]
    before = inspect_checkpoint(restarted_run["before"])  # the checkpoint as the first process left it
    with open(os.path.join(run2, "signals.jsonl")) as f:
        live = [json.loads(line) for line in f]
    restart = next(s for s in live if s["kind"] == "query_restarted")
    assert restart["attributes"]["downtime_seconds"] > 0
    restores = [s for s in live if s["kind"] == "restore"]
    assert restores
    for r in restores:
        a = r["attributes"]
        if a["method"] == "load_metrics":  # Spark's own load time, taken only above 0 ms
            assert a["duration_seconds"] > 0
        else:  # an estimate: above 0, or (the restart batch no slower than the next, on a busy machine) unknown and said so
            assert a["duration_seconds"] > 0 if a["duration_seconds"] is not None else a["duration_unknown"], a
    replayed = replay([eventlog_dir(run1), eventlog_dir(run2)]).observer.signals.recent
    assert [e.kind for e in replayed if e.kind in ("query_restarted", "restore")] == ["query_restarted", "restore", "restore"]
    # the inspector's restore estimate, made before the restart, against the restore Spark measured
    measured = next((r for r in restores if r["attributes"]["method"] == "load_metrics"), None)
    if measured is None:  # Spark 3.5 and 4.0 report no load metric: nothing to compare with
        assert all(r["attributes"]["method"] == "residual_estimate" for r in restores)
        return
    op_index = measured["attributes"]["operator_index"]
    estimate = sum(
        DEFAULT_SECONDS_PER_STORE + p.restore.replay_files * DEFAULT_SECONDS_PER_FILE + p.restore.bytes / DEFAULT_BYTES_PER_SECOND
        for op in before.operators
        if op.operator_id == op_index
        for p in op.partitions
    )
    ratio = estimate / measured["attributes"]["duration_seconds"]
    print(f"restore estimate {estimate:.2f}s vs measured {measured['attributes']['duration_seconds']:.2f}s: ratio {ratio:.2f}")
    # the measured load swings ~10x with this shared machine's load: the bound only catches nonsense;
    # the ratio itself is reported (README, closing notes)
    assert 0.1 < ratio < 10


def test_the_restarts_restore_is_told_live_on_the_observers_thread(restarted_run) -> None:
    """The second process restores the first's state while its observer polls the driver (its UI on): each state
    operator's ``restore_started``, then progress or the finish, then ``restore_finished`` reach ``handle.on`` on
    the observer's worker thread (never Spark's), with every partition done and a duration within the batch's."""
    run2 = restarted_run["runs"][1]
    with open(os.path.join(run2, "signals.jsonl")) as f:
        live = [json.loads(line) for line in f]
    with open(os.path.join(run2, "progress.jsonl")) as f:
        first = json.loads(f.readline())  # the restoring batch: the run's first
    restores = [s for s in live if s["kind"] in ("restore_started", "restore_progress", "restore_finished")]
    assert {s["thread"] for s in restores} == {"spark-state-observer-worker"}
    assert {s["attributes"]["batch_id"] for s in restores} == {first["batchId"]}
    operators = {s["attributes"]["operator_index"] for s in restores}
    assert len(operators) == len(first["stateOperators"])
    for index in operators:
        told = [s for s in restores if s["attributes"]["operator_index"] == index]
        assert told[0]["kind"] == "restore_started" and told[-1]["kind"] == "restore_finished"
        assert [s["kind"] for s in told].count("restore_finished") == 1 and len(told) >= 2
        assert all(s["attributes"]["reason"] == "restart" for s in told)
        end = told[-1]["attributes"]
        assert end["complete"] is True and end["partitions_done"] == end["partitions_total"] > 0
        assert 0 < end["duration_seconds"] <= first["durationMs"]["triggerExecution"] / 1000.0
        assert all(s["received"] >= s["timestamp"] for s in told)  # told after it happened
    # the restore listener object (handle.add_restore_listener) was called once per event, on the same thread
    with open(os.path.join(run2, "restore_listener.jsonl")) as f:
        calls = [json.loads(line) for line in f]
    method = {"restore_started": "on_restore_start", "restore_progress": "on_restore_progress", "restore_finished": "on_restore_end"}
    assert [c["method"] for c in calls] == [method[s["kind"]] for s in restores]
    assert {c["thread"] for c in calls} == {"spark-state-observer-worker"}


def test_executor_loss_in_local_cluster(executor_loss_run) -> None:
    out = executor_loss_run
    with open(os.path.join(out, "signals.jsonl")) as f:
        live = [json.loads(line) for line in f]
    kill = next(i for i, s in enumerate(live) if s["kind"] == "test_killed_executor")
    after = [s["kind"] for s in live[kill:]]
    assert "executor_removed" in after and "store_reload" in after
    removed = next(s for s in live[kill:] if s["kind"] == "executor_removed")
    assert removed["attributes"]["executor_id"] == "1"
    replayed = [e.kind for e in replay([eventlog_dir(out)]).observer.signals.recent]
    assert "executor_removed" in replayed and "store_reload" in replayed


def test_incompatible_state_schema_on_restart_is_classified(spark, tmp_path) -> None:
    from pyspark.sql import functions as F

    handle = observer.attach(spark, http_port=0)
    try:
        ck = str(tmp_path / "ck")
        spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "false")
        source = spark.readStream.format("rate").option("rowsPerSecond", 10).load()
        first = (
            source.groupBy((F.col("value") % 3).alias("k"))
            .count()
            .writeStream.format("noop")
            .outputMode("update")
            .queryName("e2e_schema")
            .option("checkpointLocation", ck)
            .trigger(processingTime="1 second")
            .start()
        )
        wait_for(lambda: batches(first) >= 2, 120, "2 batches")
        first.stop()
        spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        assert_inspector_matches_files(ck, progress_json(first)[-1]["batchId"])  # RocksDB without changelog: zips only
        # the same checkpoint, but the state key is now a string: Spark refuses the old state
        second = (
            source.groupBy((F.col("value") % 3).cast("string").alias("k"))
            .agg(F.sum("value").alias("s"))
            .writeStream.format("noop")
            .outputMode("update")
            .queryName("e2e_schema")
            .option("checkpointLocation", ck)
            .trigger(processingTime="1 second")
            .start()
        )
        wait_for(lambda: not second.isActive, 120, "the query to fail")
        drained(handle.observer, terminations=2)
        ended = [e for e in handle.signals if e.kind == "query_terminated" and e.attributes["outcome"] == "exception"]
        assert len(ended) == 1
        assert ended[0].attributes["exception_class"] == "state_schema", ended[0].attributes
        text = urllib.request.urlopen(handle.url, timeout=10).read().decode()
        assert (
            'spark_streaming_query_terminations_by_class_total{app="spark-state-observer-demo",exception_class="state_schema",query="e2e_schema"'
            in text
        )
        assert 'spark_streaming_query_status{app="spark-state-observer-demo",query="e2e_schema"' in text
        # the listener's lifecycle state, by the rule replay and the watcher use (spark_state_observer.model.query_lifecycle)
        lifecycle = {
            s.labels["state"]: s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "spark_streaming_query_lifecycle" and s.labels["query"] == "e2e_schema"
        }
        assert lifecycle == {"running": 0, "idle": 0, "stopped": 0, "scheduled": 0, "failed": 1, "crash_looping": 0, "lost": 0}
    finally:
        handle.stop()


def test_ten_concurrent_queries_with_restarts_and_an_executor_loss(tmp_path) -> None:
    """local-cluster: every query's metrics equal its own progress (both runs for the restarted ones)."""
    out = str(tmp_path / "many")
    run_script([os.path.join(ROOT, "scripts", "many_queries_job.py"), "--out", out], timeout=900)
    with open(os.path.join(out, "metrics.prom")) as f:
        text = f.read()
    for name in (f"q{i:02d}" for i in range(10)):
        with open(os.path.join(out, "progress", f"{name}.jsonl")) as f:
            progress = [json.loads(line) for line in f]
        assert_matches_progress(text, progress)
    with open(os.path.join(out, "signals.jsonl")) as f:
        signals = [json.loads(line) for line in f]
    restarted = {s["query_id"] for s in signals if s["kind"] == "query_restarted"}
    assert len(restarted) == 2
    assert any(s["kind"] == "executor_removed" for s in signals)
