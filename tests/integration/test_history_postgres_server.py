"""The history on a real PostgreSQL server (tests/support/pg_server.py): concurrent writers, a server stopped mid-run,
a wrong password, the CLI and the browser on it, a large buffer written in parts."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest
from pg_server import PASSWORD, PASSWORD_USER, new_server
from test_history_postgres import PROGRESS, RESTART, Fed, _wait

from conftest import ROOT, eventlog_dir
from spark_state_observer.history.loaders import load_batches, load_events, load_operators, load_queries, load_runs
from spark_state_observer.history.store import HistoryStore
from spark_state_observer.history.url import redact
from spark_state_observer.model.identity import AppContext
from spark_state_observer.model.parse import parse_event
from spark_state_observer.offline.checkpoint.restore import rates_from_history
from spark_state_observer.offline.replay import replay


def _series(n: int, query: str = "0001", run: str = "0001") -> list[dict]:
    """``n`` recorded progress events as consecutive batches of one query and run."""
    base = PROGRESS
    return [
        dict(base[i % len(base)], id=f"{base[0]['id'][:-4]}{query}", runId=f"{base[0]['runId'][:-4]}{run}", batchId=i) for i in range(n)
    ]


# --- a real server ---------------------------------------------------------------------------------------
def _database(postgres) -> str:
    return postgres.create_database(f"t_{uuid.uuid4().hex[:16]}")


def test_concurrent_writers_lose_nothing(postgres) -> None:
    """Ten writers start together on an empty database (the migration runs once, under the advisory
    lock) and write their own query plus one query they all share (the same query row, upserted by all)."""
    url = _database(postgres)
    writers, batches = 10, 60
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            store = HistoryStore(url, app=AppContext(f"app{i}", (("writer", str(i)),), f"app-id-{i}"))
            own = [parse_event("progress", json.dumps(p)) for p in _series(batches, query=f"{i:04d}", run=f"{i:04d}")]
            shared = [parse_event("progress", json.dumps(p)) for p in _series(batches, query="9999", run=f"{100 + i:04d}")]
            start.wait()
            for k in range(batches):
                store.add_event(own[k], time.time())
                store.add_event(shared[k], time.time())
                if k % 7 == 6:
                    store.flush()
            store.flush()
            store.close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    queries = load_queries(url)
    assert len(queries) == writers + 1
    for i in range(writers):
        qid = _series(1, query=f"{i:04d}")[0]["id"]
        frame = load_batches(url, qid, with_progress=True)
        assert sorted(frame.batch_id) == list(range(batches)) and set(frame.app) == {f"app{i}"}
        assert len(load_operators(url, qid)) == batches * len(PROGRESS[0]["stateOperators"])
    shared_id = _series(1, query="9999")[0]["id"]
    assert len(load_runs(url, shared_id)) == writers
    assert len(load_batches(url, shared_id)) == writers * batches
    assert int(queries[queries.query_id == shared_id].runs.iloc[0]) == writers


@pytest.mark.slow
def test_server_stopped_mid_run_loses_nothing_within_the_buffer() -> None:
    """Down at the start, stopped mid-run with a write in flight, stopped again for longer than the
    buffer holds: the caller never waits, everything within the buffer arrives, the rest is counted."""
    server = new_server()
    try:
        server.stop()  # down before the observer starts: its tables do not exist yet either
        fed = Fed(server.url(), history_buffer_rows=400)
        writer = fed.sink.writer
        assert writer is not None
        first, outage, overflow = _series(130)[:10], _series(130)[10:30], _series(130)[30:]
        fed.feed(first)
        assert _wait(lambda: fed.failures > 0) and "not reachable" in writer.error
        server.start()
        assert fed.sink.wait_written(120)  # connected, created the schema, wrote the buffer
        assert len(load_batches(server.url(), first[0]["id"])) == len(first)

        server.stop()  # mid-run: the writer's connection is cut
        failures = fed.failures
        fed.feed(outage)  # returns at once: rows wait in the buffer
        assert _wait(lambda: fed.failures > failures)
        assert "not reachable" in writer.error or "connection failed or was lost" in writer.error
        assert fed.dropped == 0
        server.start()
        assert fed.sink.wait_written(120)  # recovered by itself, with backoff
        assert writer.error is None
        assert sorted(load_batches(server.url(), first[0]["id"]).batch_id) == list(range(30))

        server.stop()
        events_before, signals_before = fed.progress, fed.signals
        fed.feed(overflow)  # more than the buffer holds
        assert fed.dropped > 0
        server.start()
        assert fed.sink.wait_written(120)
        fed.sink.close()
        qid = first[0]["id"]
        stored = sorted(load_batches(server.url(), qid).batch_id)
        stored_signals = len(load_events(server.url(), qid))
        assert stored[:30] == list(range(30))
        kept = stored[30:]
        # the outage's start was kept, in order; a later chunk smaller than the room left may still fit, so the
        # kept batches need not be contiguous: what matters is that each one is stored or counted (below)
        assert kept[0] == 30 and kept == sorted(set(kept)) and set(kept) <= set(range(30, 130)) and 0 < len(kept) < len(overflow)
        offered = fed.progress + fed.signals
        assert fed.dropped == offered - len(stored) - stored_signals  # every event is either stored or counted
        assert fed.progress - events_before > len(kept) and fed.signals >= signals_before
        assert fed.obs.tracker.snapshot()[0].last_progress.batch_id == overflow[-1]["batchId"]  # metrics went on
    finally:
        server.remove()


def test_wrong_password_is_reported_counted_and_never_raised(postgres, caplog) -> None:
    wrong = "not-the-Pa55word"
    url = postgres.url(PASSWORD_USER, wrong)
    caplog.set_level(logging.WARNING, logger="spark_state_observer")
    fed = Fed(url)
    fed.feed(PROGRESS[:4])  # no exception reaches the caller
    writer = fed.sink.writer
    assert _wait(lambda: fed.failures > 0)
    assert "refused the password" in writer.error and wrong not in writer.error
    assert "sso_secret:***@127.0.0.1" in writer.error
    fed.sink.close_timeout = 0.5
    fed.sink.close()  # gives up after its timeout: what was buffered is counted
    assert fed.dropped == fed.progress + fed.signals
    assert any("refused the password" in r.getMessage() for r in caplog.records)
    assert all(wrong not in r.getMessage() for r in caplog.records)

    right = Fed(postgres.url(PASSWORD_USER, PASSWORD))
    right.feed(PROGRESS[:4])
    assert right.sink.wait_written(60) and right.failures == 0
    right.sink.close()
    assert len(load_batches(postgres.url(), PROGRESS[0]["id"])) >= 4


# --- readers: the CLI and the browser on a PostgreSQL history --------------------------------------------
def test_replay_and_inspect_rates_through_the_cli_on_postgresql(postgres) -> None:
    url = postgres.create_database(f"t_{uuid.uuid4().hex[:16]}", owner=PASSWORD_USER)  # written with a password
    proc = subprocess.run(
        [sys.executable, "-m", "spark_state_observer.cli", "replay", *[eventlog_dir(r) for r in RESTART], "--history", url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert PASSWORD not in proc.stdout + proc.stderr and "not written" not in proc.stderr
    qid = PROGRESS[0]["id"]
    assert len(load_batches(url, qid)) == len(PROGRESS)
    rates = rates_from_history(url, qid)  # what `inspect --history` reads
    restores = load_events(url, qid)
    measured = [a for a in restores[restores.kind == "restore"].attributes if a.get("method") == "load_metrics" and a.get("stores")]
    assert (rates is None) == (not measured)


def test_browser_pages_read_a_postgresql_history(postgres, monkeypatch) -> None:
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    from spark_state_observer.browser import fmt

    url = postgres.create_database(f"t_{uuid.uuid4().hex[:16]}", owner=PASSWORD_USER)
    replay([eventlog_dir(r) for r in RESTART], history=url)
    monkeypatch.setenv("SPARK_STATE_OBSERVER_UI_HISTORY", url)
    monkeypatch.setenv("SPARK_STATE_OBSERVER_UI_CHECKPOINT_ROOTS", "")
    for page in ("Queries", "Query drilldown", "Runs", "Partitions"):
        at = AppTest.from_file(os.path.join(ROOT, "spark_state_observer", "browser", "app.py"), default_timeout=120)
        at.query_params["page"] = page
        at.query_params["query"] = PROGRESS[0]["id"]
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        shown = "\n".join(str(e.value) for kind in ("error", "info", "caption", "markdown") for e in at.get(kind))
        assert PASSWORD not in shown and not at.error, shown
        assert len(at.get("vega_lite_chart")) + len(at.dataframe) > 0, page
        if page == "Queries":
            assert f"1 query of all applications in {fmt.code(redact(url))}" in shown and "sso_secret:***@" in redact(url)


def test_a_large_buffer_is_written_in_parts(postgres, monkeypatch) -> None:
    """After an outage the buffer may hold more than one write takes: it goes in several transactions,
    a batch's operator rows possibly after the batch row, and every row arrives once."""
    monkeypatch.setattr("spark_state_observer.history.writer.MAX_ROWS_PER_WRITE", 25)
    url = _database(postgres)
    fed = Fed(url)
    progress = _series(40)
    fed.feed(progress, flush_each=False)
    assert fed.sink.wait_written(120) and fed.failures == 0 and fed.dropped == 0
    fed.sink.close()
    qid = progress[0]["id"]
    assert sorted(load_batches(url, qid).batch_id) == list(range(40))
    operators = load_operators(url, qid)
    assert len(operators) == 40 * len(PROGRESS[0]["stateOperators"]) and not operators.duplicated(["batch_id", "op_index"]).any()
