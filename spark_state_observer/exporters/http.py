"""Exposition of the metrics text: an HTTP(S) /metrics endpoint and a Pushgateway pusher.

The endpoint binds to loopback unless told otherwise, optionally wraps its socket in TLS (with client
certificate checks) and optionally requires HTTP basic auth. A port already in use is reported as an
``ExporterError`` that names the address, never as a bare ``OSError`` from deep inside the job.

Serving never depends on the good behaviour of a client. One thread accepts connections, reads their
request headers and writes their answers without blocking (TLS handshakes too), each connection with a
deadline for its whole header and then one for its whole answer: a client that trickles a byte every few
seconds, or never reads, is cut when its deadline passes, and meanwhile it holds no thread. Only a
complete request header goes to one of a bounded set of worker threads, which makes the answer and hands
it back; a plain-text answer is decompressed from the gzipped rendering as the client reads, so a client
that does not read holds no copy of the text. Connections still sending their header, answers being
written and workers are each bounded, and where room runs out the client address holding the most gives
way first (for headers: a connection that has sent nothing before one that has sent part of its request),
so a flood from one client cannot lock another's scrapes out. A malformed request gets a 4xx, a client
that hangs up ends its connection only (writes never raise SIGPIPE on plain sockets), and nothing a client
does writes a traceback to the job's stderr. Every refusal is counted by reason (``REFUSAL_REASONS``),
for the observer's self-metric.

Both send the text format 0.0.4 from one render function (the collector's cached ``exposition()``):
the endpoint whatever the client's Accept header asks for (Prometheus accepts it), unless the URL asks for
``format=openmetrics`` (``spark_state_observer.exporters.openmetrics``), from the newest rendering (``spark_state_observer.exporters.latest``: gzipped once per rendering, and
rendered ahead of the scrapes when rendering is slow; its age in a response header); the pusher renders
afresh for each PUT.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import hmac
import io
import logging
import math
import re
import selectors
import socket
import ssl
import threading
import time
import zlib
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import basic_auth_handler, default_handler
from prometheus_client.registry import Collector

from spark_state_observer.exporters.last_export import within
from spark_state_observer.exporters.latest import AGE_HEADER, GZIP_LEVEL, LatestExposition
from spark_state_observer.exporters.openmetrics import FORMAT_PARAMETER, negotiated
from spark_state_observer.settings import redact_url

log = logging.getLogger(__name__)
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Any]


class ExporterError(RuntimeError):
    """The exporter could not start (port in use, bad TLS files); the message says which and why."""


# a connection must have sent its whole request header (after its TLS handshake) this long after it was accepted
HEADER_DEADLINE_SECONDS = 10.0
# and then have taken the whole answer within this long (a client that does not read is cut)
RESPONSE_DEADLINE_SECONDS = 30.0
# requests whose answer is being made at once (worker threads); a complete request past them gets a 503
MAX_CONNECTIONS = 16
# of which one client address may hold this many (a 503 past them): one client cannot take every worker
MAX_CONNECTIONS_PER_CLIENT = 8
# answers being written by the serving thread, as fast as each client takes them; past this, one of the
# client address writing the most (its oldest) is cut for the newest
MAX_WRITING = 128
# connections still sending their header; past this one is cut for the newest (see _BoundedServer._make_room)
MAX_PENDING = 256
# a plain (not gzipped) answer is decompressed from the rendering this many bytes at a time, as the client reads
PIECE_BYTES = 64 * 1024
# request line plus headers; past this a 431
MAX_HEADER_BYTES = 64 * 1024
# basic auth: wrong credentials one client address may send per window before it gets 429s until the window ends
AUTH_FAILURES_PER_WINDOW = 10
AUTH_WINDOW_SECONDS = 60.0
AUTH_TRACKED_CLIENTS = 4096
# why a request was refused: at the connection limit, header (or answer) too slow, not HTTP we serve,
# wrong credentials, and credentials not even checked because the client guessed too often
REFUSAL_REASONS = ("busy", "timeout", "malformed", "unauthorized", "throttled")
ALLOWED_METHODS = "GET, HEAD, OPTIONS"
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
_BLANK_LINE = re.compile(rb"\n\r?\n")
_PLAIN_PATH_VALUE = re.compile(r"[A-Za-z0-9_.:-]+")


class Refusals:
    """Refused requests by reason, kept here and handed to ``on_refused`` (the observer's self-metrics)."""

    def __init__(self, on_refused: Callable[[str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self.counts = dict.fromkeys(REFUSAL_REASONS, 0)
        self._on_refused = on_refused

    def __call__(self, reason: str) -> None:
        with self._lock:
            self.counts[reason] += 1
        if self._on_refused is not None:
            try:
                self._on_refused(reason)
            except Exception:  # counting must never end a connection's handling
                log.debug("spark-state-observer: counting a refused request failed", exc_info=True)


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


class _Streamed:
    """A body made as the client takes it: ``_ServerHandler`` leaves it to the serving thread, a piece at a time."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._pieces = pieces

    def __iter__(self) -> Iterator[bytes]:
        return self._pieces

    def close(self) -> None:
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()


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


class _BoundedServer(WSGIServer):
    """One serving thread accepts, handshakes, reads request headers and writes answers without blocking; at
    most ``MAX_CONNECTIONS`` worker threads run the app, and then only that: none waits on a client.

    ``ThreadingMixIn`` starts a thread per connection, a thread waits on a client as long as the client
    likes to trickle or not read, and ``ssl`` wrapping of the listening socket runs each handshake inside
    ``accept()``: each lets a few slow clients stop every scrape. Where room runs out (connections still
    sending their header, answers being written, workers), the client address holding the most gives way
    first, so that one client's flood does not push out another's scrape.
    """

    request_queue_size = 128
    tls_context: ssl.SSLContext | None = None
    refusals: Refusals

    def server_activate(self) -> None:
        super().server_activate()
        self.socket.setblocking(False)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._pending: OrderedDict[int, _Pending] = OrderedDict()  # oldest first: deadlines in this order too
        self._pending_by_client: dict[str, OrderedDict[int, _Pending]] = {}
        self._writing: OrderedDict[int, _Answer] = OrderedDict()  # oldest first: deadlines in this order too
        self._writing_by_client: Counter[str] = Counter()
        self._lock = threading.Lock()  # what the workers share with the serving thread:
        self._working: Counter[str] = Counter()  # workers per client address
        self._handed: deque[_Answer] = deque()  # answers made by the workers, for the serving thread to write
        self._serving = True

    # --- the serving thread ---------------------------------------------------------------------------
    def serve(self) -> None:
        """Accept, handshake, read headers and write answers until ``stop_serving``; nothing a client does ends this loop."""
        self._selector.register(self.socket, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_read, selectors.EVENT_READ, "wake")
        while self._serving:
            try:
                self._serve_round()
            except Exception:  # a bug of ours: say it once per round, keep serving
                log.warning("spark-state-observer: /metrics serving loop failed; continuing", exc_info=True)
                time.sleep(0.1)
        with self._lock:
            handed, self._handed = list(self._handed), deque()
        for answer in handed + list(self._writing.values()):
            answer.close()
            _close(answer.sock)
        for pending in list(self._pending.values()):
            self._drop(pending)
        self._selector.close()
        self._wake_read.close()
        self._wake_write.close()

    def _serve_round(self) -> None:
        timeout = 1.0
        for oldest in (next(iter(self._pending.values()), None), next(iter(self._writing.values()), None)):
            if oldest is not None:
                timeout = min(timeout, max(0.0, oldest.deadline - time.monotonic()))
        accept = False
        for key, _ in self._selector.select(timeout):
            if key.data == "accept":
                accept = True  # after the others: a request already sent is read before anyone makes room
            elif key.data == "wake":
                try:
                    self._wake_read.recv(64)
                except OSError:
                    pass
            elif isinstance(key.data, _Answer):
                if self._writing.get(key.data.sock.fileno()) is key.data:  # not cut earlier in this round
                    self._write(key.data)
            else:
                pending: _Pending = key.data
                if self._pending.get(pending.sock.fileno()) is pending:  # not cut earlier in this round
                    self._advance_guarded(pending)
        self._take_handed()
        if accept:
            self._accept()
        self._expire(time.monotonic())

    def _expire(self, now: float) -> None:
        while self._pending:
            oldest = next(iter(self._pending.values()))
            if oldest.deadline > now:
                break
            self._drop(oldest, "timeout", _plain_answer("408 Request Timeout", "request header not complete in time"))
        while self._writing:
            answer = next(iter(self._writing.values()))
            if answer.deadline > now:
                break
            self._cut(answer, "timeout")

    def _accept(self) -> None:
        for _ in range(64):  # at most this many per round: pending connections get their turn
            try:
                sock, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors (or memory): make room, try again next round
                log.debug("spark-state-observer: /metrics accept failed: %r", exc)
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    if self._pending:
                        self._make_room()
                    else:  # the workers hold them: the listening socket stays readable, so don't spin
                        time.sleep(0.05)
                return
            sock.setblocking(False)
            if len(self._pending) >= MAX_PENDING:
                self._make_room()
            if self.tls_context is not None:
                try:
                    sock = self.tls_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                except (OSError, ValueError):
                    _close(sock)
                    continue
            client = _client_of(address)
            pending = _Pending(sock, address, client, time.monotonic() + HEADER_DEADLINE_SECONDS, self.tls_context is not None)
            self._pending[sock.fileno()] = pending
            self._pending_by_client.setdefault(client, OrderedDict())[sock.fileno()] = pending
            self._selector.register(sock, selectors.EVENT_READ, pending)

    def _make_room(self) -> None:
        """Cut one connection still sending its header: of the client address with the most, the oldest that has
        sent nothing; one that has sent part of its request goes only when that client has no empty one. A
        connection about to go is read once more first: a request that has arrived in the meantime is served."""
        for _ in range(4):
            crowd = max(self._pending_by_client.values(), key=len, default=None)
            if not crowd:
                return
            victim = next((p for p in crowd.values() if not p.head), None) or next(iter(crowd.values()))
            if not victim.head:
                before = len(self._pending)
                self._advance_guarded(victim)
                if len(self._pending) < before or victim.head:  # dispatched, gone, or sending after all
                    continue
            self._drop(victim, "busy")
            return

    def _advance_guarded(self, pending: _Pending) -> None:
        try:
            self._advance(pending)
        except Exception as exc:  # whatever a connection does, it ends that connection only
            log.debug("spark-state-observer: /metrics connection from %s failed: %r", pending.address, exc)
            self._drop(pending)

    def _advance(self, pending: _Pending) -> None:
        sock = pending.sock
        if pending.handshaking:
            try:
                sock.do_handshake()  # type: ignore[attr-defined]
            except ssl.SSLWantReadError:
                self._selector.modify(sock, selectors.EVENT_READ, pending)
                return
            except ssl.SSLWantWriteError:
                self._selector.modify(sock, selectors.EVENT_WRITE, pending)
                return
            except (ssl.SSLError, OSError, ValueError) as exc:
                log.debug("spark-state-observer: TLS handshake with %s failed: %r", pending.address, exc)
                self._drop(pending, "malformed")
                return
            pending.handshaking = False
            self._selector.modify(sock, selectors.EVENT_READ, pending)
        while True:
            try:
                chunk = sock.recv(16384)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                return
            except ssl.SSLWantWriteError:
                self._selector.modify(sock, selectors.EVENT_WRITE, pending)
                return
            except (OSError, ValueError):  # reset, or TLS nonsense: the client is gone
                self._drop(pending)
                return
            if not chunk:  # hung up before a whole header: nothing to answer
                self._drop(pending)
                return
            scanned = len(pending.head)
            pending.head += chunk
            if _request_complete(pending.head, scanned):
                self._dispatch(pending)
                return
            if len(pending.head) > MAX_HEADER_BYTES:
                self._drop(pending, "malformed", _plain_answer("431 Request Header Fields Too Large", "request header too large"))
                return

    def _dispatch(self, pending: _Pending) -> None:
        self._forget(pending)
        client = pending.client
        with self._lock:
            fair = self._working[client] < MAX_CONNECTIONS_PER_CLIENT
            if fair:
                self._working[client] += 1
        if not fair or not self._slots.acquire(blocking=False):
            if fair:
                self._release(client, slot=False)
            self._answer_and_close(pending.sock, _plain_answer("503 Service Unavailable", "busy, try again", "Retry-After: 1\r\n"))
            self.refusals("busy")
            return
        request = _Request(pending.sock, bytes(pending.head), client)
        worker = threading.Thread(
            target=self._serve_one, args=(request, pending.address), daemon=True, name="spark-state-observer-http-conn"
        )
        try:
            worker.start()
        except RuntimeError:  # cannot start a thread: drop this connection, keep serving
            self._release(client)
            _close(pending.sock)
            self.refusals("busy")

    def _forget(self, pending: _Pending) -> None:
        fd = pending.sock.fileno()
        self._pending.pop(fd, None)
        same = self._pending_by_client.get(pending.client)
        if same is not None:
            same.pop(fd, None)
            if not same:
                del self._pending_by_client[pending.client]
        try:
            self._selector.unregister(pending.sock)
        except (KeyError, ValueError):
            pass

    def _drop(self, pending: _Pending, reason: str = "", answer: bytes = b"") -> None:
        """Close a connection that did not send a whole header; count it under ``reason`` when it is a refusal."""
        self._forget(pending)
        if answer and not pending.handshaking:
            self._answer_and_close(pending.sock, answer)
        else:
            _close(pending.sock)
        if reason:
            self.refusals(reason)

    @staticmethod
    def _answer_and_close(sock: socket.socket, answer: bytes) -> None:
        """A short answer from the serving thread: what the socket takes at once, never a wait."""
        try:
            if isinstance(sock, ssl.SSLSocket):
                sock.send(answer)
            else:
                sock.send(answer, _NOSIGNAL)
        except (OSError, ValueError):
            pass
        _lingering_close(sock)

    # --- answers, written by the serving thread -------------------------------------------------------
    def _take_handed(self) -> None:
        """Start writing the answers the workers made; past ``MAX_WRITING`` one being written is cut for each."""
        while True:
            with self._lock:
                if not self._handed:
                    return
                answer = self._handed.popleft()
            if len(self._writing) >= MAX_WRITING:
                client = self._writing_by_client.most_common(1)[0][0]
                self._cut(next(a for a in self._writing.values() if a.client == client), "busy")
            answer.deadline = time.monotonic() + RESPONSE_DEADLINE_SECONDS
            self._writing[answer.sock.fileno()] = answer
            self._writing_by_client[answer.client] += 1
            self._write(answer)  # most answers go out at once

    def _write(self, answer: _Answer) -> None:
        """Send what the socket takes now (a bounded number of pieces: other clients get their turn), then wait for it."""
        sock, tls = answer.sock, isinstance(answer.sock, ssl.SSLSocket)
        for _ in range(64):
            try:
                if not answer.load():
                    self._done(answer)
                    return
                # TLS: at most one record at a time, and the same bytes again after a want-write
                sent = sock.send(answer.current[:16384]) if tls else sock.send(answer.current, _NOSIGNAL)
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
                self._wait_for(answer, selectors.EVENT_WRITE)
                return
            except ssl.SSLWantReadError:
                self._wait_for(answer, selectors.EVENT_READ)
                return
            except Exception as exc:  # the client hung up or reset; or making the body failed
                log.debug("spark-state-observer: /metrics answer to %s ended: %r", answer.client, exc)
                self._cut(answer)
                return
            answer.current = answer.current[sent:]
        self._wait_for(answer, selectors.EVENT_WRITE)

    def _wait_for(self, answer: _Answer, events: int) -> None:
        if answer.waiting_for == events:
            return
        if answer.waiting_for:
            self._selector.modify(answer.sock, events, answer)
        else:
            self._selector.register(answer.sock, events, answer)
        answer.waiting_for = events

    def _end(self, answer: _Answer) -> None:
        self._writing.pop(answer.sock.fileno(), None)
        self._writing_by_client[answer.client] -= 1
        if self._writing_by_client[answer.client] <= 0:
            del self._writing_by_client[answer.client]
        if answer.waiting_for:
            try:
                self._selector.unregister(answer.sock)
            except (KeyError, ValueError):
                pass
        answer.close()

    def _done(self, answer: _Answer) -> None:
        self._end(answer)
        _lingering_close(answer.sock)

    def _cut(self, answer: _Answer, reason: str = "") -> None:
        """End an answer before its end: the client did not take it in time, room was needed, or it hung up."""
        self._end(answer)
        _close(answer.sock)
        if reason:
            self.refusals(reason)

    def stop_serving(self) -> None:
        self._serving = False
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_write.send(b"x")
        except OSError:
            pass

    # --- the worker threads ---------------------------------------------------------------------------
    def _serve_one(self, request: _Request, client_address: Any) -> None:
        """Run the app for one request and hand its answer to the serving thread; never waits on the client."""
        answer = None
        try:
            handler = self.RequestHandlerClass(request, client_address, self)  # type: ignore[arg-type]  # our handler takes a _Request
            answer = handler.answer()  # type: ignore[attr-defined]
        except Exception as exc:
            log.debug("spark-state-observer: /metrics request from %s failed: %r", client_address, exc)
        finally:
            self._release(request.client)
        with self._lock:
            handed = answer is not None and self._serving
            if handed:
                self._handed.append(answer)  # type: ignore[arg-type]
        if handed:
            self._wake()
        else:
            _close(request.sock)

    def _release(self, client: str, slot: bool = True) -> None:
        with self._lock:
            self._working[client] -= 1
            if self._working[client] <= 0:
                del self._working[client]
        if slot:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """socketserver prints a traceback to stderr by default; a bad client is not the job's business."""
        log.debug("spark-state-observer: /metrics request from %s failed", client_address)


def accepts_gzip(header: str) -> bool:
    """Whether an Accept-Encoding header lets the answer be gzipped, q-values and all (RFC 9110 12.5.3).

    ``gzip;q=0`` and ``*;q=0`` refuse it; gzip is chosen when its weight is above 0 and not below identity's.
    """
    weights: dict[str, float] = {}
    for item in header.split(","):
        coding, *params = item.split(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value.strip())
                except ValueError:
                    weight = 0.0
                if not math.isfinite(weight) or not 0.0 <= weight <= 1.0:
                    weight = 0.0
        coding = "gzip" if coding == "x-gzip" else coding
        weights[coding] = max(weight, weights.get(coding, 0.0))
    gzip = weights.get("gzip", weights.get("*", 0.0))
    identity = weights.get("identity", weights.get("*", 1.0))
    return gzip > 0.0 and gzip >= identity


def _text_app(
    render: Callable[[], bytes] | LatestExposition, registry: CollectorRegistry, openmetrics: Callable[[], Collector] | None = None
) -> WsgiApp:
    """A GET serves the newest rendering of ``render`` as text format 0.0.4, gzipped if the client accepts it.

    HEAD answers the same headers without a body, OPTIONS says what is served, other methods get a 405;
    /favicon.ico and ``name[]`` filters are prometheus-client's own app over ``registry`` (the same metrics).
    ``?format=openmetrics`` with an Accept header that allows it gets ``openmetrics()``'s samples in OpenMetrics, for the request.
    """
    fallback = make_wsgi_app(registry, disable_compression=True)
    latest = render if isinstance(render, LatestExposition) else LatestExposition(_one_part(render))

    def app(environ: dict[str, Any], start_response: StartResponse) -> Any:
        method = environ["REQUEST_METHOD"]
        if method == "OPTIONS":
            start_response("200 OK", [("Allow", ALLOWED_METHODS), ("Content-Length", "0")])
            return [b""]
        if method not in ("GET", "HEAD"):
            body = b"only GET, HEAD and OPTIONS are served here\n"
            start_response(
                "405 Method Not Allowed",
                [("Allow", ALLOWED_METHODS), ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
            )
            return [body]
        query = parse_qs(environ.get("QUERY_STRING", ""))
        if environ.get("PATH_INFO") == "/favicon.ico" or "name[]" in query:
            status, headers, body = _answer_of(fallback, {**environ, "REQUEST_METHOD": "GET"})
        elif openmetrics is not None and (chosen := negotiated(query.get(FORMAT_PARAMETER, []), environ.get("HTTP_ACCEPT", ""))):
            encoder, content_type = chosen
            status, headers, body = "200 OK", [("Content-Type", content_type)], encoder(openmetrics())
            if accepts_gzip(environ.get("HTTP_ACCEPT_ENCODING", "")):
                body = zlib.compress(body, GZIP_LEVEL, 31)  # wbits 31: a gzip member
                headers.append(("Content-Encoding", "gzip"))
        else:
            rendered = latest.get()
            status = "200 OK"
            headers = [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4), (AGE_HEADER, f"{max(0.0, time.monotonic() - rendered.began):.3f}")]
            if accepts_gzip(environ.get("HTTP_ACCEPT_ENCODING", "")):
                body = rendered.gzipped
                headers.append(("Content-Encoding", "gzip"))
            else:  # decompressed as the client reads: a client that does not read holds no copy of the text
                start_response(status, headers + [("Content-Length", str(rendered.size))])
                return [b""] if method == "HEAD" else _Streamed(rendered.text_pieces(PIECE_BYTES))
        start_response(status, headers + [("Content-Length", str(len(body)))])
        return [b"" if method == "HEAD" else body]

    return app


def _answer_of(app: WsgiApp, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    answer: list[Any] = []
    body = b"".join(app(environ, lambda status, headers, *_: answer.extend((status, list(headers)))))
    return answer[0], answer[1], body


def _one_part(render: Callable[[], bytes]) -> Callable[[], Iterable[bytes]]:
    return lambda: (render(),)


def _given_credentials(header: str) -> bytes | None:
    """The ``user:password`` bytes of an Authorization header of the Basic scheme (any case), else None."""
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        return base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):  # not base64, or not ASCII
        return None


class _BasicAuth:
    """Basic auth in front of ``app``, with a budget of wrong guesses per client address.

    Credentials are compared as SHA-256 digests with ``hmac.compare_digest``: the time taken says nothing
    of how much of a guess was right, not even its length. A client address that sent
    ``AUTH_FAILURES_PER_WINDOW`` wrong ones gets a 429 (its credentials unchecked) until its window ends;
    the addresses remembered are bounded.
    """

    def __init__(self, app: WsgiApp, user: str, password: str, refusals: Refusals) -> None:
        self._app = app
        self._expected = hashlib.sha256(f"{user}:{password}".encode()).digest()
        self._refusals = refusals
        self._lock = threading.Lock()
        self._failures: OrderedDict[str, tuple[float, int]] = OrderedDict()  # address -> (window start, failures)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Any:
        client = str(environ.get("REMOTE_ADDR", ""))
        now = time.monotonic()
        with self._lock:
            began, failures = self._failures.get(client, (now, 0))
            if now - began >= AUTH_WINDOW_SECONDS:
                began, failures = now, 0
        if failures >= AUTH_FAILURES_PER_WINDOW:
            self._refusals("throttled")
            retry = max(1, math.ceil(began + AUTH_WINDOW_SECONDS - now))
            start_response(
                "429 Too Many Requests",
                [("Retry-After", str(retry)), ("Content-Type", "text/plain; charset=utf-8")],
            )
            return [b"too many failed logins, try again later\n"]
        given = _given_credentials(str(environ.get("HTTP_AUTHORIZATION", "")))
        digest = hashlib.sha256(given if given is not None else b"\0").digest()
        if given is not None and hmac.compare_digest(digest, self._expected):
            return self._app(environ, start_response)
        self._failed(client, began, failures + 1)
        self._refusals("unauthorized")
        start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="spark-state-observer"'), ("Content-Type", "text/plain")])
        return [b"authentication required\n"]

    def _failed(self, client: str, began: float, failures: int) -> None:
        with self._lock:
            self._failures.pop(client, None)
            self._failures[client] = (began, failures)
            while len(self._failures) > AUTH_TRACKED_CLIENTS:
                self._failures.popitem(last=False)  # the longest unchanged first


class MetricsServer:
    """Serves ``render()`` on http(s)://host:port/metrics in a daemon thread (see ``_text_app``).

    ``render_parts``, when given, renders the same text in parts (compressed as they come, so the whole
    text is never held); ``latest`` holds the newest rendering (``spark_state_observer.exporters.latest``).
    ``openmetrics``, when given, collects the samples that ``?format=openmetrics`` gets in OpenMetrics.
    ``on_refused`` is told the reason (one of ``REFUSAL_REASONS``) of every refused request.
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
        on_refused: Callable[[str], None] | None = None,
        openmetrics: Callable[[], Collector] | None = None,
    ) -> None:
        self.latest = LatestExposition(render_parts or _one_part(render))
        self.refusals = Refusals(on_refused)
        app = _text_app(self.latest, registry, openmetrics)
        if basic_auth:
            app = _BasicAuth(app, *basic_auth, self.refusals)
        try:
            self._httpd = make_server(host, port, app, _BoundedServer, handler_class=_Handler)
        except OSError as exc:
            raise ExporterError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc} (set http_port to a free port, or 0 to pick one)"
            ) from None
        self._httpd.refusals = self.refusals
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
            self._httpd.tls_context = context  # handshakes run on the serving thread, without blocking
        self.host = host
        self.port = self._httpd.server_address[1]
        self.scheme = "https" if certfile else "http"
        self._thread = threading.Thread(target=self._httpd.serve, name="spark-state-observer-http", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}/metrics"

    @property
    def rejected_connections(self) -> int:
        """Connections cut or answered 503 because the endpoint was at its connection limits."""
        return self.refusals.counts["busy"]

    def invalidate(self) -> None:
        """The next GET shows every change made so far (see ``LatestExposition.invalidate``)."""
        self.latest.invalidate()

    def stop(self) -> None:
        self._httpd.stop_serving()
        self._thread.join(timeout=5)
        self._httpd.server_close()
        self.latest.close()


def push_url(gateway: str, job: str, grouping_key: dict[str, str]) -> str:
    """The Pushgateway URL of a job and grouping key, escaped as the Pushgateway's API wants."""
    if not gateway.startswith(("http://", "https://")):
        gateway = "http://" + gateway
    parts = [_path_pair("job", job)] + [_path_pair(k, v) for k, v in sorted(grouping_key.items())]
    return f"{gateway.rstrip('/')}/metrics/{'/'.join(parts)}"


def _path_pair(name: str, value: str) -> str:
    """One ``name/value`` path segment pair. Only plain values go as they are: any other (empty, a slash, a
    space, ``%``, ``.`` or ``..``, which a server's path cleaning would change, non-ASCII) goes base64url
    (``name@base64/...``), which the Pushgateway decodes to the value exactly."""
    if not value:
        return f"{name}@base64/="
    if value in (".", "..") or not _PLAIN_PATH_VALUE.fullmatch(value):
        return f"{name}@base64/{base64.urlsafe_b64encode(value.encode('utf-8', 'replace')).decode()}"
    return f"{name}/{value}"


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
    again, so a gateway that comes back is used again without anyone intervening. ``stop()`` waits
    ``stop_seconds`` at most for a push under way and the last one (``spark_state_observer.exporters.last_export``):
    a last push not done by then is given up and counted once.
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
        stop_seconds: float = 1.0,
    ) -> None:
        url, url_auth = split_credentials(url)
        self._render, self._url = render, url
        self._target = push_url(url, job, grouping_key)
        self._interval, self._timeout, self._stop_seconds = interval, timeout, stop_seconds
        self._on_failure = on_failure
        self._given_up = threading.Event()  # the last push was counted as failed when given up: it is not counted again
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
            if not self._given_up.is_set():
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
        """The last push, within ``stop_seconds`` (a push under way included); given up and counted after that."""
        began = time.monotonic()
        self._stop.set()
        self._thread.join(timeout=self._stop_seconds)
        left = self._stop_seconds - (time.monotonic() - began)
        if not within(left, self.push_once, "push"):
            self._given_up.set()
            self._on_failure()
            log.warning(
                "spark-state-observer: last push to %s not done within %.1fs (stop_flush_seconds): given up", self._url, self._stop_seconds
            )
