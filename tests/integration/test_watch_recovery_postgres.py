"""A real PostgreSQL down while the watcher stops: nothing is lost once both restart."""

from __future__ import annotations

from typing import Any

import pytest
from growth_recording import APP
from pg_server import new_server
from test_fleet import Watch
from test_watch_recovery import GrowingLog, _batches, _exactly_once, _failures, _no_traceback, _wait_rows, quiet  # noqa: F401  (quiet: the module's fixture)

pytestmark = pytest.mark.slow


def _postgres_rows(url: str) -> dict[str, Any]:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            ids = [r[0] for r in conn.execute("SELECT batch_id FROM batches WHERE app = %s ORDER BY batch_id", (APP,))]
            events, distinct = conn.execute(
                "SELECT count(*), count(DISTINCT (query_id, run_id, ts, kind, attributes)) FROM events WHERE app = %s", (APP,)
            ).fetchone()
    except psycopg.Error:  # down, or the tables are not there yet
        return {"batch_ids": [], "events": 0, "distinct_events": 0}
    return {"batch_ids": ids, "events": events, "distinct_events": distinct}


def test_postgresql_down_while_the_watcher_stops_loses_nothing_after_both_restart(tmp_path, quiet) -> None:
    server = new_server()  # a private server: this test stops it
    logs = tmp_path / "logs"
    logs.mkdir()
    log = GrowingLog(str(logs))
    watch: Watch | None = None
    try:
        url = server.url()
        args = ("--history", url, "--state-file", str(tmp_path / "state.json"))
        rows = lambda: _postgres_rows(url)  # noqa: E731
        watch = Watch(str(tmp_path), [str(logs)], *args)
        log.grow(15)
        watch.wait("the first batches", lambda s: _batches(s) == 15)
        _wait_rows(rows, "the first batches", lambda r: len(r["batch_ids"]) == 15, watch)

        server.stop()
        failed = _failures(watch.metrics())
        log.grow(30)
        watch.wait("a failed write", lambda s: _batches(s) == 30 and _failures(s) > failed)
        assert watch.stop() == 0  # its buffer is counted lost at shutdown; its positions stay at batch 15
        _no_traceback(watch)
        assert "not written at shutdown" in watch.stderr()

        server.start()
        watch = Watch(str(tmp_path), [str(logs)], *args)
        log.grow(log.total)
        watch.wait("the whole log", lambda s: _batches(s) == log.total)
        final = _wait_rows(rows, "every batch", lambda r: len(r["batch_ids"]) >= log.total, watch)
        assert watch.stop() == 0
        _no_traceback(watch)
        _exactly_once(final, log.total)
        _exactly_once(rows(), log.total)
    finally:
        if watch is not None and watch.proc.poll() is None:
            watch.proc.kill()
            watch.proc.wait(30)
        server.remove()
