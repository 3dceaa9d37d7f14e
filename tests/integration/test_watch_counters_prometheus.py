"""``increase()`` over a crash loop of many applications, as a real Prometheus evaluates it while scraping ``watch``
(issue 50 item 2).

The recorded crash loop (``tests/fixtures/incidents/crash_loop_503``: five applications on one checkpoint, each
failing in its ``foreachBatch``) is written into the watched folder one application at a time, as Spark wrote
it, a few scrapes apart. The query's counters carry no application id: each application continues the series the
one before wrote, so Prometheus sees one counter that never resets and rises by one restart per application.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from test_query_lifecycle_prometheus import until
from test_watch_counters import SCENARIO, written_until_its_end
from test_watch_restarts import applications

from conftest import need
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.offline.prometheus_server import PrometheusServer
from spark_state_observer.settings import Settings

QUERY = 'query="crash_loop_503"'


@pytest.mark.slow
def test_increase_over_a_crash_loop_of_applications_counts_every_restart(tmp_path: Any) -> None:
    need("prometheus")
    (tmp_path / "logs").mkdir()
    (tmp_path / "prom").mkdir()
    apps = applications(SCENARIO)
    settings = Settings(http_enabled=True, http_host="127.0.0.1", http_port=0, placement="off")
    fleet = FleetObserver([str(tmp_path / "logs")], settings, WatchOptions(), serve=True)
    fleet.start(follow=False)
    try:
        target = f"127.0.0.1:{fleet.http_port}"
        with PrometheusServer(str(tmp_path / "prom"), str(tmp_path), scrape_targets=(target,), scrape_interval=1.0) as prom:

            def now(expr: str) -> list[float]:
                t = time.time()
                return [float(r["values"][-1][1]) for r in prom.query_range(expr, t, t, 1)]

            begun = time.time()
            for n, app in enumerate(apps, 1):  # one application after the other, each scraped a few times
                written_until_its_end(tmp_path, app, fleet)
                assert until(lambda n=n: now(f"spark_streaming_query_starts_total{{{QUERY}}}") == [float(n)])
                time.sleep(2.0)
            window = f"{int(time.time() - begun) + 30}s"
            restarts = now(f"spark_streaming_query_restarts_total{{{QUERY}}}")
            increase = now(f"increase(spark_streaming_query_restarts_total{{{QUERY}}}[{window}])")
            starts = now(f"increase(spark_streaming_query_starts_total{{{QUERY}}}[{window}])")
            resets = now(
                f"resets(spark_streaming_query_restarts_total{{{QUERY}}}[{window}]) + resets(spark_streaming_query_starts_total{{{QUERY}}}[{window}])"
            )
    finally:
        fleet.stop()
    assert restarts == [len(apps) - 1.0]
    assert resets == [0.0]
    # increase() extrapolates a little past the first and last samples; the restarts it sees are the loop's, not 1
    assert len(increase) == 1 and round(increase[0]) == len(apps) - 1, increase
    assert len(starts) == 1 and round(starts[0]) == len(apps) - 1, starts  # the first start is the series' first sample
