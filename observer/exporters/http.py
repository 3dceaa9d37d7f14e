"""Exposition of the metrics text: an HTTP(S) /metrics endpoint and a Pushgateway pusher.

The endpoint binds to loopback unless told otherwise, optionally wraps its socket in TLS (with client
certificate checks) and optionally requires HTTP basic auth. A port already in use is reported as an
``ExporterError`` that names the address, never as a bare ``OSError`` from deep inside the job.

Serving never depends on the good behaviour of a client: the listening thread only accepts; TLS
handshakes and requests run on a bounded set of worker threads with a socket timeout, so an idle or
slow connection cannot stop other scrapes and a flood of connections cannot create a thread each (past
the limit a connection is closed at once and counted). A request the app cannot handle never writes a
traceback to the job's stderr.


Both send the text format 0.0.4 from one render function (the collector's cached ``exposition()``):
the endpoint whatever the client's Accept header asks for (Prometheus accepts it; OpenMetrics is not
negotiated), from the newest rendering (``observer.exporters.latest``: gzipped once per rendering, and
rendered ahead of the scrapes when rendering is slow; its age in a response header); the pusher renders
afresh for each PUT.
"""

from __future__ import annotations

import base64
import hmac
import io
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, quote_plus, unquote, urlsplit, urlunsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import basic_auth_handler, default_handler, gzip_accepted

from observer.exporters.latest import AGE_HEADER, LatestExposition
from observer.settings import redact_url

log = logging.getLogger(__name__)
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Any]


class ExporterError(RuntimeError):
    """The exporter could not start (port in use, bad TLS files); the message says which and why."""


# a connection that sends nothing (or handshakes no further) for this long is closed
CONNECTION_TIMEOUT_SECONDS = 10.0
# connections served at once; more are closed at once (a scraper retries at its next interval)
MAX_CONNECTIONS = 16


class _LogStream(io.StringIO):
    """Where wsgiref writes an app's traceback: the observer's debug log, not the job's stderr."""

    def flush(self) -> None:
        text = self.getvalue()
        if text.strip():
            log.debug("spark-state-observer: /metrics request failed: %s", text.rstrip())
        self.seek(0)
        self.truncate()


class _QuietHandler(WSGIRequestHandler):
    timeout = CONNECTION_TIMEOUT_SECONDS  # StreamRequestHandler sets it on the socket before reading

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are routine; don't write a line per request to the job's stderr."""

    def get_stderr(self) -> _LogStream:
        return _LogStream()


class _BoundedServer(WSGIServer):
    """Accepts on one thread; handshakes and serves on at most ``MAX_CONNECTIONS`` daemon threads.

    ``ThreadingMixIn`` starts a thread per connection and ``ssl`` wrapping of the listening socket runs
    each handshake inside ``accept()`` on the serving thread: one idle client then blocks everyone.
    """

    tls_context: ssl.SSLContext | None = None
    rejected = 0

    def server_activate(self) -> None:
        super().server_activate()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.rejected += 1
            self.shutdown_request(request)
            return
        worker = threading.Thread(
            target=self._serve_one, args=(request, client_address), daemon=True, name="spark-state-observer-http-conn"
        )
        try:
            worker.start()
        except RuntimeError:  # cannot start a thread: drop this connection, keep serving
            self._slots.release()
            self.shutdown_request(request)

    def _serve_one(self, request: socket.socket, client_address: Any) -> None:
        try:
            request.settimeout(CONNECTION_TIMEOUT_SECONDS)
            if self.tls_context is not None:
                request = self.tls_context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
                request.do_handshake()
            self.finish_request(request, client_address)
        except Exception as exc:  # a client that times out, fails the handshake or hangs up
            log.debug("spark-state-observer: /metrics connection from %s ended: %r", client_address, exc)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """socketserver prints a traceback to stderr by default; a bad client is not the job's business."""
        log.debug("spark-state-observer: /metrics request from %s failed", client_address)


def _text_app(render: Callable[[], bytes] | LatestExposition, registry: CollectorRegistry) -> WsgiApp:
    """A GET serves the newest rendering of ``render`` as text format 0.0.4, gzipped if the client accepts it.

    Everything else (OPTIONS, other methods, /favicon.ico, ``name[]`` filters) is prometheus-client's
    own app over ``registry``, which holds the same metrics.
    """
    fallback = make_wsgi_app(registry)
    latest = render if isinstance(render, LatestExposition) else LatestExposition(_one_part(render))

    def app(environ: dict[str, Any], start_response: StartResponse) -> Any:
        if (
            environ["REQUEST_METHOD"] != "GET"
            or environ.get("PATH_INFO") == "/favicon.ico"
            or "name[]" in parse_qs(environ.get("QUERY_STRING", ""))
        ):
            return fallback(environ, start_response)
        rendered = latest.get()
        headers = [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4), (AGE_HEADER, f"{max(0.0, time.monotonic() - rendered.began):.3f}")]
        if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", "")):
            body = rendered.gzipped
            headers.append(("Content-Encoding", "gzip"))
        else:
            body = rendered.text()
        start_response("200 OK", headers)
        return [body]

    return app


def _one_part(render: Callable[[], bytes]) -> Callable[[], Iterable[bytes]]:
    return lambda: (render(),)


def _with_basic_auth(app: WsgiApp, user: str, password: str) -> WsgiApp:
    expected = ("Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()).encode()

    def guarded(environ: dict[str, Any], start_response: StartResponse) -> Any:
        # WSGI hands headers over as latin-1 text; compare bytes, so any header (non-ASCII too) is a plain mismatch
        given = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace")
        if not hmac.compare_digest(given, expected):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="spark-state-observer"'), ("Content-Type", "text/plain")])
            return [b"authentication required\n"]
        return app(environ, start_response)

    return guarded


class MetricsServer:
    """Serves ``render()`` on http(s)://host:port/metrics in a daemon thread (see ``_text_app``).

    ``render_parts``, when given, renders the same text in parts (compressed as they come, so the whole
    text is never held); ``latest`` holds the newest rendering (``observer.exporters.latest``).
    """

    def __init__(
        self,
        render: Callable[[], bytes],
        registry: CollectorRegistry,
        host: str,
        port: int,
        *,
        certfile: str = "",
        keyfile: str = "",
        client_cafile: str = "",
        basic_auth: tuple[str, str] | None = None,
        render_parts: Callable[[], Iterable[bytes]] | None = None,
    ) -> None:
        self.latest = LatestExposition(render_parts or _one_part(render))
        app = _text_app(self.latest, registry)
        if basic_auth:
            app = _with_basic_auth(app, *basic_auth)
        try:
            self._httpd = make_server(host, port, app, _BoundedServer, handler_class=_QuietHandler)
        except OSError as exc:
            raise ExporterError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc} (set http_port to a free port, or 0 to pick one)"
            ) from None
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
            self._httpd.tls_context = context  # handshakes run on the connection's worker thread
        self.host = host
        self.port = self._httpd.server_address[1]
        self.scheme = "https" if certfile else "http"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="spark-state-observer-http", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}/metrics"

    @property
    def rejected_connections(self) -> int:
        """Connections closed at once because ``MAX_CONNECTIONS`` were being served."""
        return self._httpd.rejected

    def invalidate(self) -> None:
        """The next GET shows every change made so far (see ``LatestExposition.invalidate``)."""
        self.latest.invalidate()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self.latest.close()


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


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """``https://user:pass@host/`` -> (``https://host/``, (user, pass)); urllib would not send them itself."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc)), (unquote(parts.username), unquote(parts.password or ""))


class Pusher:
    """PUTs ``render()`` to a Pushgateway every ``interval`` seconds, and once more on ``stop()``.

    Failures are counted through ``on_failure`` and logged once per streak; the next push simply tries
    again, so a gateway that comes back is used again without anyone intervening.
    """

    def __init__(
        self,
        render: Callable[[], bytes],
        url: str,
        job: str,
        interval: float,
        timeout: float,
        basic_auth: tuple[str, str] | None,
        grouping_key: dict[str, str],
        on_failure: Callable[[], None],
    ) -> None:
        url, url_auth = split_credentials(url)
        self._render, self._url = render, url
        self._target = push_url(url, job, grouping_key)
        self._interval, self._timeout = interval, timeout
        self._on_failure = on_failure
        self._auth = basic_auth or url_auth
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
                log.warning(
                    "spark-state-observer: push to %s failed: %s (will retry every %.0fs)", self._url, redact_url(str(exc)), self._interval
                )
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
