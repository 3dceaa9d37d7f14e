"""The PostgreSQL history on a real server: many writers, a server that stops, refuses or never answers.

The history URL's parsing and redaction are checked here too. Servers come from tests/support/pg_server.py
(the session's, or a private one for the test that stops and restarts it).
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from conftest import fixture_runs, progress_lines
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.history.sink import HistorySink
from spark_state_observer.history.url import HistoryURLError, parse, redact, scrub
from spark_state_observer.model.identity import AppContext
from spark_state_observer.settings import Settings

RESTART = fixture_runs("rocksdb_restart")
PROGRESS = progress_lines(RESTART[0]) + progress_lines(RESTART[1])


def _wait(condition, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Fed:
    """An observer with a history sink, counting the events it hands the sink (progress and signals)."""

    def __init__(self, url: str, **settings) -> None:
        self.obs = PrometheusObserver(Settings(http_enabled=False, **settings), serve=False, live=False)
        self.sink = HistorySink(url, self.obs.self_metrics, self.obs.settings, app=AppContext("fed"))
        self.obs.add_sink(self.sink)
        self.signals = 0
        self.progress = 0
        self.obs.on("*", self._count)

    def _count(self, _signal) -> None:
        self.signals += 1

    def feed(self, progress: list[dict], flush_each: bool = True) -> None:
        for p in progress:
            self.obs.process(CapturedEvent("progress", json.dumps(p), time.time(), 0.0))
            self.progress += 1
            if flush_each:
                self.sink.flush()  # one hand-over per event: the buffer fills event by event

    @property
    def dropped(self) -> int:
        return self.obs.self_metrics.dropped.get("history", 0)

    @property
    def failures(self) -> int:
        return self.obs.self_metrics.export_failures.get("history", 0)


# --- URLs ------------------------------------------------------------------------------------------------
def test_history_locations_are_parsed() -> None:
    assert parse("history.db") == parse("sqlite:///history.db")
    assert parse("sqlite:///history.db").location == "history.db"
    assert parse("sqlite:////var/lib/h.db").location == "/var/lib/h.db"
    assert parse("/var/lib/h.db").kind == "sqlite"
    pg = parse("postgres://obs:pw@db.example:6432/history?sslmode=require")
    assert pg.kind == "postgresql" and pg.location == "postgresql://obs:pw@db.example:6432/history?sslmode=require"
    for bad, says in (
        ("mysql://u@h/db", "unknown history scheme"),
        ("postgresql://u:pw@h:port/db", "port is not a number"),
        ("postgresql://u:pw@h:5432/", "needs a database name"),
        ("sqlite://", "without a file path"),
        ("postgresql:///db", "needs a host"),
    ):
        with pytest.raises(HistoryURLError, match=says) as caught:
            parse(bad)
        assert "pw" not in str(caught.value).replace("postgresql", "")


def test_passwords_are_redacted() -> None:
    url = "postgresql://obs:hunter2@db:5432/history?sslmode=require&password=other"
    assert redact(url) == "postgresql://obs:***@db:5432/history?sslmode=require&password=***"
    assert redact("postgresql://obs@db/history") == "postgresql://obs@db/history"
    assert redact("/plain/path.db") == "/plain/path.db"
    assert parse(url).display == redact(url)
    message = scrub(f"failed for {url}: server said hunter2 and other", url)
    assert "hunter2" not in message and "other" not in message and "obs:***@db" in message


def test_a_bad_url_turns_history_off_with_a_clear_message() -> None:
    fed = Fed("mysql://obs:hunter2@db/history")
    assert fed.sink.store is None and "unknown history scheme" in fed.sink.error and "hunter2" not in fed.sink.error
    fed.feed(PROGRESS[:3])
    assert fed.dropped == 3 and fed.obs.tracker.snapshot()[0].last_progress is not None


def test_a_server_that_never_answers_times_out() -> None:
    """A listener that accepts TCP connections and never speaks: the connect times out on the writer's
    thread, the caller goes on."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"postgresql://obs:hunter2@127.0.0.1:{silent.getsockname()[1]}/history?connect_timeout=2"
        fed = Fed(url)
        fed.feed(PROGRESS[:3])
        writer = fed.sink.writer
        assert _wait(lambda: fed.failures > 0)
        assert "did not answer in time" in writer.error and "hunter2" not in writer.error
        assert writer.buffered_rows > 0 and fed.dropped == 0  # kept for the retry
        fed.sink.close_timeout = 0.1
        fed.sink.close()
        assert fed.dropped == fed.progress + fed.signals
