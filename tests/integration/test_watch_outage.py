"""``watch --history postgresql://...`` while PostgreSQL goes away and comes back.

A real PostgreSQL server (tests/support/pg_server.py, its own one: it is stopped and started) holds the history of
a ``watch`` process following a recorded event log (tests/fixtures, 59 batches of a growing state) that
keeps growing as Spark writes it (``bench.eventlog_writer``). The server is stopped twice mid-run: once for
less than the history buffer holds (nothing may be lost), once for more (what does not fit is dropped and
counted in ``spark_state_observer_events_dropped_total{reason="history"}``). Through both outages the
watcher keeps following the log and serving ``/metrics``, and says what is wrong without a traceback.
"""

from __future__ import annotations

import glob
import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any

import pytest
from growth_recording import APP, APP_ID, SCENARIO, _progress_cuts
from pg_server import new_server
from test_fleet import Series, Watch, value

from bench.eventlog_writer import ProgressiveLog, recorded_lines, renamed

pytestmark = pytest.mark.slow

# history rows held while the database is away: one batch here is about six rows (batch, operator, two
# partitions, two placements), so the first outage's batches fit and the second's do not
BUFFER_ROWS = 100
FIRST, OUTAGE, OVERFLOW = 12, 8, 34  # progress events written before, during the short and during the long outage


def _batches(series: Series) -> float:
    return value(series, "spark_streaming_batches_total", app=APP) or 0.0


def _dropped(series: Series) -> float:
    return value(series, "spark_state_observer_events_dropped_total", reason="history") or 0.0


def _failures(series: Series) -> float:
    return value(series, "spark_state_observer_export_failures_total", exporter="history") or 0.0


def _stored(url: str) -> dict[str, Any]:
    """What the database holds: batch ids, and how many batch and event rows are duplicates of another."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            batch_ids = [r[0] for r in conn.execute("SELECT batch_id FROM batches WHERE app = %s ORDER BY batch_id", (APP,))]
            events, distinct_events = conn.execute(
                "SELECT count(*), count(DISTINCT (query_id, run_id, ts, kind, attributes)) FROM events WHERE app = %s", (APP,)
            ).fetchone()
    except psycopg.Error:  # down, or the watcher has not created its tables yet
        return {"batch_ids": [], "events": 0, "distinct_events": 0}
    return {"batch_ids": batch_ids, "events": events, "distinct_events": distinct_events}


def _wait_stored(url: str, what: str, check: Callable[[dict[str, Any]], bool], watch: Watch, timeout: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    stored = _stored(url)
    while not check(stored):
        assert watch.proc.poll() is None, f"watch exited with {watch.proc.returncode}: {watch.stderr()[-2000:]}"
        if time.monotonic() > deadline:
            pytest.fail(
                f"timed out waiting for {what} in PostgreSQL (has {len(stored['batch_ids'])} batches); watcher log:\n{watch.stderr()[-3000:]}"
            )
        time.sleep(0.5)
        stored = _stored(url)
    return stored


def test_a_postgresql_outage_loses_nothing_within_the_buffer_and_counts_the_rest(tmp_path, monkeypatch) -> None:
    lines = renamed(recorded_lines(glob.glob(os.path.join(SCENARIO, "*", "events_*"))[0]), APP, APP_ID)
    cuts = _progress_cuts(lines)
    assert len(cuts) >= FIRST + OUTAGE + OVERFLOW + 3, "the recorded log is shorter than the test needs"
    total = len(cuts)
    server = new_server()  # a private server: this test stops it (fails rather than skips under REQUIRE_REAL=1)
    watches: list[Watch] = []
    try:
        url = server.url()
        logs = tmp_path / "logs"
        logs.mkdir()
        monkeypatch.setenv("SPARK_STATE_OBSERVER_HISTORY_BUFFER_ROWS", str(BUFFER_ROWS))
        # the test's pauses (waiting out the writer's backoff) are no stalls: both watchers derive the same signals
        monkeypatch.setenv("SPARK_STATE_OBSERVER_STALL_MIN_SECONDS", "86400")
        watch = Watch(str(tmp_path), [str(logs)], "--history", url, "--labels", "cluster=a")
        # the same log followed into a local SQLite history, which is never away: every row the watcher offers
        reference_db = tmp_path / "reference.db"
        reference = Watch(str(tmp_path), [str(logs)], "--history", f"sqlite:///{reference_db}", "--labels", "cluster=a")
        watches += [watch, reference]
        reference.wait(
            "the reference's endpoint", lambda s: value(s, "spark_state_observer_watch_applications", status="running") is not None
        )
        watch.wait("the endpoint", lambda s: value(s, "spark_state_observer_watch_applications", status="running") is not None)
        log = ProgressiveLog(str(logs), APP_ID, "zstd", max_file_bytes=2_000_000)
        written = 0  # progress events in the log so far

        def grow(upto: int) -> Series:
            """The log grows batch by batch up to its ``upto``-th progress event, each seen by the watcher
            before the next is written (so the history is offered rows poll by poll, as in a live run)."""
            nonlocal written
            series: Series = {}
            for n in range(written + 1, upto + 1):
                for _ in log.steps(lines[cuts[n - 2] if n > 1 else 0 : cuts[n - 1]]):
                    pass
                written = n
                series = watch.wait(f"batch {n}", lambda s, n=n: _batches(s) == n)
            return series

        # running normally: every batch reaches the database
        grow(FIRST)
        _wait_stored(url, "the first batches", lambda st: len(st["batch_ids"]) == FIRST, watch)

        # a short outage: the log goes on growing, the watcher goes on serving, the rows wait in the buffer
        server.stop()
        failures_before = _failures(watch.metrics())
        grow(FIRST + OUTAGE)
        series = watch.wait("a failed write", lambda s: _failures(s) > failures_before)
        assert _dropped(series) == 0
        server.start()
        stored = _wait_stored(url, "the outage's batches", lambda st: len(st["batch_ids"]) == FIRST + OUTAGE, watch)
        assert stored["batch_ids"] == list(range(FIRST + OUTAGE))  # none lost, none twice, in the log's batch ids
        assert _dropped(watch.metrics()) == 0

        # a long outage: more than the buffer holds arrives; what does not fit is dropped and counted
        server.stop()
        series = grow(FIRST + OUTAGE + OVERFLOW)
        dropped_during_outage = _dropped(series)
        assert dropped_during_outage > 0
        server.start()

        # back: the buffer goes in one transaction (its first batch there means all of it is), then what the log adds
        _wait_stored(url, "the long outage's kept batches", lambda st: FIRST + OUTAGE in st["batch_ids"], watch)
        grow(total)
        stored = _wait_stored(url, "the last batch", lambda st: st["batch_ids"][-1:] == [total - 1], watch)
        series = watch.metrics()
        assert _batches(series) == total  # the pipeline never stopped: every progress event counted once
        assert _dropped(series) == dropped_during_outage  # nothing dropped once the database was back

        batch_ids = stored["batch_ids"]
        assert batch_ids == sorted(set(batch_ids)), "a batch row was written twice"
        assert stored["events"] == stored["distinct_events"], "a signal row was written twice"
        assert batch_ids[: FIRST + OUTAGE] == list(range(FIRST + OUTAGE))  # both outages' starts kept
        long_outage = range(FIRST + OUTAGE, FIRST + OUTAGE + OVERFLOW)
        kept = [b for b in batch_ids if b in long_outage]
        lost = len(long_outage) - len(kept)
        assert kept and kept[0] == FIRST + OUTAGE and lost > 0  # the outage's start fitted, its end did not
        # each lost batch is counted (the counter also holds the signals that were dropped with them)
        assert lost <= dropped_during_outage
        assert batch_ids[-(total - FIRST - OUTAGE - OVERFLOW) :] == list(range(FIRST + OUTAGE + OVERFLOW, total))

        assert watch.stop() == 0
        err = watch.stderr()
        assert "Traceback" not in err, err[-3000:]
        assert err.count("is writable again") == 2  # each outage and its end were said, once
        assert "rows stay buffered and are retried" in err

        # every progress event and signal the watcher offered is either in PostgreSQL or counted as dropped
        reference.wait("the reference's last batch", lambda s: _batches(s) == total)
        assert reference.stop() == 0  # flushed and closed
        with sqlite3.connect(reference_db) as conn:
            offered_batches = conn.execute("SELECT count(*) FROM batches WHERE app = ?", (APP,)).fetchone()[0]
            offered_signals = conn.execute("SELECT count(*) FROM events WHERE app = ?", (APP,)).fetchone()[0]
        assert offered_batches == total
        assert len(batch_ids) + stored["events"] + dropped_during_outage == offered_batches + offered_signals
    finally:
        for w in watches:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait(30)
        server.remove()
