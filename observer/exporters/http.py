"""Exposition of the metrics text: an HTTP(S) /metrics endpoint and a Pushgateway pusher.

The endpoint binds to loopback unless told otherwise, optionally wraps its socket in TLS (with client
certificate checks) and optionally requires HTTP basic auth. A port already in use is reported as an
``ExporterError`` that names the address, never as a bare ``OSError`` from deep inside the job.

Both send the text format 0.0.4 from one render function (the collector's cached ``exposition()``):
the endpoint whatever the client's Accept header asks for (Prometheus accepts it; OpenMetrics is not
negotiated), the pusher as the body of its PUT.
"""

from __future__ import annotations

import base64
import gzip
import hmac
import logging
import ssl
import threading
from socketserver import ThreadingMixIn
from typing import Any, Callable
from urllib.parse import parse_qs, quote_plus
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import basic_auth_handler, default_handler, gzip_accepted

log = logging.getLogger(__name__)
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Any]


class ExporterError(RuntimeError):
    """The exporter could not start (port in use, bad TLS files); the message says which and why."""


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are routine; don't write a line per request to the job's stderr."""


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


# zlib's default level: a 4 MB exposition compresses in ~40 ms instead of ~160 ms at gzip.compress's
# level 9 (prometheus-client's), for a body ~5% larger
GZIP_LEVEL = 6


def _text_app(render: Callable[[], bytes], registry: CollectorRegistry) -> WsgiApp:
    """A GET serves ``render()`` as text format 0.0.4, gzipped if the client accepts it.

    Everything else (OPTIONS, other methods, /favicon.ico, ``name[]`` filters) is prometheus-client's
    own app over ``registry``, which holds the same metrics.
    """
    fallback = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Any:
        if (environ["REQUEST_METHOD"] != "GET" or environ.get("PATH_INFO") == "/favicon.ico"
                or "name[]" in parse_qs(environ.get("QUERY_STRING", ""))):
            return fallback(environ, start_response)
        body = render()
        headers = [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)]
        if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", "")):
            body = gzip.compress(body, compresslevel=GZIP_LEVEL)
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", headers)
        return [body]

    return app


def _with_basic_auth(app: WsgiApp, user: str, password: str) -> WsgiApp:
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def guarded(environ: dict[str, Any], start_response: StartResponse) -> Any:
        if not hmac.compare_digest(environ.get("HTTP_AUTHORIZATION", ""), expected):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="spark-state-observer"'), ("Content-Type", "text/plain")])
            return [b"authentication required\n"]
        return app(environ, start_response)

    return guarded


class MetricsServer:
    """Serves ``render()`` on http(s)://host:port/metrics in a daemon thread (see ``_text_app``)."""

    def __init__(self, render: Callable[[], bytes], registry: CollectorRegistry, host: str, port: int, *,
                 certfile: str = "", keyfile: str = "", client_cafile: str = "",
                 basic_auth: tuple[str, str] | None = None) -> None:
        app = _text_app(render, registry)
        if basic_auth:
            app = _with_basic_auth(app, *basic_auth)
        try:
            self._httpd = make_server(host, port, app, _ThreadingServer, handler_class=_QuietHandler)
        except OSError as exc:
            raise ExporterError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc} "
                                f"(set http_port to a free port, or 0 to pick one)") from None
        if certfile:
            try:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain(certfile, keyfile)
                if client_cafile:
                    context.load_verify_locations(cafile=client_cafile)
                    context.verify_mode = ssl.CERT_REQUIRED
            except (OSError, ssl.SSLError) as exc:
                self._httpd.server_close()
                raise ExporterError(f"cannot load TLS files {certfile}, {keyfile}: {exc}") from None
            self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self.host = host
        self.port = self._httpd.server_address[1]
        self.scheme = "https" if certfile else "http"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="spark-state-observer-http", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}/metrics"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def push_url(gateway: str, job: str, grouping_key: dict[str, str]) -> str:
    """The Pushgateway URL of a job and grouping key, escaped as the Pushgateway's API wants."""
    if not gateway.startswith(("http://", "https://")):
        gateway = "http://" + gateway
    parts = [_path_pair("job", job)] + [_path_pair(k, v) for k, v in sorted(grouping_key.items())]
    return f"{gateway.rstrip('/')}/metrics/{'/'.join(parts)}"


def _path_pair(name: str, value: str) -> str:
    """One ``name/value`` path segment pair; empty values and values with a slash or space go base64 (``name@base64/...``)."""
    if not value:
        return f"{name}@base64/="
    if "/" in value or " " in value:
        return f"{name}@base64/{base64.urlsafe_b64encode(value.encode()).decode()}"
    return f"{name}/{quote_plus(value)}"


class Pusher:
    """PUTs ``render()`` to a Pushgateway every ``interval`` seconds, and once more on ``stop()``.

    Failures are counted through ``on_failure`` and logged once per streak; the next push simply tries
    again, so a gateway that comes back is used again without anyone intervening.
    """

    def __init__(self, render: Callable[[], bytes], url: str, job: str, interval: float, timeout: float,
                 basic_auth: tuple[str, str] | None, grouping_key: dict[str, str], on_failure: Callable[[], None]) -> None:
        self._render, self._url = render, url
        self._target = push_url(url, job, grouping_key)
        self._interval, self._timeout = interval, timeout
        self._on_failure = on_failure
        self._auth = basic_auth
        self._stop = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="spark-state-observer-push", daemon=True)
        self._thread.start()

    def _send(self, body: bytes) -> None:
        headers = [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)]
        if self._auth:
            send = basic_auth_handler(self._target, "PUT", self._timeout, headers, body, self._auth[0], self._auth[1])
        else:
            send = default_handler(self._target, "PUT", self._timeout, headers, body)
        send()

    def push_once(self) -> bool:
        try:
            self._send(self._render())
        except Exception as exc:  # any network or HTTP error: count it, keep the job running
            self._on_failure()
            if not self._failing:
                log.warning("spark-state-observer: push to %s failed: %s (will retry every %.0fs)", self._url, exc, self._interval)
            self._failing = True
            return False
        if self._failing:
            log.info("spark-state-observer: push to %s works again", self._url)
        self._failing = False
        return True

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.push_once()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._timeout + 1)
        self.push_once()
