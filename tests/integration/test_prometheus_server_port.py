"""The local Prometheus (backtest, dashboards' checks) survives its port being taken before it binds it."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from conftest import need
from spark_state_observer.offline import prometheus_server
from spark_state_observer.offline.local_process import free_port
from spark_state_observer.offline.prometheus_server import PrometheusServer


@pytest.mark.slow
def test_a_port_taken_between_asking_and_binding_is_followed_by_another(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process takes the free port first (as a second test process did in CI): the real server exits on
    ``address already in use``; the next port is tried and the server answers there."""
    need("prometheus")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    ports = iter([taken.getsockname()[1]])
    monkeypatch.setattr(prometheus_server, "free_port", lambda: next(ports, None) or free_port())
    try:
        with PrometheusServer(str(tmp_path / "data"), str(tmp_path)) as prom:
            assert not prom.url.endswith(f":{taken.getsockname()[1]}")
            t = time.time()
            (series,) = prom.query_range("vector(1)", t - 60, t, 60)
            assert float(series["values"][-1][1]) == 1.0
    finally:
        taken.close()
