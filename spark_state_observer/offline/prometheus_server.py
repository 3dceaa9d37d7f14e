"""A real Prometheus server and promtool, run for offline work (the alert backtest).

The backtest evaluates the shipped rules with Prometheus itself rather than with a re-implementation of
PromQL, so what it reports is what a real server would have computed. The server binds to loopback on a
free port, keeps no retention limit (backfilled data is old by design) and is stopped by its own pid.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from spark_state_observer.offline.local_process import free_port, stop_process

BIND_ATTEMPTS = 5  # ports tried when the free one is taken before the server binds it


class PrometheusError(RuntimeError):
    """Prometheus or promtool is missing, failed to start, or answered with an error; the message says which."""


def find_binary(name: str, override: str | None = None) -> str:
    """The path of ``name`` (or of ``override``), or a ``PrometheusError`` that says how to install it."""
    path = shutil.which(override or name)
    if path is None:
        raise PrometheusError(
            f"{override or name} not found on PATH: install Prometheus (Debian/Ubuntu: apt-get install prometheus) or pass --{name} PATH"
        )
    return path


def promtool(args: list[str], binary: str | None = None, timeout: float = 600.0) -> str:
    """Run ``promtool ARGS``; its output, or a ``PrometheusError`` carrying what it printed."""
    cmd = [find_binary("promtool", binary), *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PrometheusError(f"promtool {' '.join(args[:3])} did not finish within {timeout:.0f}s") from None
    if done.returncode != 0:
        raise PrometheusError(f"promtool {' '.join(args[:3])} failed: {(done.stderr or done.stdout).strip()[-2000:]}")
    return done.stdout


class PrometheusServer:
    """``prometheus`` serving the TSDB in ``data_dir`` on 127.0.0.1; use as a context manager."""

    def __init__(
        self,
        data_dir: str,
        work_dir: str,
        binary: str | None = None,
        ready_timeout: float = 60.0,
        scrape_targets: tuple[str, ...] = (),
        scrape_interval: float = 10.0,
    ) -> None:
        """``scrape_targets`` (``host:port``): scraped at ``/metrics`` every ``scrape_interval`` seconds as job
        ``observer`` (benchmarks); without them the server only answers queries."""
        self.data_dir, self._work_dir = data_dir, work_dir
        self._scrape_targets, self._scrape_interval = scrape_targets, scrape_interval
        self._binary = find_binary("prometheus", binary)
        self._ready_timeout = ready_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> PrometheusServer:
        config = os.path.join(self._work_dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1h\n")  # nothing to scrape unless told: it only answers queries
            if self._scrape_targets:
                every = f"{self._scrape_interval:g}s"
                targets = ", ".join(f"'{t}'" for t in self._scrape_targets)
                f.write(
                    f"scrape_configs:\n  - job_name: observer\n    scrape_interval: {every}\n    scrape_timeout: {every}\n"
                    f"    static_configs:\n      - targets: [{targets}]\n"
                )
        # the free port is free when asked, not when Prometheus binds it: another process (a test running beside
        # this one, another server) can take it in between; then Prometheus exits at once, and a new port is tried
        for attempt in range(BIND_ATTEMPTS):
            if self._launch(config, retry=attempt + 1 < BIND_ATTEMPTS):
                return self
        raise PrometheusError(f"prometheus found no free port in {BIND_ATTEMPTS} attempts: {self._log_tail()}")

    def _launch(self, config: str, retry: bool) -> bool:
        """Start the server on a free port: True once ready, False when its port was taken first and ``retry``;
        an exit for any other reason raises, and so does a server that never became ready."""
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = open(os.path.join(self._work_dir, "prometheus.log"), "wb")
        self._log = log
        self._proc = subprocess.Popen(
            [
                self._binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data_dir}",
                "--storage.tsdb.retention.time=100y",
                f"--web.listen-address=127.0.0.1:{port}",
                "--query.lookback-delta=5m",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + self._ready_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                tail = self._log_tail()
                if retry and "address already in use" in tail:
                    log.close()
                    return False
                raise PrometheusError(f"prometheus exited at start: {tail}")
            try:
                urllib.request.urlopen(self.url + "/-/ready", timeout=2).read()
                return True
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.stop()
        raise PrometheusError(f"prometheus did not become ready within {self._ready_timeout:.0f}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self._work_dir, "prometheus.log"), "rb") as f:
                return f.read()[-1500:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc, 15)
        self._proc = None
        if getattr(self, "_log", None) is not None:
            self._log.close()

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """The matrix ``expr`` evaluates to at every ``step`` from ``start`` to ``end`` (Prometheus' own evaluation)."""
        params = urllib.parse.urlencode({"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}s"})
        try:
            body = json.loads(urllib.request.urlopen(f"{self.url}/api/v1/query_range?{params}", timeout=120).read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise PrometheusError(f"query failed ({exc.code}): {expr}: {detail}") from None
        if body.get("status") != "success":
            raise PrometheusError(f"query failed: {expr}: {body.get('error')}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result
