"""The history store on recorded real runs, and on databases that are locked, read-only, full or corrupt.

Tests taking the ``history`` fixture run twice: on an SQLite file and on a fresh database of the real
PostgreSQL server the session starts (tests/support/pg_server.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import uuid

import pytest
from recorded_progress import recorded_at

from conftest import REQUIRE_REAL, eventlog_dir, fixture_runs, progress_lines
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.history.loaders import (
    load_batch,
    load_batches,
    load_events,
    load_operators,
    load_partitions,
    load_queries,
    load_runs,
)
from spark_state_observer.history.retention import RetentionPolicy
from spark_state_observer.history.rows import APP_COLUMNS, COLUMNS, RowBuilder
from spark_state_observer.history.schema import MIGRATIONS, POSTGRES_TYPES, SQLITE_TYPES, render
from spark_state_observer.history.sink import HistorySink
from spark_state_observer.history.store import HistoryError, HistoryStore
from spark_state_observer.model.identity import AppContext
from spark_state_observer.model.parse import parse_event
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

RESTART = fixture_runs("rocksdb_restart")


@pytest.fixture(params=["sqlite", "postgresql"])
def history(request, tmp_path) -> str:
    """A new, empty history location on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "h.db")
    return request.getfixturevalue("postgres").create_database(f"t_{uuid.uuid4().hex[:16]}")


def test_replay_writes_a_browsable_history(history) -> None:
    db = history
    replay([eventlog_dir(r) for r in RESTART], history=db)
    queries = load_queries(db)
    assert len(queries) == 1 and queries.runs[0] == 2 and queries.last_outcome[0] == "clean"
    qid = queries.query_id[0]
    progress = progress_lines(RESTART[0]) + progress_lines(RESTART[1])
    batches = load_batches(db, qid)
    assert batches.batch_id.tolist() == [p["batchId"] for p in progress]
    assert batches.duration_ms.tolist() == [p["batchDuration"] for p in progress]
    last = progress[-1]
    assert (
        load_batch(db, qid, last["runId"], last["batchId"])["stateOperators"][1]["numRowsTotal"]
        == last["stateOperators"][1]["numRowsTotal"]
    )
    ops = load_operators(db, qid)
    assert len(ops) == 2 * len(progress) and set(ops.op_name) == {"stateStoreSave", "dedupe"}
    assert len(load_partitions(db, qid)) > 0
    kinds = load_events(db, qid).kind.tolist()
    assert kinds.count("query_started") == 2 and "query_restarted" in kinds and kinds.count("restore") == 2
    runs = load_runs(db, qid)
    assert runs.run_id.tolist() == [progress_lines(r)[0]["runId"] for r in RESTART]
    one_run = load_batches(db, qid, run_id=runs.run_id[1])
    assert len(one_run) == len(progress_lines(RESTART[1]))
    window = load_batches(db, qid, since=batches.ts.iloc[2], until=batches.ts.iloc[4])
    assert window.batch_id.tolist() == batches.batch_id.iloc[2:5].tolist()


def test_reader_is_not_blocked_by_a_writer(tmp_path) -> None:
    db = str(tmp_path / "h.db")
    replay([eventlog_dir(RESTART[0])], history=db)
    writer = sqlite3.connect(db)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("DELETE FROM batches")
    try:
        assert len(load_batches(db, load_queries(db).query_id[0])) == len(progress_lines(RESTART[0]))  # WAL: old snapshot
    finally:
        writer.rollback()
        writer.close()


def _observer_with_history(db: str, app: AppContext | None = None, **settings) -> tuple[PrometheusObserver, HistorySink]:
    obs = PrometheusObserver(Settings(http_enabled=False, **settings), serve=False, live=False)
    sink = HistorySink(db, obs.self_metrics, obs.settings, app=app)
    obs.add_sink(sink)
    return obs, sink


def _relabel(progress: list[dict], n: int, name: str) -> list[dict]:
    """Recorded progress as another query (own id, run ids and name), same batches and times."""
    return [dict(p, id=f"{p['id'][:-4]}{n:04d}", runId=f"{p['runId'][:-4]}{n:04d}", name=name) for p in progress]


def _close(obs: PrometheusObserver, sink: HistorySink) -> None:
    obs.flush()
    sink.close()


def _feed(obs: PrometheusObserver, progress: list[dict]) -> None:
    for p in progress:
        obs.process(CapturedEvent("progress", json.dumps(p), time.time(), 0.0))


def test_locked_database_drops_that_flush_only(tmp_path) -> None:
    db = str(tmp_path / "h.db")
    obs, sink = _observer_with_history(db)
    progress = progress_lines(RESTART[0])
    _feed(obs, progress[:2])
    sink.close()
    obs, sink = _observer_with_history(db)
    locker = sqlite3.connect(db)
    locker.execute("BEGIN EXCLUSIVE")
    _feed(obs, progress[2:4])
    with pytest.raises(HistoryError, match="locked"):
        sink._maybe_flush(force=True)
    assert obs.self_metrics.dropped["history"] > 0
    locker.rollback()
    locker.close()
    _feed(obs, progress[4:])
    sink.close()
    qid = progress[0]["id"]
    kept = load_batches(db, qid).batch_id.tolist()
    assert kept == [p["batchId"] for p in progress[:2] + progress[4:]]  # nothing already written was lost
    assert obs.tracker.snapshot()[0].last_progress.batch_id == progress[-1]["batchId"]  # metrics went on


def test_corrupt_database_turns_history_off_and_metrics_go_on(tmp_path) -> None:
    db = tmp_path / "h.db"
    db.write_bytes(b"this is not a database" * 1000)
    obs, sink = _observer_with_history(str(db))
    assert sink.store is None and "corrupt" in sink.error
    _feed(obs, progress_lines(RESTART[0]))
    assert obs.self_metrics.dropped["history"] == len(progress_lines(RESTART[0]))
    assert obs.tracker.snapshot()[0].last_progress is not None


def test_newer_schema_is_refused_clearly(history) -> None:
    if history.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(history, autocommit=True) as conn:
            conn.execute("CREATE TABLE history_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO history_schema VALUES (99)")
    else:
        conn = sqlite3.connect(history)
        conn.execute("PRAGMA user_version = 99")
        conn.close()
    with pytest.raises(HistoryError, match="newer"):
        store = HistoryStore(history)  # SQLite refuses here; PostgreSQL connects on the first write
        store.add_signal("query_started", "q", "r", 1.0, {})
        store.flush()


def test_retention_by_age(history) -> None:
    db = history
    replay([eventlog_dir(r) for r in RESTART], history=db)
    qid = load_queries(db).query_id[0]
    batches = load_batches(db, qid)
    store = HistoryStore(db, max_age_seconds=1.0)
    store.enforce_retention(now=batches.ts.iloc[5] + 1.0)
    assert load_batches(db, qid).ts.min() >= batches.ts.iloc[5]
    store.close()


@pytest.mark.parametrize("case", ["read a month later", "clock behind the data"])
def test_retention_counts_back_from_the_newest_data_at_most_the_clock(history, case: str) -> None:
    """A log read a month after it was written keeps its last ``max_age``, not nothing; a clock behind the data
    (a driver's clock ahead, a hostile future time) ends the window at the clock. On any day: the clock is injected."""
    progress = progress_lines(RESTART[0]) + progress_lines(RESTART[1])
    ts = [recorded_at(p) for p in progress]
    now = ts[-1] + 30 * 86400.0 if case == "read a month later" else ts[6]
    age = ts[-1] - ts[4]
    store = HistoryStore(history, max_age_seconds=age, clock=lambda: now)
    for p in progress:
        store.add_event(parse_event("progress", json.dumps(p)), now)
    store.flush()
    store.enforce_retention()
    store.close()
    kept = load_batches(history, progress[0]["id"]).ts.tolist()
    assert kept == [t for t in ts if t >= min(now, ts[-1]) - age]
    assert kept[0] == ts[4] if case == "read a month later" else kept[0] < ts[4]


def _mount_tmpfs(path: str, size: str) -> bool:
    os.makedirs(path, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], capture_output=True)
    if result.returncode != 0:
        if REQUIRE_REAL:
            pytest.fail(f"cannot mount a tmpfs: {result.stderr.decode()}")
        pytest.skip("mounting a tmpfs needs root")
    return True


def test_full_filesystem_is_reported_and_earlier_rows_kept(tmp_path) -> None:
    mnt = str(tmp_path / "small")
    _mount_tmpfs(mnt, "2m")  # room for the empty schema's 32 KiB pages, not for the rows below
    try:
        db = os.path.join(mnt, "h.db")
        obs, sink = _observer_with_history(db)
        big = progress_lines(RESTART[0]) * 60
        failures = 0
        for i in range(0, len(big), 3):
            _feed(obs, big[i : i + 3])
            try:
                sink._maybe_flush(force=True)
            except HistoryError as exc:
                assert "full" in str(exc)
                failures += 1
        assert failures > 0 and obs.self_metrics.dropped["history"] > 0
        assert obs.tracker.snapshot()[0].last_progress is not None
        sink.store.close()
        assert len(load_batches(db, big[0]["id"])) > 0
    finally:
        subprocess.run(["umount", "-l", mnt])


def test_read_only_filesystem_gives_a_clear_message(tmp_path) -> None:
    mnt = str(tmp_path / "ro")
    _mount_tmpfs(mnt, "4m")  # room for a small history in 32 KiB pages
    try:
        db = os.path.join(mnt, "h.db")
        replay([eventlog_dir(RESTART[0])], history=db)
        subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
        obs, sink = _observer_with_history(db)
        _feed(obs, progress_lines(RESTART[1]))
        assert sink.store is None or sink.error is None
        if sink.store is not None:
            with pytest.raises(HistoryError, match="read-only"):
                sink._maybe_flush(force=True)
        else:
            assert "read-only" in sink.error or "cannot be opened" in sink.error
        assert len(load_batches(db, progress_lines(RESTART[0])[0]["id"])) == len(progress_lines(RESTART[0]))
    finally:
        subprocess.run(["umount", "-l", mnt])


def test_rows_carry_the_application_identity(history) -> None:
    progress = progress_lines(RESTART[0])
    app = AppContext(
        "payments",
        (
            ("cluster", "eu-1"),
            ("env", "prod"),
        ),
        "app-20260101-0001",
    )
    obs, sink = _observer_with_history(history, app=app)
    _feed(obs, progress)
    sink.store.add_signal("stalled", progress[0]["id"], progress[0]["runId"], recorded_at(progress[-1]), {})  # at the recording's time
    _close(obs, sink)
    qid = progress[0]["id"]
    queries = load_queries(history)
    assert queries.query_id.tolist() == [qid]
    for frame in (
        load_batches(history, qid, with_progress=True),
        load_operators(history, qid),
        load_partitions(history, qid),
        load_events(history, qid),
        load_runs(history, qid),
    ):
        assert set(frame.app) == {"payments"} and set(frame.app_id) == {"app-20260101-0001"}
        if "app_labels" in frame:
            assert {json.dumps(json.loads(x), sort_keys=True) for x in frame.app_labels} == {'{"cluster": "eu-1", "env": "prod"}'}


def _create_old(history: str, rows: RowBuilder, version: int) -> None:
    """A database at an older schema ``version`` holding ``rows``, as the observers of that version wrote it."""
    pending = rows.take()
    tables = {t: list(pending.facts.get(t, [])) for t in ("batches", "operators", "partitions", "events")}
    tables["queries"], tables["runs"] = list(pending.queries.values()), pending.run_rows()
    if history.startswith("postgresql://"):
        import psycopg

        conn = psycopg.connect(history, autocommit=True)
        script = "; ".join(render(i, POSTGRES_TYPES) for i in range(version))
        script += f"; CREATE TABLE history_schema (version INTEGER NOT NULL); INSERT INTO history_schema VALUES ({version})"
        mark = "%s"
    else:
        conn = sqlite3.connect(history, isolation_level=None)
        script, mark = "; ".join(render(i, SQLITE_TYPES) for i in range(version)) + f"; PRAGMA user_version = {version}", "?"
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)
    for table, table_rows in tables.items():
        cols = [c for c in COLUMNS[table] if version > 1 or c not in APP_COLUMNS[table]]
        for row in table_rows:
            conn.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(mark for _ in cols)})", row[: len(cols)])
    conn.close()


def test_migration_from_version_1_keeps_the_old_rows(history) -> None:
    old, new = progress_lines(RESTART[0]), progress_lines(RESTART[1])
    builder = RowBuilder()
    for p in old:
        builder.add_event(parse_event("progress", json.dumps(p)), time.time())
    builder.add_signal("query_started", old[0]["id"], old[0]["runId"], 1.0, {})
    _create_old(history, builder, 1)
    obs, sink = _observer_with_history(history, app=AppContext("payments"))
    _feed(obs, new)
    _close(obs, sink)
    assert sink.error is None and not obs.self_metrics.dropped.get("history")
    qid = old[0]["id"]
    batches = load_batches(history, qid, with_progress=True)
    assert batches.batch_id.tolist() == [p["batchId"] for p in old + new]
    assert batches.app.isna().tolist() == [True] * len(old) + [False] * len(new)  # old rows kept, with no app
    assert len(load_operators(history, qid)) == 2 * len(old + new)
    assert load_runs(history, qid).run_id.tolist() == [old[0]["runId"], new[0]["runId"]]


def test_retention_per_application_and_query(history) -> None:
    progress = progress_lines(RESTART[0]) + progress_lines(RESTART[1])
    payments = _relabel(progress, 1, "pay_ledger") + _relabel(progress, 2, "pay_audit")
    noisy = _relabel(progress, 3, "noisy_counts")
    for app, feed in (("payments", payments), ("noisy", noisy)):
        obs, sink = _observer_with_history(history, app=AppContext(app))
        _feed(obs, feed)
        _close(obs, sink)
    ts = load_batches(history, payments[0]["id"]).ts.tolist()
    now = ts[-1] + 1.0
    settings = f"app:noisy={now - ts[7]},query:pay_ledger=1e9"
    store = HistoryStore(history, max_age_seconds=now - ts[4], retention=RetentionPolicy.parse(now - ts[4], settings))
    store.enforce_retention(now=now)
    store.close()
    kept = {p[0]["name"]: load_batches(history, p[0]["id"]).ts.tolist() for p in (payments[:1], payments[len(progress) :], noisy)}
    assert kept["pay_ledger"] == ts  # its own entry: kept in full
    assert kept["pay_audit"] == ts[4:]  # the default age
    assert kept["noisy_counts"] == ts[7:]  # its application's age
    assert load_operators(history, noisy[0]["id"]).ts.min() >= ts[7]
    assert load_partitions(history, payments[len(progress)]["id"]).ts.min() >= ts[4]


def test_writers_opening_a_new_file_together_migrate_it_once(tmp_path) -> None:
    db = str(tmp_path / "h.db")
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def open_and_write(i: int) -> None:
        try:
            start.wait()
            store = HistoryStore(db)
            store.add_signal("query_started", f"q{i}", f"r{i}", float(i), {})
            store.flush()
            store.close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_and_write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert sorted(load_events(db).query_id) == [f"q{i}" for i in range(8)]
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def _schema_version(history: str) -> int:
    if history.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(history) as conn:
            return conn.execute("SELECT MAX(version) FROM history_schema").fetchone()[0]
    return sqlite3.connect(history).execute("PRAGMA user_version").fetchone()[0]


def test_migration_from_version_3_rekeys_operator_and_partition_rows(history, tmp_path) -> None:
    """A history written by schema 3 (operator and partition rows keyed by batch, a (query, ts) index beside)
    is rebuilt keyed by (query, ts, ...): every row kept, a batch written again replaces its rows."""
    old, new = progress_lines(RESTART[0]), progress_lines(RESTART[1])
    builder = RowBuilder(AppContext("payments"))
    for p in old:
        builder.add_event(parse_event("progress", json.dumps(p)), time.time())
    _create_old(history, builder, 3)
    fresh = str(tmp_path / "fresh.db")  # the same events written by this version from the start
    for db in (history, fresh):
        obs, sink = _observer_with_history(db, app=AppContext("payments"))
        _feed(obs, old[-2:] + new)  # two batches written again, then the second run
        _close(obs, sink)
        assert sink.error is None and not obs.self_metrics.dropped.get("history")
    qid, rerun = old[0]["id"], new[0]["runId"]
    assert _schema_version(history) == len(MIGRATIONS)
    assert load_batches(history, qid).batch_id.tolist() == [p["batchId"] for p in old + new]
    operators = load_operators(history, qid)
    assert len(operators) == 2 * len(old + new)
    assert operators[["run_id", "batch_id", "op_index"]].duplicated().sum() == 0
    partitions = load_partitions(history, qid)
    expected = sum(1 for p in old + new for op in p["stateOperators"] for k in op["customMetrics"] if k.startswith("SnapshotLastUploaded"))
    assert len(partitions) == expected > 0
    assert len(load_operators(history, qid, run_id=rerun)) == 2 * len(new)
    assert load_partitions(history, qid, run_id=rerun).ts.tolist() == load_partitions(fresh, qid, run_id=rerun).ts.tolist()
    if not history.startswith("postgresql://"):
        conn = sqlite3.connect(history)
        tables = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
        assert "WITHOUT ROWID" in tables["operators"] and "WITHOUT ROWID" in tables["partitions"]
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert not names & {"operators_query_ts", "partitions_query_ts"}


def test_progress_without_a_timestamp_written_twice_keeps_one_set_of_rows(history) -> None:
    """Such a batch is stamped with its arrival, which differs the second time: the operator and partition
    rows at the first stamp go, as the batch row is replaced."""
    progress = [{k: v for k, v in p.items() if k != "timestamp"} for p in progress_lines(RESTART[0])[:3]]
    for _ in range(2):
        obs, sink = _observer_with_history(history)
        _feed(obs, progress)
        _close(obs, sink)
        time.sleep(0.01)
    qid = progress[0]["id"]
    batches = load_batches(history, qid)
    assert len(batches) == 3
    operators, partitions = load_operators(history, qid), load_partitions(history, qid)
    assert len(operators) == 2 * 3 and set(operators.ts) == set(batches.ts)
    assert len(partitions) == 4 * 3 and set(partitions.ts) == set(batches.ts)


def test_rows_committed_before_a_kill_are_kept_though_not_checkpointed(tmp_path) -> None:
    """Flushes only append to the write-ahead log (checkpoints run on their own thread, every 20,000 rows):
    a writer killed before any checkpoint or close loses none of its committed rows."""
    db = str(tmp_path / "h.db")
    progress = progress_lines(RESTART[0])
    script = f"""
import json, os, signal, sys, time
from spark_state_observer.history.store import HistoryStore
from spark_state_observer.model.parse import parse_event
store = HistoryStore({db!r})
for line in json.loads(sys.stdin.read()):
    store.add_event(parse_event("progress", json.dumps(line)), time.time())
    store.flush()
print(os.path.getsize({db!r} + "-wal"), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.run([sys.executable, "-c", script], input=json.dumps(progress), capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == -9, proc.stderr
    assert int(proc.stdout.split()[0]) > 0  # the rows were in the log, not yet in the file
    qid = progress[0]["id"]
    assert load_batches(db, qid).batch_id.tolist() == [p["batchId"] for p in progress]
    assert len(load_operators(db, qid)) == 2 * len(progress)
