"""The watcher with real servers: a PostgreSQL history survives the watcher's kill, an OTLP receiver gets each application's identity."""

from __future__ import annotations

import signal
import time
import uuid

from test_fleet import Watch, _batches, _lines, _write, value, watches  # noqa: F401  (watches: the module's fixture)

from bench.eventlog_writer import ProgressiveLog, renamed
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.history.loaders import load_batches, load_queries
from spark_state_observer.settings import Settings


def test_a_watcher_killed_while_postgresql_holds_its_rows_loses_none(tmp_path, watches: list[Watch], postgres) -> None:
    """The background writer had rows in hand (a table lock held them) when the watcher was killed: the saved
    positions must not cover them, so the next watcher reads and writes them again."""
    import psycopg

    history = postgres.create_database(f"w_{uuid.uuid4().hex[:16]}")
    logs = tmp_path / "logs"
    logs.mkdir()
    state = str(tmp_path / "positions.json")
    args = ("--state-file", state, "--history", history, "--poll-interval", "0.2")
    expected = _batches("rocksdb_restart")
    log = ProgressiveLog(str(logs), "app-orders-1", "zstd", max_file_bytes=40_000)
    steps = log.steps(renamed(_lines("rocksdb_restart"), "orders", "app-orders-1"), split=True)
    first = Watch(str(tmp_path), [str(logs)], *args)
    watches.append(first)

    def written() -> int:
        with psycopg.connect(history, autocommit=True) as c:
            exists = c.execute("SELECT to_regclass('batches') IS NOT NULL").fetchone()[0]
            return c.execute("SELECT COUNT(*) FROM batches").fetchone()[0] if exists else 0

    for _ in steps:  # until the first rows are in the database
        if written():
            break
        time.sleep(0.05)
    lock = psycopg.connect(history)
    lock.execute("LOCK TABLE batches IN ACCESS EXCLUSIVE MODE")  # the writer's next write waits behind it
    held = None
    try:
        for _ in steps:
            seen = value(first.metrics(), "spark_streaming_batches_total", app="orders") or 0
            if seen >= expected // 2:
                held = seen
                break
            time.sleep(0.05)
        assert held is not None, "the watcher never saw half of the batches"
        time.sleep(2.0)  # several polls: the old watcher saved its positions here, past the rows held back
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    finally:
        lock.rollback()
        lock.close()
    written_before = written()
    assert written_before < held, (written_before, held)  # rows were held back when it died
    for _ in steps:
        pass
    log.finish()
    second = Watch(str(tmp_path), [str(logs)], *args)
    watches.append(second)
    second.wait("every batch", lambda s: value(s, "spark_state_observer_watch_applications", status="finished") == 1)
    assert second.stop() == 0
    queries = load_queries(history)
    assert len(load_batches(history, queries.query_id[0])) == expected  # none lost, none written twice


def test_otlp_export_carries_each_applications_identity(tmp_path) -> None:
    """Each followed application exports over OTLP with its own resource; what it logged before a restart is not sent again."""
    from otlp_receiver import HttpReceiver

    logs = tmp_path / "logs"
    logs.mkdir()
    receiver = HttpReceiver()
    try:
        fleet = FleetObserver(
            [str(logs)],
            Settings.from_env(labels="cluster=a", otlp_endpoint=receiver.endpoint, otlp_timeout_seconds=5),
            WatchOptions(grace_seconds=3600),
            serve=False,
        )
        fleet.poll_once()
        _write(str(logs), "rocksdb_restart", "orders", "app-orders-1")
        _write(str(logs), "hdfs", "payments", "app-payments-1")
        fleet.poll_once()
        fleet.stop()  # flushes the exporters
    finally:
        receiver.stop()
    points = receiver.received.metric_points()
    resources = {p["resource"]["spark.app.name"]: p["resource"] for p in points}
    assert set(resources) == {"orders", "payments"}
    assert resources["orders"]["spark.app.id"] == "app-orders-1" and resources["orders"]["cluster"] == "a"
    assert resources["orders"]["service.name"] == "orders"
    batches = [p for p in points if p["name"] == "spark.streaming.batches" and p["resource"]["spark.app.name"] == "orders"]
    assert batches and batches[-1]["attributes"]["spark.app.name"] == "orders" and batches[-1]["value"] == _batches("rocksdb_restart")
    records = receiver.received.log_records()
    assert records and {r["resource"]["spark.app.name"] for r in records} == {"orders", "payments"}
