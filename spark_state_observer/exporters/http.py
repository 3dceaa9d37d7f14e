"""The HTTP(S) /metrics endpoint's server: its serving loop and its bounds.

Why not waitress or cheroot: docs/architecture.md (the hostile corpus broke their guarantees).

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
does writes a traceback to the job's stderr. Every refusal is counted by reason
(``metrics_app.REFUSAL_REASONS``), for the observer's self-metric.

One connection's pieces are in ``http_request``; the answer (text format 0.0.4 from the newest rendering,
OpenMetrics on request, basic auth) in ``metrics_app``; the Pushgateway pusher in ``push``.
"""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import ssl
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIServer, make_server

from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from spark_state_observer.exporters.http_request import (
    _NOSIGNAL,
    MAX_HEADER_BYTES,
    _Answer,
    _client_of,
    _close,
    _Handler,
    _lingering_close,
    _Pending,
    _plain_answer,
    _Request,
    _request_complete,
)
from spark_state_observer.exporters.latest import LatestExposition
from spark_state_observer.exporters.metrics_app import Refusals, _BasicAuth, _one_part, _text_app

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


class MetricsServer:
    """Serves ``render()`` on http(s)://host:port/metrics in a daemon thread (see ``_text_app``).

    ``render_parts``, when given, renders the same text in parts (compressed as they come, so the whole
    text is never held); ``latest`` holds the newest rendering (``spark_state_observer.exporters.latest``).
    ``openmetrics``, when given, collects the samples that ``?format=openmetrics`` gets in OpenMetrics.
    ``on_refused`` is told the reason (one of ``metrics_app.REFUSAL_REASONS``) of every refused request.
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
