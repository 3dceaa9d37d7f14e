"""SparkStreamingQueryFailed, as a real Prometheus evaluates it while scraping a watcher (issue 26 point 1).

The watcher follows a recorded job that failed (``tests/fixtures/incidents/restart_fail_at_start``, run 2: it
fails at start) and forgets its application at once (grace 0): the application's own series go stale, but the
generated alert's expression still finds the failed query. A later run of the same query (run 1's recording,
four batches) ends it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from test_query_lifecycle import follow, watcher
from test_watch_restarts import applications

from conftest import need
from spark_state_observer.mixin.config import MixinConfig
from spark_state_observer.mixin.rules import alerting_rules
from spark_state_observer.offline.prometheus_server import PrometheusServer

QUERY = "restart_fail_at_start"


def until(check: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Whether ``check`` holds within ``timeout`` (scrapes come every second: a few are enough)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return False


@pytest.mark.slow
def test_a_failed_query_keeps_firing_after_the_watcher_forgot_its_application(tmp_path: Any) -> None:
    need("prometheus")
    (tmp_path / "logs").mkdir()
    (tmp_path / "prom").mkdir()
    good, failing = applications()[:2]
    fleet = watcher(tmp_path, serve=True, http_enabled=True, http_host="127.0.0.1", http_port=0)
    fleet.start(follow=False)
    failed_expr = next(r["expr"] for r in alerting_rules(MixinConfig()) if r["alert"] == "SparkStreamingQueryFailed")
    try:
        target = f"127.0.0.1:{fleet.http_port}"
        with PrometheusServer(str(tmp_path / "prom"), str(tmp_path), scrape_targets=(target,), scrape_interval=1.0) as prom:

            def now(expr: str) -> list[str]:
                t = time.time()
                return [r["metric"].get("query", "") for r in prom.query_range(expr, t, t, 1)]

            follow(tmp_path, fleet, [failing])  # its application is gone already: only the lasting state is left
            assert until(lambda: now(failed_expr) == [QUERY])
            assert now(f'spark_streaming_query_status{{query="{QUERY}"}}') == []  # the application's series are stale
            follow(tmp_path, fleet, [good])  # the same query runs again in a new application
            assert until(lambda: now(failed_expr) == [])
    finally:
        fleet.stop()
