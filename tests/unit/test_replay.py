"""Replay gives what the live run gave, and what Spark reported: checked on recorded real runs."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from checks import assert_matches_progress, samples
from conftest import FIXTURES, ROOT, eventlog_dir, fixture_runs, progress_lines
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import PLACEMENT_METRICS
from spark_state_observer.offline.replay import replay

EXECUTOR_CAPACITY = tuple(s for s in catalog.CAPACITY_METRICS if s.scope == "app")
WITH_BATCHES = [r for r in fixture_runs() if progress_lines(r)]  # the failed restart has none


@pytest.mark.parametrize("run", WITH_BATCHES, ids=lambda r: os.path.relpath(r, FIXTURES))
def test_replaying_the_event_log_gives_the_live_metrics(run: str) -> None:
    with open(os.path.join(run, "metrics.prom")) as f:
        live = samples(f.read())
    replayed = _as_recorded(samples(replay([eventlog_dir(run)]).exposition()))
    live = {key: value for key, value in live.items() if key[0] not in _CHANGED_SINCE_RECORDING}
    # the recordings ran with Spark's UI off: no placement live; replay adds it from the task events (test_placement_pipeline.py)
    placement = {s.prometheus_name for s in PLACEMENT_METRICS + EXECUTOR_CAPACITY}  # capacity per executor follows placement
    replayed = {k: v for k, v in replayed.items() if k[0] not in placement}
    assert len(live) > 50
    assert replayed.keys() == live.keys()
    for key, value in live.items():
        assert replayed[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key


# These fixtures' live metrics were recorded before issue 12 added two counters, re-derived the restore
# duration of double-load operators (tested on tests/fixtures/incidents) and renamed one exception class,
# and before issue 30 gave every store instance a snapshot lag (never-uploaded ones too) and the operators
# their snapshot health (tested on tests/fixtures/snapshot_health), and before issue 26 added the lifecycle
# state set (tested on tests/fixtures/incidents: test_query_lifecycle.py), and before session 11 set the schedule
# gauge at every restart and session 13 the latest start at every start (tested on tests/fixtures/incidents:
# test_scheduled_runs.py), and before session 14 followed the rows the watermark drops (test_late_rows.py),
# and before the Kafka lag growth judgement became a gauge (test_alerts_backtest.py, test_kafka_incidents.py);
# everything else must match exactly.
_CHANGED_SINCE_RECORDING = {
    catalog.STATE_TASK_RETRIES.name + "_total",
    catalog.LOAD_LATENCY_ANOMALIES.name + "_total",
    catalog.LAST_RESTORE_DURATION.name,
    catalog.SNAPSHOT_LAG_BATCHES.name,
    catalog.SNAPSHOT_MAX_LAG_BATCHES.name,
    catalog.SNAPSHOT_INSTANCES_NEVER_UPLOADED.name,
    catalog.SNAPSHOT_INSTANCES_UNKNOWN.name,
    catalog.SNAPSHOT_INSTANCES_LAGGING.name,
    catalog.QUERY_LIFECYCLE.name,
    catalog.QUERY_SCHEDULED.name,
    catalog.QUERY_LAST_START.name,
    catalog.LATE_ROWS_SHARE.name,
    catalog.LATE_ROWS_DROPPING.name,
    catalog.WATERMARK_AHEAD.name,
    catalog.KAFKA_LAG_GROWING.name,
}
_RENAMED_LABELS = {("exception_class", "state_schema"): ("exception_class", "state_schema_incompatible")}


def _as_recorded(replayed: dict[tuple[str, tuple], float]) -> dict[tuple[str, tuple], float]:
    return {
        (name, tuple(_RENAMED_LABELS.get(label, label) for label in labels)): value
        for (name, labels), value in replayed.items()
        if name not in _CHANGED_SINCE_RECORDING
    }


@pytest.mark.parametrize("run", WITH_BATCHES, ids=lambda r: os.path.relpath(r, FIXTURES))
def test_metrics_equal_the_progress_json(run: str) -> None:
    """Gauges are the last batch's values; counters the sum over batches (all in recentProgress)."""
    assert_matches_progress(replay([os.path.join(run, "progress.jsonl")]).exposition(), progress_lines(run), checkpoint_listed=False)


def test_restart_in_a_new_process_gives_restart_and_restore_live_and_in_replay() -> None:
    runs = fixture_runs("rocksdb_restart")
    # live: the second process saw its query restart from the checkpoint
    with open(os.path.join(runs[1], "signals.jsonl")) as f:
        live = [json.loads(line) for line in f]
    kinds = [s["kind"] for s in live]
    assert "query_restarted" in kinds and "restore" in kinds
    restart = next(s for s in live if s["kind"] == "query_restarted")
    assert restart["attributes"]["downtime_seconds"] > 0
    restores = [s for s in live if s["kind"] == "restore"]
    assert {r["attributes"]["operator"] for r in restores} == {"dedupe", "stateStoreSave"}
    assert all(r["attributes"]["duration_seconds"] > 0 for r in restores)
    dedupe = next(r for r in restores if r["attributes"]["operator"] == "dedupe")
    assert dedupe["attributes"]["method"] == "load_metrics"
    # replay of both processes' event logs finds the same restart
    result = replay([eventlog_dir(r) for r in runs])
    replayed = [e for e in result.observer.signals.recent if e.kind in ("query_restarted", "restore")]
    assert [e.kind for e in replayed] == ["query_restarted", "restore", "restore"]
    assert replayed[0].attributes["downtime_seconds"] > 0
    first_batch_run2 = progress_lines(runs[1])[0]["batchId"]
    assert all(e.attributes["batch_id"] == first_batch_run2 for e in replayed[1:])
    assert (
        next(e for e in replayed if e.attributes.get("operator") == "dedupe").attributes["duration_seconds"]
        == dedupe["attributes"]["duration_seconds"]
    )


def test_a_restart_the_checkpoint_refuses_is_a_classified_failure_live_and_in_replay() -> None:
    runs = fixture_runs("schema_failure")
    with open(os.path.join(runs[1], "signals.jsonl")) as f:
        live = [json.loads(line) for line in f]
    (ended,) = [s for s in live if s["kind"] == "query_terminated"]
    assert ended["attributes"]["outcome"] == "exception"
    assert ended["attributes"]["exception_class"] == "state_schema_incompatible"  # recorded before issue 12's classes
    assert ended["attributes"]["error_class"].startswith("STREAMING_STATEFUL_OPERATOR_NOT_MATCH")
    result = replay([eventlog_dir(r) for r in runs])
    got = samples(result.exposition())
    qid = progress_lines(runs[0])[0]["id"]
    labels = (("exception_class", "state_schema"), ("query", "demo_dedup_window"), ("query_id", qid))
    assert got[("spark_streaming_query_terminations_by_class_total", labels)] == 1
    status = {k[1]: v for k, v in got.items() if k[0] == "spark_streaming_query_status"}
    assert status[(("query", "demo_dedup_window"), ("query_id", qid), ("status", "failed"))] == 1


def test_cli_replay_prints_prometheus_text() -> None:
    run = fixture_runs("hdfs")[0]
    out = subprocess.run(
        [sys.executable, "-m", "spark_state_observer.cli", "replay", eventlog_dir(run), "--format", "prometheus"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    names = {f.name for f in text_string_to_metric_families(out)}
    assert {"spark_state_rows", "spark_state_hdfs_loaded_map_cache_misses", "spark_streaming_batches"} <= names


def test_cli_replay_of_garbage_fails_clearly(tmp_path) -> None:
    bad = tmp_path / "garbage.jsonl"
    bad.write_text("this is not json\n")
    proc = subprocess.run([sys.executable, "-m", "spark_state_observer.cli", "replay", str(bad)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1 and "not valid JSON" in proc.stderr


def test_replay_events_format_is_one_json_object_per_signal(capsys) -> None:
    """``replay --format events``: machine-readable signals with kind, time, query, ids and attributes."""
    import json as _json

    from spark_state_observer.cli.main import main

    runs = sorted(glob.glob(os.path.join(FIXTURES, "schema_failure", "run*", "eventlog", "*")))
    assert main(["replay", "--format", "events", *runs]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    events = [_json.loads(line) for line in lines]
    assert [e["kind"] for e in events if e["kind"] in ("query_started", "query_terminated")] == [
        "query_started",
        "query_terminated",
        "query_started",
        "query_terminated",
    ]
    for e in events:
        assert set(e) >= {"kind", "time", "timestamp", "query", "query_id", "run_id", "attributes"}
        assert e["time"].endswith("Z") and e["query"] == "demo_dedup_window"
    failed = [e for e in events if e["kind"] == "query_terminated" and e["attributes"]["outcome"] == "exception"]
    assert len(failed) == 1 and failed[0]["attributes"]["exception_class"] == "state_schema"
    assert "STREAMING_STATEFUL_OPERATOR_NOT_MATCH" in failed[0]["attributes"]["root_cause"]
    # runs end after they start
    times = [e["timestamp"] for e in events if e["kind"] in ("query_started", "query_terminated")]
    assert times == sorted(times)
