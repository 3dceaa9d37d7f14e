"""The /metrics endpoint and the settings against clients and inputs that misbehave (issue 12).

Each test is one attack that broke the endpoint before: an idle TLS connection that stopped every
scrape, a thread per idle connection, a non-ASCII Authorization header answered with a 500 and a
traceback on the job's stderr, passwords in logs and reprs.
"""

from __future__ import annotations

import base64
import logging
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request

from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.exporters import http as http_exporter
from spark_state_observer.exporters import metrics_app
from spark_state_observer.exporters.push import Pusher, split_credentials
from spark_state_observer.settings import Settings, redact_url


def _scrape(url: str, context: ssl.SSLContext | None = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _idle_connections(port: int, count: int) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        sockets.append(s)
    return sockets


def test_an_idle_tls_connection_does_not_stop_scrapes(tls_files) -> None:
    cert, key = tls_files
    obs = PrometheusObserver(Settings(http_port=0, tls_certfile=str(cert), tls_keyfile=str(key))).start()
    idle = _idle_connections(obs.http_port, 3)  # connected, never handshaking
    try:
        context = ssl.create_default_context(cafile=str(cert))
        done: list[int] = []
        worker = threading.Thread(target=lambda: done.append(_scrape(obs.server.url, context)[0]), daemon=True)
        worker.start()
        worker.join(8)  # below the connection timeout: the scrape must not wait for the idle clients
        assert done == [200]
    finally:
        for s in idle:
            s.close()
        obs.stop()


def test_idle_connections_do_not_take_a_thread_each() -> None:
    obs = PrometheusObserver(Settings(http_port=0)).start()
    threads_before = threading.active_count()
    idle = _idle_connections(obs.http_port, http_exporter.MAX_PENDING + 200)
    try:
        most = 0
        for _ in range(30):  # while the accept loop works through the backlog
            most = max(most, threading.active_count() - threads_before)
            time.sleep(0.1)
        assert most <= http_exporter.MAX_CONNECTIONS
        assert obs.server.rejected_connections >= 100  # closed at once instead of given a thread
    finally:
        for s in idle:
            s.close()
    # once the flood is gone, scrapes are served again
    deadline = time.monotonic() + 15
    status = 0
    while time.monotonic() < deadline and status != 200:
        try:
            status = _scrape(obs.server.url)[0]
        except OSError:
            time.sleep(0.2)
    obs.stop()
    assert status == 200


def test_a_non_ascii_authorization_header_is_a_plain_401(capfd) -> None:
    obs = PrometheusObserver(Settings(http_port=0, basic_auth_user="u", basic_auth_password="p")).start()
    try:
        # a raw request: urllib would refuse to send a non-latin-1 header itself
        with socket.create_connection(("127.0.0.1", obs.http_port), timeout=5) as s:
            s.sendall(
                "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \u00e9\u00e8\u00ff==\r\n\r\n".encode("latin-1")
                + b"Authorization: Basic \xf0\x9f\x92\xa5\r\n\r\n"
            )
            answer = s.recv(200)
        assert answer.startswith((b"HTTP/1.0 401", b"HTTP/1.1 401"))
        good = "Basic " + base64.b64encode(b"u:p").decode()
        assert _scrape(obs.server.url, headers={"Authorization": good})[0] == 200
    finally:
        obs.stop()
    assert "Traceback" not in capfd.readouterr().err


def test_a_request_the_app_fails_on_writes_no_traceback_to_stderr(capfd) -> None:
    obs = PrometheusObserver(Settings(http_port=0)).start()
    try:

        def broken() -> bytes:  # the renderer breaks
            raise ZeroDivisionError

        obs.server._httpd.set_app(metrics_app._text_app(broken, obs.prometheus.registry))
        assert _scrape(obs.server.url)[0] == 500
    finally:
        obs.stop()
    assert "Traceback" not in capfd.readouterr().err


def test_settings_repr_masks_passwords() -> None:
    s = Settings(
        basic_auth_user="alice",
        basic_auth_password="hunter2",
        pushgateway_url="https://bob:s3cret@gw.example:9091/x",
        otlp_endpoint="http://carol:pw@127.0.0.1:4318",
    )
    text = repr(s)
    assert "hunter2" not in text and "s3cret" not in text and ":pw@" not in text
    assert "alice" in text and "bob:***@gw.example:9091" in text


def test_redact_url_masks_any_password_and_keeps_the_rest() -> None:
    assert redact_url("postgresql://u:p%40ss@db:5432/h?sslmode=require") == "postgresql://u:***@db:5432/h?sslmode=require"
    assert redact_url("no url here") == "no url here"
    assert redact_url("http://host:9091/metrics") == "http://host:9091/metrics"


def test_pushgateway_credentials_in_the_url_become_basic_auth_and_never_reach_the_log(caplog) -> None:
    assert split_credentials("https://bob:s%3Acret@gw:9091/p") == ("https://gw:9091/p", ("bob", "s:cret"))
    assert split_credentials("http://gw:9091") == ("http://gw:9091", None)
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    failures: list[int] = []
    with caplog.at_level(logging.INFO, logger="spark_state_observer"):
        pusher = Pusher(lambda: b"", f"http://bob:s3cret@127.0.0.1:{port}", "job", 3600, 2, None, {}, lambda: failures.append(1))
        assert pusher.push_once() is False
        pusher._stop.set()
    assert failures and "s3cret" not in caplog.text
    assert pusher._auth == ("bob", "s3cret")


def test_stop_gives_up_the_last_push_to_a_gateway_that_never_answers() -> None:
    """Issue 48: the last push held ``stop()`` for the push timeout (5 s). Now it gets ``stop_flush_seconds``: given up
    then, and counted as one failed push."""
    with socket.socket() as blackhole:  # accepts connections in the kernel, never reads or answers
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(64)
        settings = Settings(
            http_enabled=False,
            history_enabled=False,
            pushgateway_url=f"http://127.0.0.1:{blackhole.getsockname()[1]}",
            push_interval_seconds=3600.0,
            push_timeout_seconds=30.0,
            stop_flush_seconds=0.5,
        )
        obs = PrometheusObserver(settings).start()
        began = time.monotonic()
        obs.stop()
        took = time.monotonic() - began
        failures = obs.self_metrics.export_failures["pushgateway"]
    assert failures == 1  # given up and counted: the push itself could not have failed before its 30 s timeout
    assert took < 30.0  # so stop() returned before it
