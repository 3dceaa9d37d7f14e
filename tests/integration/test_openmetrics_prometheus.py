"""A counter born at its final value: a real Prometheus with created timestamps counts its rise (issue 51).

One Prometheus scrapes the exporter twice: once asking for OpenMetrics (``params: {format: [openmetrics]}``),
once as before (text format 0.0.4). Every progress event of a recorded run arrives between two scrapes, so
``spark_streaming_batches_total`` first shows at its final value. Run with
``--enable-feature=created-timestamp-zero-ingestion``, Prometheus stores a 0 at the counter's ``_created``
time for the OpenMetrics job, and ``increase()`` sees the batches; for the text job it reads 0, as before.

The feature reads created timestamps from OpenMetrics text since Prometheus 3; Debian 12's 2.42 does not
have it. ``SPARK_STATE_OBSERVER_TEST_PROMETHEUS`` names a binary that does (else ``prometheus`` on the path);
``scripts/build_prometheus.sh`` builds one from its Go module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import REQUIRE_REAL, Server, fixture_runs, free_port, progress_lines, prom_query
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.settings import Settings

RUN = next(progress_lines(run) for run in fixture_runs() if run.endswith("rocksdb_restart/run1"))


def _prometheus_with_created_timestamps() -> str:
    """A Prometheus binary of major version 3 or later; skip (or fail, where real parts are required) without one."""
    binary = os.environ.get("SPARK_STATE_OBSERVER_TEST_PROMETHEUS") or shutil.which("prometheus") or ""
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout if binary else ""
    found = re.search(r"version (\d+)\.", version)
    if found is None or int(found.group(1)) < 3:
        message = f"Prometheus 3 or later is needed for created timestamps from OpenMetrics (found: {version.splitlines()[:1] or 'none'})"
        if REQUIRE_REAL and os.environ.get("SPARK_STATE_OBSERVER_TEST_PROMETHEUS"):
            pytest.fail(message)
        pytest.skip(message)
    return binary


def _increase(prom: Server, job: str) -> list[dict]:
    return prom_query(prom, f'increase(spark_streaming_batches_total{{job="{job}"}}[5m])')


@pytest.mark.slow
def test_a_counter_born_at_its_final_value_shows_its_increase(tmp_path) -> None:
    binary = _prometheus_with_created_timestamps()
    obs = PrometheusObserver(Settings(http_port=0), live=False).start()
    port = free_port()
    config = tmp_path / "prometheus.yml"
    target = json.dumps([f"127.0.0.1:{obs.http_port}"])
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
        f"  - job_name: openmetrics\n    params: {{format: [openmetrics]}}\n    static_configs:\n      - targets: {target}\n"
        f"  - job_name: text\n    static_configs:\n      - targets: {target}\n"
    )
    prom = Server(
        [
            binary,
            "--enable-feature=created-timestamp-zero-ingestion",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        f"http://127.0.0.1:{port}/-/ready",
    )
    try:
        deadline = time.monotonic() + 30
        while len(prom_query(prom, "up == 1")) < 2 and time.monotonic() < deadline:  # both jobs scraped the empty exporter
            time.sleep(0.5)
        assert len(prom_query(prom, "up == 1")) == 2
        for p in RUN:  # every batch between two scrapes: the counter's first sample is its final value
            obs.submit(CapturedEvent("progress", json.dumps(p), time.time(), 0.0))
        assert obs.flush()
        result: dict[str, list[dict]] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            result = {job: _increase(prom, job) for job in ("openmetrics", "text")}
            if all(result.values()) and float(result["openmetrics"][0]["value"][1]) > 0:
                break
            time.sleep(0.5)
        assert result["text"] and float(result["text"][0]["value"][1]) == 0  # as before: no earlier sample, no rise
        assert result["openmetrics"] and float(result["openmetrics"][0]["value"][1]) >= len(RUN) * 0.5, result
        # the _created lines become creation times, not series of their own
        assert prom_query(prom, '{__name__=~"spark_streaming_batches_created"}') == []
    finally:
        prom.stop()
        obs.stop()
