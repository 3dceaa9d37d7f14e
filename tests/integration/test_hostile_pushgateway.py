"""A real Pushgateway keeps hostile grouping values exactly."""

from __future__ import annotations

import json
import urllib.request

import pytest

from conftest import Server, free_port, need
from spark_state_observer.exporters.push import Pusher
from spark_state_observer.settings import Settings


@pytest.mark.slow
def test_the_pushgateway_keeps_odd_grouping_values_exactly() -> None:
    """Static labels become the grouping key's path: values a path would change reach the gateway as given."""
    binary = need("prometheus-pushgateway")
    port = free_port()
    gateway = Server([binary, f"--web.listen-address=127.0.0.1:{port}"], f"http://127.0.0.1:{port}/-/ready")
    static = dict(Settings.from_env(labels="cluster=..,zone=.,team=a%2Fb c,site=zürich\x00,env=prod:1").static_labels)
    try:
        pusher = Pusher(lambda: b"hostile_probe 1\n", f"http://127.0.0.1:{port}", "my/job", 3600, 5, None, static, lambda: None)
        assert pusher.push_once()
        pusher._stop.set()
        groups = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/metrics", timeout=5).read())["data"]
    finally:
        gateway.stop()
    assert [g["labels"] for g in groups] == [{"job": "my/job", **static}]
    assert static["site"] == "zürich\ufffd"
