"""The demo a new user runs first: it starts, serves metrics, and stops cleanly on Ctrl-C (issue 15)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import ROOT, free_port, need


@pytest.mark.slow
def test_the_demo_serves_metrics_and_stops_cleanly_on_ctrl_c(tmp_path) -> None:
    need("java")
    port = free_port()
    env = dict(os.environ, SPARK_STATE_OBSERVER_HISTORY_PATH=str(tmp_path / "history.db"), PYTHONPATH=ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_state_observer.cli", "demo", "--port", str(port), "--duration", "600"],
        cwd=str(tmp_path),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 480  # a first stateful batch can take minutes on a loaded 2-core machine
        body = ""
        while time.monotonic() < deadline and "spark_streaming_batches_total" not in body:
            time.sleep(1)
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                continue
        assert "spark_streaming_batches_total" in body, "the demo never served a batch"
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group, the JVM included
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err[-2000:]
    assert "spark-state-observer demo: stopped" in out
    assert "query_terminated" in out and "outcome=clean" in out
    assert " ERROR " not in err and "Traceback" not in err, err[-2000:]
