"""One connection's pieces for the /metrics server: its state while it sends its header, its answer, and the
wsgiref handler that makes the answer from a header already read in full.

The serving loop and its bounds are ``spark_state_observer.exporters.http``'s; these pieces never wait on
a client: the handler reads the header from memory and keeps what it writes for the serving thread.
"""

from __future__ import annotations

import io
import logging
import re
import socket
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler

from spark_state_observer.exporters.metrics_app import _Streamed

if TYPE_CHECKING:
    from spark_state_observer.exporters.http import _BoundedServer

log = logging.getLogger(__name__)

# request line plus headers; past this a 431
MAX_HEADER_BYTES = 64 * 1024
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
_BLANK_LINE = re.compile(rb"\n\r?\n")


class _LogStream(io.StringIO):
    """Where wsgiref writes an app's traceback: the observer's debug log, not the job's stderr."""

    def flush(self) -> None:
        text = self.getvalue()
        if text.strip():
            log.debug("spark-state-observer: /metrics request failed: %s", text.rstrip())
        self.seek(0)
        self.truncate()


@dataclass
class _Pending:
    """A connection still handshaking or sending its request header."""

    sock: socket.socket
    address: Any
    client: str  # the client's address without its port: what fairness between clients counts by
    deadline: float
    handshaking: bool
    head: bytearray = field(default_factory=bytearray)


@dataclass(frozen=True)
class _Request:
    """A complete request header, handed to a worker with the socket to answer on."""

    sock: socket.socket
    head: bytes
    client: str


@dataclass
class _Answer:
    """An answer the serving thread writes as fast as its client takes it: what is made (the status line,
    headers, a body held anyway) and, for a streamed body, the rest, made a piece at a time."""

    sock: socket.socket
    client: str
    made: deque[bytes]
    rest: Iterator[bytes] | None
    deadline: float = 0.0
    current: memoryview = field(default_factory=lambda: memoryview(b""))
    waiting_for: int = 0  # the selector events it is registered for; 0: not registered

    def load(self) -> bool:
        """Make ``current`` the next bytes to send; False when everything is sent."""
        while not self.current:
            if self.made:
                self.current = memoryview(self.made.popleft())
            elif self.rest is not None:
                piece = next(self.rest, None)
                if piece is None:
                    self.rest = None
                else:
                    self.current = memoryview(piece)
            else:
                return False
        return True

    def close(self) -> None:
        close = getattr(self.rest, "close", None)
        if close is not None:
            close()
        self.rest = None


class _Collector(io.RawIOBase):
    """The handler's output stream: what it writes is kept (bytes by reference) for the serving thread to send."""

    def __init__(self) -> None:
        super().__init__()
        self.made: deque[bytes] = deque()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.made.append(bytes(data))  # bytes as they are; a mutable buffer is copied
        return len(self.made[-1])


def _request_complete(head: bytes | bytearray, scanned: int) -> bool:
    """Whether ``head`` holds a whole request header: a request line without a version (HTTP/0.9 or
    garbage, answered 400) is complete by itself, others end at a blank line (searched from ``scanned``)."""
    first = head.find(b"\n")
    if first < 0:
        return False
    if len(head[:first].split()) < 3:
        return True
    return _BLANK_LINE.search(head, max(first, scanned - 3)) is not None


def _plain_answer(status: str, text: str, extra: str = "") -> bytes:
    body = (text + "\n").encode()
    return (
        f"HTTP/1.0 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n"
    ).encode() + body


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


def _lingering_close(sock: socket.socket) -> None:
    """Close after the answer: first what the client sent beyond the header (a body, a pipelined request) is
    read away, as far as it is already here; closing over unread bytes resets the connection, and the
    client may then lose the end of its answer."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.setblocking(False)
        for _ in range(16):
            if not sock.recv(16384):
                break
    except (OSError, ValueError):
        pass
    _close(sock)


class _ServerHandler(ServerHandler):
    """wsgiref's handler, except that a streamed body (``_Streamed``) is not pulled here: after the status line
    and headers, the serving thread pulls it as the client reads."""

    rest: Iterator[bytes] | None = None

    def finish_response(self) -> None:
        result = getattr(self, "result", None)  # wsgiref's attributes, untyped in typeshed
        if not isinstance(result, _Streamed):
            super().finish_response()
            return
        if not getattr(self, "headers_sent", False):
            self.send_headers()
        self.rest = iter(result)


class _Handler(WSGIRequestHandler):
    """One request, from a header the server has already read in full. It runs the app and keeps the answer
    (``wfile``, ``rest``): the serving thread writes it, so a client that does not read holds no worker."""

    request: _Request
    server: _BoundedServer
    default_request_version = "HTTP/1.0"  # every answer, errors found before the version too, has a status line
    rest: Iterator[bytes] | None = None

    def setup(self) -> None:
        self.connection = self.request.sock
        self.rfile = io.BytesIO(self.request.head)
        self.wfile = _Collector()  # type: ignore[assignment]

    def finish(self) -> None:
        """Nothing was written: the answer is handed to the serving thread."""

    def handle(self) -> None:
        self.raw_requestline = self.rfile.readline(MAX_HEADER_BYTES + 1)
        if not self.raw_requestline.strip():
            self.command, self.requestline, self.request_version = "", "", "HTTP/1.0"
            self.send_error(400, "Empty request line")
            return
        if not self.parse_request():  # it has answered 4xx/5xx
            return
        if len(self.requestline.split()) < 3 or self.request_version.startswith("HTTP/0."):  # HTTP/0.9 (no version) or 0.x
            self.send_error(400, "only HTTP/1.0 and HTTP/1.1 are served")
            return
        app = self.server.get_app()
        if app is None:
            return
        handler = _ServerHandler(self.rfile, self.wfile, self.get_stderr(), self.get_environ(), multithread=False)  # type: ignore[arg-type]
        handler.request_handler = self  # type: ignore[attr-defined]  # wsgiref logs through it
        handler.run(app)
        self.rest = handler.rest

    def answer(self) -> _Answer:
        return _Answer(self.request.sock, self.request.client, self.wfile.made, self.rest)  # type: ignore[attr-defined]

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        self.server.refusals("malformed")
        if not self.request_version.startswith("HTTP/1."):
            self.request_version = "HTTP/1.0"  # an HTTP/0.x answer would have no status line
        super().send_error(code, message, explain)

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are routine; don't write a line per request to the job's stderr."""

    def get_stderr(self) -> _LogStream:
        return _LogStream()


def _client_of(address: Any) -> str:
    """The client's address without its port (IPv4 and IPv6 alike)."""
    return str(address[0]) if isinstance(address, tuple) and address else str(address)
