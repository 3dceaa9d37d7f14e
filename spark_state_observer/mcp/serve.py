"""Serving the MCP server: stdio for an assistant that starts it, streamable HTTP for a shared one.

Over HTTP the SDK's Starlette app runs under uvicorn (a dependency of the SDK) with the settings ``/metrics``
uses: ``tls_certfile``/``tls_keyfile`` serve HTTPS, ``tls_client_cafile`` requires client certificates, and
``basic_auth_user``/``basic_auth_password`` put basic auth in front of every request (``BasicAuth`` below:
digests compared in constant time, and a budget of wrong guesses per client address as ``/metrics`` has).
The listening socket is bound here, before uvicorn starts, so a port in use is one clear line and port 0
picks a free one (the URL printed says which).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import socket
import ssl
import sys
import time
from collections import OrderedDict
from typing import Any, Awaitable, Callable, MutableMapping

from spark_state_observer.exporters.metrics_app import AUTH_FAILURES_PER_WINDOW, AUTH_TRACKED_CLIENTS, AUTH_WINDOW_SECONDS
from spark_state_observer.settings import Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]
PATH = "/mcp"


class ServeError(RuntimeError):
    """The server cannot start; the message says why."""


def credentials(header: bytes) -> bytes | None:
    """The ``user:password`` bytes of a Basic Authorization header, else None."""
    scheme, _, token = header.strip().partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        return base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None


class BasicAuth:
    """Basic auth in front of an ASGI app, as ``/metrics`` has it (``spark_state_observer.exporters.http``)."""

    def __init__(self, app: Asgi, user: str, password: str) -> None:
        self._app = app
        self._expected = hashlib.sha256(f"{user}:{password}".encode()).digest()
        self._failures: OrderedDict[str, tuple[float, int]] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        client = str((scope.get("client") or ("",))[0])
        now = time.monotonic()
        began, failures = self._failures.get(client, (now, 0))
        if now - began >= AUTH_WINDOW_SECONDS:
            began, failures = now, 0
        if failures >= AUTH_FAILURES_PER_WINDOW:
            retry = max(1, math.ceil(began + AUTH_WINDOW_SECONDS - now))
            await _plain(send, 429, b"too many failed logins, try again later\n", [(b"retry-after", str(retry).encode())])
            return
        header = dict(scope.get("headers") or []).get(b"authorization", b"")
        given = credentials(header)
        digest = hashlib.sha256(given if given is not None else b"\0").digest()
        if given is not None and hmac.compare_digest(digest, self._expected):
            await self._app(scope, receive, send)
            return
        self._failures.pop(client, None)
        self._failures[client] = (began, failures + 1)
        while len(self._failures) > AUTH_TRACKED_CLIENTS:
            self._failures.popitem(last=False)
        await _plain(send, 401, b"authentication required\n", [(b"www-authenticate", b'Basic realm="spark-state-observer"')])


async def _plain(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


def bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        raise ServeError(f"cannot serve MCP on {host}:{port}: {exc.strerror or exc} (--port 0 picks a free port)") from None
    sock.set_inheritable(True)
    return sock


def http_app(server: Any, host: str, settings: Settings) -> Asgi:
    """The SDK's streamable HTTP app at ``PATH``, behind basic auth when the settings ask for it."""
    app: Asgi = server.streamable_http_app(streamable_http_path=PATH, host=host)
    if settings.basic_auth_user:
        app = BasicAuth(app, settings.basic_auth_user, settings.basic_auth_password)
    return app


def serve_http(server: Any, host: str, port: int, settings: Settings, announce: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted; ``announce`` is told the URL once the socket is bound."""
    import uvicorn

    for name in (settings.tls_certfile, settings.tls_keyfile, settings.tls_client_cafile):
        if name:
            try:
                with open(name, "rb"):
                    pass
            except OSError as exc:
                raise ServeError(f"cannot read TLS file {name}: {exc.strerror or exc}") from None
    if settings.tls_certfile:
        try:  # the files are checked here, so a bad pair is one line rather than uvicorn's traceback
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(settings.tls_certfile, settings.tls_keyfile)
        except ssl.SSLError as exc:
            raise ServeError(f"cannot load TLS files {settings.tls_certfile}, {settings.tls_keyfile}: {exc}") from None
    sock = bind(host, port)
    scheme = "https" if settings.tls_certfile else "http"
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(
        http_app(server, host, settings),
        log_level="warning",
        ssl_certfile=settings.tls_certfile or None,
        ssl_keyfile=settings.tls_keyfile or None,
        ssl_ca_certs=settings.tls_client_cafile or None,
        ssl_cert_reqs=ssl.CERT_REQUIRED if settings.tls_client_cafile else ssl.CERT_NONE,
        timeout_graceful_shutdown=2,
    )
    if announce is not None:
        announce(f"{scheme}://{shown}:{bound}{PATH}")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def serve_stdio(server: Any) -> None:
    """Serve one assistant on stdin/stdout (the assistant starts the process); nothing else may write to stdout."""
    import anyio

    try:
        anyio.run(server.run_stdio_async)
    except KeyboardInterrupt:
        pass
    sys.stdout.flush()
