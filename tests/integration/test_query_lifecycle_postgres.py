"""A query's lasting state in a shared PostgreSQL history: restored by a watcher started again, ended by ``retire``.

The same recorded job as tests/unit/test_query_lifecycle.py (``restart_fail_at_start``: four applications, one
query, a crash loop), on the session's real PostgreSQL server (tests/support/pg_server.py).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from test_query_lifecycle import QUERY, follow, states, watcher
from test_watch_restarts import applications

from spark_state_observer.cli.main import main
from spark_state_observer.model import query_lifecycle as life

pytestmark = pytest.mark.slow


def test_the_crash_loop_is_restored_from_postgresql_and_retired_there(postgres: Any, tmp_path: Any, capsys: Any) -> None:
    url = postgres.create_database(f"t_{uuid.uuid4().hex[:16]}")
    (tmp_path / "logs").mkdir()
    first = watcher(tmp_path, history=url)
    follow(tmp_path, first, applications())
    first.stop()
    second = watcher(tmp_path, history=url)
    second.poll_once()
    assert states(second.exposition().decode()) == {QUERY: {life.CRASH_LOOPING}}
    assert main(["retire", QUERY, "--history", url]) == 0
    assert "it was crash_looping" in capsys.readouterr().out
    second.statuses.sync_seconds = 0
    second.poll_once()
    assert states(second.exposition().decode()) == {}
    second.stop()
