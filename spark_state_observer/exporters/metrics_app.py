"""The WSGI app behind the /metrics endpoint: what a request gets, basic auth and its budget of wrong guesses.

The serving (sockets, deadlines, fairness between clients) is ``spark_state_observer.exporters.http``'s; this
module only decides the answer. A GET gets the newest rendering in text format 0.0.4, gzipped when the
client accepts it; ``?format=openmetrics`` gets OpenMetrics through prometheus-client's encoder
(``spark_state_observer.exporters.openmetrics``); ``name[]`` filters go to prometheus-client's own app.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import math
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, make_wsgi_app
from prometheus_client.registry import Collector

from spark_state_observer.exporters.latest import AGE_HEADER, GZIP_LEVEL, LatestExposition
from spark_state_observer.exporters.openmetrics import FORMAT_PARAMETER, negotiated

log = logging.getLogger(__name__)
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Any]

# a plain (not gzipped) answer is decompressed from the rendering this many bytes at a time, as the client reads
PIECE_BYTES = 64 * 1024
# basic auth: wrong credentials one client address may send per window before it gets 429s until the window ends
AUTH_FAILURES_PER_WINDOW = 10
AUTH_WINDOW_SECONDS = 60.0
AUTH_TRACKED_CLIENTS = 4096
# why a request was refused: at the connection limit, header (or answer) too slow, not HTTP we serve,
# wrong credentials, and credentials not even checked because the client guessed too often
REFUSAL_REASONS = ("busy", "timeout", "malformed", "unauthorized", "throttled")
ALLOWED_METHODS = "GET, HEAD, OPTIONS"


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
