"""The /metrics endpoint and the long-running command against hostile and unlucky clients (issues 23 and 48).

A corpus of generated requests (seeded: the same cases every run) over methods, paths, versions, headers,
line endings, pipelining and hang-up points goes to the exporters' real HTTP server in-process, plain and
with basic auth; a share of it, and a few hundred clients that hang up mid-answer, go to a real
``spark-state-observer watch`` process. After every batch the server must still be up, answer a clean
scrape, have written no traceback anywhere, and have kept its threads bounded. Slow clients, clients that
never read, floods of empty connects, one address asking for every worker, gzip negotiation, the failure
budget of basic auth and static labels have their own tests.
"""

from __future__ import annotations

import base64
import gzip
import logging
import os
import random
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry

from conftest import FIXTURES, ROOT, eventlog_dir
from spark_state_observer.cli.main import main as cli_main
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.exporters import http as http_exporter
from spark_state_observer.exporters import metrics_app
from spark_state_observer.exporters.http import MetricsServer
from spark_state_observer.metrics import catalog
from spark_state_observer.settings import Settings, SettingsError

BODY = b"# HELP hostile_probe A probe.\n# TYPE hostile_probe gauge\nhostile_probe 1\n" * 50
ALLOWED = {200, 400, 401, 405, 408, 429, 431, 503, 505}
CORPUS_SEED = 23
CORPUS_CASES = 1200  # in-process; plus WATCH_CASES against the real command
WATCH_CASES = 150
CREDENTIALS = ("scraper", "s3cret")


# --- the corpus ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One client: the bytes it sends (in pieces), whether it reads the answer, and how it hangs up."""

    pieces: tuple[bytes, ...]
    hang_up: str  # "": read the whole answer; "early": FIN before the end; "fin": FIN right after sending;
    # "rst": reset right after sending; "mid": read a few bytes of the answer, then reset
    clean: bool  # a well-formed GET of /metrics: must get a 200 (or 401/429 with auth) and the text

    def wire(self) -> bytes:
        return b"".join(self.pieces)


METHODS = [b"GET"] * 6 + [
    b"HEAD",
    b"OPTIONS",
    b"POST",
    b"PUT",
    b"DELETE",
    b"PATCH",
    b"TRACE",
    b"CONNECT",
    b"get",
    b"G\xc3\xa9T",
    b"<script>alert(1)</script>",
    b"\xff\xfe\x00",
    b"M" * 3000,
    b"",
]
PATHS = [b"/metrics"] * 6 + [
    b"/",
    b"/favicon.ico",
    b"/metrics?name[]=hostile_probe",
    b"/metrics?name[]=%ff",
    b"/%00",
    b"/%ff%fe%80",
    b"/\xff\xfe\x80",
    b"*",
    b"http://elsewhere.example/metrics",
    b"127.0.0.1:443",
    b"/../../etc/passwd",
    b"/metrics#x",
    b"/" + b"a" * 9000,
    b"/metrics?" + b"&".join(b"k%d=v" % i for i in range(2000)),
]
VERSIONS = (
    [b" HTTP/1.1"] * 5 + [b" HTTP/1.0"] * 3 + [b"", b" HTTP/2.0", b" HTTP/1.1.1", b" HTTP/x", b" FOO", b" HTTP/1.0 extra", b" HTTP/0.9"]
)
ENCODINGS = [
    b"gzip",
    b"gzip;q=0",
    b"GZIP;Q=0.5",
    b"identity",
    b"*;q=0",
    b"x-gzip",
    b"gzip;q=nan",
    b"gzip;q=abc",
    b", , ;;",
    b"gzip;q=0.5, identity",
    b"br, deflate, gzip",
]


def _header(rng: random.Random) -> tuple[bytes, bool]:
    """One header line (without its line ending) and whether it is well-formed."""
    choice = rng.randrange(16)
    if choice < 4:
        return b"Accept-Encoding: " + rng.choice(ENCODINGS), True
    if choice < 6:
        token = base64.b64encode(rng.choice([b"scraper:s3cret", b"scraper:wrong", b"", b"\xff:\xfe"]))
        scheme = rng.choice([b"Basic", b"basic", b"BASIC", b"Bearer", b""])
        return b"Authorization: " + scheme + b" " + rng.choice([token, b"!!!", b"\xe9\xe8", token + b"="]), True
    if choice == 6:
        return b"X-Long: " + b"v" * rng.choice([100, 8000, 70000]), False
    if choice == 7:
        return b"\r\n".join(b"X-Many-%d: v" % i for i in range(rng.choice([50, 150]))), False
    if choice == 8:
        return b"this line has no colon", False
    if choice == 9:
        return b" folded continuation", False
    if choice == 10:
        return b"X-Nul: a\x00b\x1b[31m", False
    if choice == 11:
        return b"X-Bytes: \xff\xfe\xc3\x28", True
    if choice == 12:
        return b"Content-Length: " + rng.choice([b"5", b"-1", b"99999999999999999999", b"abc"]), False
    if choice == 13:
        return b"Transfer-Encoding: chunked", False
    if choice == 14:
        return b"Expect: 100-continue", True
    return b"Connection: " + rng.choice([b"keep-alive", b"close", b"Upgrade"]), True


def corpus(seed: int, count: int) -> Iterator[Case]:
    """``count`` generated clients, the same ones for the same seed."""
    rng = random.Random(seed)
    for _ in range(count):
        method, path, version = rng.choice(METHODS), rng.choice(PATHS), rng.choice(VERSIONS)
        eol = rng.choice([b"\r\n"] * 4 + [b"\n"])
        headers = [b"Host: 127.0.0.1"] if rng.random() < 0.9 else []
        well_formed = True
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
            line, ok = _header(rng)
            headers.append(line)
            well_formed = well_formed and ok and b"Authorization" not in line
        head = method + b" " + path + version + eol + b"".join(h + eol for h in headers) + eol
        if rng.random() < 0.1:  # a body, or a second request in the same packet
            head += rng.choice([b"hello", b"0\r\n\r\n", b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"])
        if rng.random() < 0.03:
            head = bytes(rng.randrange(256) for _ in range(rng.choice([1, 50, 600]))) + eol + eol  # noise
        cut = sorted(rng.sample(range(1, len(head)), min(len(head) - 1, rng.choice([0, 0, 1, 3]))))
        pieces = tuple(head[a:b] for a, b in zip([0, *cut], [*cut, len(head)]))
        hang_up = rng.choice([""] * 6 + ["early", "fin", "rst", "mid"])
        if hang_up == "early":
            pieces = (head[: rng.randrange(1, len(head))],)
        clean = (
            method == b"GET"
            and path == b"/metrics"
            and version in (b" HTTP/1.1", b" HTTP/1.0")
            and well_formed
            and len(head) < 60000
            and pieces[0][:3] == b"GET"
        )
        yield Case(pieces, hang_up, clean)


def _status(answer: bytes) -> int:
    match = re.match(rb"HTTP/1\.[01] (\d{3}) ", answer)
    assert match, answer[:200]
    return int(match.group(1))


def run_case(port: int, case: Case, source: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> bytes | None:
    """Play one client; the answer it read (``None`` when it hung up)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=15, source_address=(source, 0))
    if tls is not None:
        s = tls.wrap_socket(s, server_hostname="127.0.0.1")
    try:
        try:
            for piece in case.pieces:
                s.sendall(piece)
        except OSError:  # answered and closed before the client said everything (a 431, HTTP/0.9)
            pass
        if case.hang_up in ("early", "fin"):
            return None
        if case.hang_up == "rst":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return None
        if case.hang_up == "mid":
            s.recv(20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return None
        answer = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, ssl.SSLEOFError):
                break
            if not chunk:
                break
            answer += chunk
        return answer
    finally:
        s.close()


def check_answer(case: Case, answer: bytes | None, auth: bool, body: bytes | None = BODY) -> int:
    """The answer is HTTP with an expected status; a clean request gets the metrics (or an auth refusal).

    0: the client hung up; -1: a refused request's answer lost because the client went on sending after it
    (the server closed; TCP then resets the connection, and the client may lose what it had not read).
    """
    if answer is None:
        return 0
    if not answer and not case.clean:
        return -1
    status = _status(answer)
    assert status in ALLOWED, (case, answer[:300])
    if case.clean:
        assert status in ((200, 401, 429) if auth else (200,)), (case, answer[:300])
    if status == 200 and case.clean and body is not None:
        head, _, text = answer.partition(b"\r\n\r\n")
        assert (gzip.decompress(text) if b"Content-Encoding: gzip" in head else text) == body
    return status


@pytest.fixture
def quiet_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.DEBUG, logger="spark_state_observer"):
        yield caplog
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], [r.getMessage() for r in caplog.records][:5]
    assert "Traceback" not in caplog.text


def _serve(basic_auth: tuple[str, str] | None = None, certfile: str = "", keyfile: str = "") -> tuple[MetricsServer, dict[str, int]]:
    refused: dict[str, int] = {}

    def count(reason: str) -> None:
        refused[reason] = refused.get(reason, 0) + 1

    server = MetricsServer(
        lambda: BODY, CollectorRegistry(), "127.0.0.1", 0, basic_auth=basic_auth, on_refused=count, certfile=certfile, keyfile=keyfile
    )
    return server, refused


def _clean_scrape(port: int, source: str = "127.0.0.1", auth: tuple[str, str] | None = None) -> bytes:
    headers = b"Host: x\r\nAccept-Encoding: gzip\r\n"
    if auth:
        headers += b"Authorization: Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()) + b"\r\n"
    answer = run_case(port, Case((b"GET /metrics HTTP/1.1\r\n" + headers + b"\r\n",), "", True), source)
    assert answer is not None and _status(answer) == 200, answer
    return gzip.decompress(answer.partition(b"\r\n\r\n")[2])


class ThreadWatch:
    """The most threads alive at once while it runs (sampled)."""

    def __init__(self) -> None:
        self.most = threading.active_count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.most = max(self.most, threading.active_count())

    def __enter__(self) -> ThreadWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.parametrize("auth", [None, CREDENTIALS], ids=["open", "basic-auth"])
def test_the_hostile_corpus_leaves_the_endpoint_serving(auth: tuple[str, str] | None, quiet_log: pytest.LogCaptureFixture, capfd) -> None:
    cases = list(corpus(CORPUS_SEED + (auth is not None), CORPUS_CASES // 2))
    server, refused = _serve(auth)
    baseline = threading.active_count()
    statuses: dict[int, int] = {}
    try:
        with ThreadWatch() as threads, ThreadPoolExecutor(8) as pool:
            for case, answer in zip(cases, pool.map(lambda c: run_case(server.port, c), cases)):
                status = check_answer(case, answer, auth is not None)
                statuses[status] = statuses.get(status, 0) + 1
        # the pool's 8 clients, the server's workers, the serving thread, the sampler
        assert threads.most <= baseline + 8 + http_exporter.MAX_CONNECTIONS + 2
        # from another address: the budget of wrong guesses is per client address
        assert _clean_scrape(server.port, "127.0.0.2", auth) == BODY
    finally:
        server.stop()
    with capfd.disabled():  # the corpus' size and outcome, for the record (pytest -s)
        print(
            f"hostile corpus ({'basic auth' if auth else 'open'}): {len(cases)} cases, "
            f"answers by status {sorted(statuses.items())}, refused {refused}"
        )
    # the corpus reaches every kind of answer
    assert statuses.get(400, 0) > 50 and statuses.get(431, 0) > 0 and statuses.get(0, 0) > 50
    if auth is None:
        assert statuses.get(200, 0) > 50 and statuses.get(405, 0) > 5
    else:  # credentials are checked before anything else, and the failure budget ends the guessing
        assert refused["unauthorized"] == metrics_app.AUTH_FAILURES_PER_WINDOW and statuses.get(429, 0) > 50
    assert refused.get("malformed", 0) > 50 and (auth is None or refused.get("throttled", 0) > 50)
    assert "Traceback" not in capfd.readouterr().err


def test_twenty_trickling_clients_do_not_block_scrapes_and_are_cut(
    monkeypatch: pytest.MonkeyPatch, quiet_log: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(http_exporter, "HEADER_DEADLINE_SECONDS", 3.0)
    obs = PrometheusObserver(Settings(http_port=0)).start()
    port = obs.http_port
    began = time.monotonic()  # before any trickler connects: none may be cut before began + the deadline
    tricklers = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(20)]
    cut_at: dict[int, float] = {}

    def trickle(i: int, s: socket.socket) -> None:
        for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\n":  # never the blank line that ends the header
            try:
                s.sendall(bytes([byte]))
                time.sleep(0.5)
                s.setblocking(False)
                try:
                    s.recv(100)  # answered (408) or closed: cut
                    cut_at[i] = time.monotonic() - began
                    return
                except BlockingIOError:
                    pass
                finally:
                    s.setblocking(True)
            except OSError:
                cut_at[i] = time.monotonic() - began
                return

    workers = [threading.Thread(target=trickle, args=(i, s), daemon=True) for i, s in enumerate(tricklers)]
    for w in workers:
        w.start()
    scrapes: list[tuple[int, float]] = []  # (status, when it was answered)
    try:
        while any(w.is_alive() for w in workers) and time.monotonic() - began < 30:
            status = _status(run_case(port, Case((b"GET /metrics HTTP/1.0\r\n\r\n",), "", True)) or b"")
            scrapes.append((status, time.monotonic() - began))
            time.sleep(0.1)
        for w in workers:
            w.join(5)
        text = obs.prometheus.exposition().decode()
    finally:
        for s in tricklers:
            s.close()
        obs.stop()
    assert all(status == 200 for status, _ in scrapes)
    assert len(cut_at) == 20 and min(cut_at.values()) >= 3.0, cut_at  # cut by the header deadline, not before
    # answered while all twenty were connected and trickling (before, they held every connection thread)
    assert len([at for _, at in scrapes if at < min(cut_at.values())]) >= 5
    assert obs.server is not None and obs.server.refusals.counts["timeout"] == 20
    assert 'spark_state_observer_http_requests_refused_total{reason="timeout"} 20.0' in text


def test_hostile_clients_over_tls(tls_files, monkeypatch: pytest.MonkeyPatch, quiet_log: pytest.LogCaptureFixture, capfd) -> None:
    """Handshakes are made on the serving thread without blocking: garbage instead of a ClientHello,
    hang-ups mid-handshake, clients that never handshake, then the corpus over TLS."""
    monkeypatch.setattr(http_exporter, "HEADER_DEADLINE_SECONDS", 1.0)
    cert, key = tls_files
    server, refused = _serve(certfile=str(cert), keyfile=str(key))
    context = ssl.create_default_context(cafile=str(cert))
    rng = random.Random(CORPUS_SEED)
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(10)]  # never handshake
    try:
        for n in range(100):
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                if n % 2:  # noise where a ClientHello belongs
                    s.sendall(bytes(rng.randrange(256) for _ in range(rng.choice([1, 5, 300]))))
                else:  # the first bytes of a real handshake, then gone
                    hello = context.wrap_bio(ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_hostname="127.0.0.1")
                    with pytest.raises(ssl.SSLWantReadError):
                        hello.do_handshake()
                    data = outgoing.read()
                    s.sendall(data[: rng.randrange(1, len(data))])
        statuses = [check_answer(case, run_case(server.port, case, tls=context), False) for case in corpus(CORPUS_SEED + 2, 100)]
        assert _status(run_case(server.port, Case((b"GET /metrics HTTP/1.1\r\n\r\n",), "", True), tls=context) or b"") == 200
        time.sleep(1.5)  # past the deadline of the idle ones
        for s in idle:  # each was cut: by its deadline, or earlier as the oldest when newer clients needed room
            try:
                assert s.recv(1) == b""
            except ConnectionResetError:
                pass
        assert refused.get("timeout", 0) + refused.get("busy", 0) >= 10, refused
    finally:
        for s in idle:
            s.close()
        server.stop()
    with capfd.disabled():
        print(
            f"hostile corpus over TLS: 100 handshake attacks, 10 clients never handshaking, {len(statuses)} cases, answers by status {sorted(set(statuses))}"
        )
    assert 200 in statuses and 400 in statuses
    assert "Traceback" not in capfd.readouterr().err


def test_a_flood_of_idle_connections_does_not_lock_scrapes_out() -> None:
    """Past ``MAX_PENDING`` connections still sending their header, one that has sent nothing is cut for the newest
    (the oldest of the address holding the most): a scrape arriving in a flood is answered at once, not after the
    flood's deadlines."""
    server, refused = _serve()
    flood = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(3 * http_exporter.MAX_PENDING)]
    try:
        answers = [run_case(server.port, Case((b"HEAD /metrics HTTP/1.0\r\n\r\n",), "", False)) or b"" for _ in range(5)]
        assert _clean_scrape(server.port) == BODY
    finally:
        for s in flood:
            s.close()
        server.stop()
    assert all(_status(a) == 200 and a.endswith(b"\r\n\r\n") and f"Content-Length: {len(BODY)}".encode() in a for a in answers)
    assert refused["busy"] >= 2 * http_exporter.MAX_PENDING


@pytest.mark.parametrize(
    "header, gzipped",
    [
        ("gzip", True),
        ("GZIP", True),
        ("x-gzip", True),
        ("gzip;q=0", False),
        ("gzip; q=0.0", False),
        ("gzip;Q=0", False),
        ("*;q=0", False),
        ("*", True),
        ("identity", False),
        ("gzip;q=0.5, identity", False),
        ("gzip, identity;q=0", True),
        ("deflate, br", False),
        ("gzip;q=abc", False),
        ("gzip;q=2", False),
        ("", False),
    ],
)
def test_gzip_follows_the_q_values(header: str, gzipped: bool) -> None:
    server, _ = _serve()
    try:
        answer = run_case(server.port, Case((f"GET /metrics HTTP/1.1\r\nAccept-Encoding: {header}\r\n\r\n".encode(),), "", True))
    finally:
        server.stop()
    assert answer is not None and _status(answer) == 200
    head, _, body = answer.partition(b"\r\n\r\n")
    assert (b"Content-Encoding: gzip" in head) == gzipped
    assert (gzip.decompress(body) if gzipped else body) == BODY


def test_basic_auth_takes_any_case_and_bounds_guesses(monkeypatch: pytest.MonkeyPatch) -> None:
    server, refused = _serve(CREDENTIALS)
    token = base64.b64encode(b"scraper:s3cret")
    wrong = base64.b64encode(b"scraper:guess")

    def ask(authorization: bytes, source: str = "127.0.0.1") -> int:
        request = b"GET /metrics HTTP/1.1\r\nAuthorization: " + authorization + b"\r\n\r\n"
        return _status(run_case(server.port, Case((request,), "", True), source) or b"")

    try:
        assert [ask(scheme + b" " + token) for scheme in (b"Basic", b"basic", b"BASIC", b"bAsIc")] == [200] * 4
        assert [ask(b"Basic " + wrong) for _ in range(metrics_app.AUTH_FAILURES_PER_WINDOW)] == [401] * 10
        assert ask(b"Basic " + wrong) == 429 and ask(b"Basic " + token) == 429  # locked out: not even right ones are checked
        assert ask(b"Basic " + token, "127.0.0.3") == 200  # other clients are not
        monkeypatch.setattr(metrics_app, "AUTH_WINDOW_SECONDS", 0.0)  # as if the window had passed
        assert ask(b"Basic " + token) == 200
    finally:
        server.stop()
    assert refused == {"unauthorized": 10, "throttled": 2}


def test_static_labels_may_not_take_a_name_any_series_uses(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    for name in sorted({n for spec in catalog.CATALOG for n in spec.label_names} | {"app", "job", "instance", "le"}):
        with pytest.raises(SettingsError, match=f"'{name}' is a label the observer writes itself"):
            Settings.from_env(labels=f"cluster=a,{name}=x")
    labels = Settings.from_env(labels="cluster=a\x00b\x1b[2J\ud800," + "zone=" + "z" * 5000).static_labels
    assert labels == (("cluster", "a\ufffdb\ufffd[2J\ufffd"), ("zone", "z" * 200))
    assert cli_main(["watch", str(tmp_path), "--port", "0", "--labels", "topic=orders"]) == 2
    assert "'topic' is a label the observer writes itself" in capsys.readouterr().err


def test_watch_refuses_durations_and_bounds_it_cannot_use(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    """NaN or infinite durations would make its loop raise or never forget; each is a clear error at start."""
    for flag, value in [
        ("--poll-interval", "nan"),
        ("--poll-interval", "0"),
        ("--grace-seconds", "inf"),
        ("--lost-after-seconds", "-1"),
        ("--max-apps", "0"),
    ]:
        assert cli_main(["watch", str(tmp_path), "--port", "0", flag, value]) == 2, flag
        assert flag in capsys.readouterr().err


def test_a_short_command_still_ends_quietly_on_a_closed_pipe() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_state_observer.cli", "metrics"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=_env()
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(30) in (0, -signal.SIGPIPE) and b"Traceback" not in err and b"BrokenPipe" not in err


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_STATE_OBSERVER_")}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.slow
def test_watch_survives_clients_that_hang_up_and_the_corpus(tmp_path) -> None:
    """The command's own process (its signal handling, not a test's): 300 clients that hang up mid-answer,
    then part of the corpus; it keeps answering and still saves its positions on SIGTERM."""
    logs = tmp_path / "logs"
    shutil.copytree(eventlog_dir(os.path.join(FIXTURES, "rocksdb_plain_log", "run1")), logs)
    state = tmp_path / "positions.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spark_state_observer.cli",
            "watch",
            str(logs),
            "--read-finished",
            "--grace-seconds",
            "3600",
            "--port",
            "0",
            "--poll-interval",
            "0.5",
            "--state-file",
            str(state),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=_env(),
    )
    assert proc.stderr is not None
    try:
        port = 0
        for _ in range(20):
            found = re.search(r"127\.0\.0\.1:(\d+)/metrics", proc.stderr.readline().decode())
            if found:
                port = int(found.group(1))
                break
        deadline = time.monotonic() + 30
        while b"spark_streaming_batches_total" not in _clean_scrape(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
        hang_ups = [Case((request,), how, True) for how in ("fin", "rst", "mid") for _ in range(100)]
        for case in hang_ups:
            run_case(port, case)
            assert proc.poll() is None, f"watch exited with {proc.returncode}"
        statuses = [check_answer(case, run_case(port, case), False, None) for case in corpus(CORPUS_SEED + 7, WATCH_CASES)]
        assert proc.poll() is None
        deadline = time.monotonic() + 10  # the watcher's own figures are published at the end of each round
        while "http_requests_refused_total" not in (text := _clean_scrape(port).decode()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "spark_streaming_batches_total" in text and 'spark_state_observer_http_requests_refused_total{reason="malformed"}' in text
        print(f"watch: {len(hang_ups)} hang-ups and {len(statuses)} corpus cases, answers by status {sorted(set(statuses))}")
    finally:
        proc.send_signal(signal.SIGTERM)
        err = proc.stderr.read().decode()
        code = proc.wait(30)
    assert code == 0, err
    assert "positions saved" in err and state.stat().st_size > 0
    assert "Traceback" not in err


# --- clients that hold answers or crowd out scrapers (issue 48) -----------------------------------------
BIG_BODY = b"# HELP hostile_big A probe.\n# TYPE hostile_big gauge\n" + b"".join(b'hostile_big{n="%d"} 1\n' % i for i in range(400_000))


def _non_reader(port: int, request: bytes) -> socket.socket:
    """A client that sends ``request`` and never reads (a small receive window: the answer backs up at once),
    returned once its answer has begun to arrive (peeked at, not read)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    s.sendall(request)
    assert s.recv(12, socket.MSG_PEEK) == b"HTTP/1.0 200"
    return s


def test_clients_that_never_read_hold_no_answer_slot(monkeypatch: pytest.MonkeyPatch, quiet_log: pytest.LogCaptureFixture) -> None:
    """Twice ``MAX_CONNECTIONS`` clients ask for a large plain answer and never read it: scrapes meanwhile are all
    answered (the answers are written by the serving thread as clients take them, not by a worker each), the
    threads stay bounded, and each non-reader is cut at the answer deadline and counted."""
    monkeypatch.setattr(http_exporter, "RESPONSE_DEADLINE_SECONDS", 3.0)
    refused: dict[str, int] = {}
    server = MetricsServer(
        lambda: BIG_BODY, CollectorRegistry(), "127.0.0.1", 0, on_refused=lambda r: refused.__setitem__(r, refused.get(r, 0) + 1)
    )
    server.latest.ahead_after = 0.0  # every GET within max_age is served this one rendering, as a fleet's are
    assert _clean_scrape(server.port) == BIG_BODY
    baseline = threading.active_count()
    holders = [_non_reader(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n") for _ in range(2 * http_exporter.MAX_CONNECTIONS)]
    try:
        began = time.monotonic()
        with ThreadWatch() as threads:
            statuses = []
            for _ in range(30):  # while every holder is still within its deadline
                statuses.append(
                    _status(run_case(server.port, Case((b"GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n",), "", True)) or b"")
                )
            scraped_within = time.monotonic() - began
        deadline = time.monotonic() + http_exporter.RESPONSE_DEADLINE_SECONDS + 5
        while refused.get("timeout", 0) < len(holders) and time.monotonic() < deadline:  # none has read a byte yet
            time.sleep(0.1)
        cut = 0
        for s in holders:  # each was closed by the server: what it had taken, then the end
            try:
                while s.recv(1 << 20):
                    pass
                cut += 1
            except ConnectionResetError:
                cut += 1
    finally:
        for s in holders:
            s.close()
        server.stop()
    assert statuses == [200] * 30, statuses
    assert scraped_within < http_exporter.RESPONSE_DEADLINE_SECONDS  # answered while the holders were all connected
    assert threads.most <= baseline + http_exporter.MAX_CONNECTIONS + 1
    assert cut == len(holders) and refused.get("timeout", 0) == len(holders), refused


def test_a_client_address_cannot_take_every_answer_slot() -> None:
    """Requests waiting on a slow rendering from one address get 503s past their share; another address is answered."""
    release = threading.Event()

    def slow() -> bytes:
        release.wait(10)
        return BODY

    server, refused = _serve_with(slow)
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    flood = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(http_exporter.MAX_CONNECTIONS)]
    try:
        for s in flood:
            s.sendall(request)
        deadline = time.monotonic() + 10
        while (
            refused.get("busy", 0) < http_exporter.MAX_CONNECTIONS - http_exporter.MAX_CONNECTIONS_PER_CLIENT
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        other: list[bytes | None] = []
        asker = threading.Thread(target=lambda: other.append(run_case(server.port, Case((request,), "", True), "127.0.0.2")))
        asker.start()
        time.sleep(0.5)
        release.set()
        asker.join(10)
        answers = [s.recv(1 << 16) for s in flood]
    finally:
        release.set()
        for s in flood:
            s.close()
        server.stop()
    assert other and other[0] is not None and _status(other[0]) == 200
    statuses = sorted(_status(a) for a in answers)
    assert statuses.count(200) == http_exporter.MAX_CONNECTIONS_PER_CLIENT and statuses.count(503) == len(flood) - statuses.count(200)


def _serve_with(render) -> tuple[MetricsServer, dict[str, int]]:
    refused: dict[str, int] = {}
    server = MetricsServer(render, CollectorRegistry(), "127.0.0.1", 0, on_refused=lambda r: refused.__setitem__(r, refused.get(r, 0) + 1))
    return server, refused


FLOOD = """
import socket, sys, threading
port, made, held, done = int(sys.argv[1]), 0, [], threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
while not done.is_set():
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=1))
        made += 1
    except OSError:
        pass
    if len(held) > 600:  # long cut by the server by then: let go of the oldest
        held.pop(0).close()
print(made)
"""


class _Flood:
    """Empty connects from 127.0.0.1 as fast as a process of its own makes them, each held until the server cuts it."""

    def __init__(self, port: int) -> None:
        self.made = 0
        self._proc = subprocess.Popen(
            [sys.executable, "-c", FLOOD, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
        )

    def __enter__(self) -> _Flood:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            out, _ = self._proc.communicate("", timeout=20)  # stdin closed: it stops and says how many it made
            self.made = int(out.strip() or 0)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _late_scrape(port: int, source: str, first: bytes, rest: bytes, delay: float = 0.1) -> int:
    """A scraper that sends ``first`` at once and ``rest`` ``delay`` seconds later, then reads its answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as s:
            if first:
                s.sendall(first)
            time.sleep(delay)
            s.sendall(rest)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
    except OSError:  # cut before it could send or read
        return 0
    return _status(answer) if answer else 0


def test_a_flood_of_empty_connects_does_not_evict_scrapers() -> None:
    """Empty connects as fast as a thread makes them (the issue saw ~1,000 a second) while scrapers take 100 ms to send
    their header: from another address, the flood's own connections make room, never the scraper's; from the same
    address, one that has sent part of its request is kept before the flood's empty ones."""
    server, refused = _serve()
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    try:
        with _Flood(server.port) as flood:
            deadline = time.monotonic() + 30
            while refused.get("busy", 0) < http_exporter.MAX_PENDING and time.monotonic() < deadline:
                time.sleep(0.01)  # until the pending connections are full and turning over
            began, busy = time.monotonic(), refused.get("busy", 0)
            elsewhere = [_late_scrape(server.port, "127.0.0.2", b"", request) for _ in range(20)]
            started = [_late_scrape(server.port, "127.0.0.1", request[:10], request[10:]) for _ in range(20)]
            same = [_late_scrape(server.port, "127.0.0.1", b"", request) for _ in range(20)]  # for the record only
            rate = (refused.get("busy", 0) - busy) / (time.monotonic() - began)
    finally:
        server.stop()
    print(
        f"flood of {flood.made} empty connects, {rate:.0f} a second cut while scraping: "
        f"scrapes from elsewhere {sorted(elsewhere)}, from the same address with part of the request sent {sorted(started)}, "
        f"with nothing sent for 100 ms {sorted(same)}; refused {refused}"
    )
    assert rate > 0  # the flood went on turning over the pending connections while the scrapers waited
    assert elsewhere == [200] * 20 and started == [200] * 20
