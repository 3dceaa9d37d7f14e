"""What scrapes of the /metrics endpoint get while other clients misbehave (issue 23).

    PYTHONPATH=. python bench/endpoint_clients.py [--body-mb 2] [--gets 200] [--seconds 20] [--tricklers 20]

Serves a synthetic exposition of ``--body-mb`` MB (text format lines, gzipped by the endpoint as for
Prometheus) with ``spark_state_observer.exporters.http.MetricsServer`` in this process on 127.0.0.1, then GETs it
(``Accept-Encoding: gzip``, a new connection each, as Prometheus does with keep-alive off):

- quiet: ``--gets`` GETs back to back, nothing else connected;
- trickling: for ``--seconds``, ``--tricklers`` clients each sending one header byte every 2 s (reconnecting
  when cut) while a scraper GETs every 0.25 s with a 5 s timeout.

Prints the median and 95th percentile of a GET, and the share of GETs answered 200 while trickling. Run
it with ``PYTHONPATH`` at another checkout to compare endpoints (only ``MetricsServer``'s first four
arguments are used).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time

from prometheus_client import CollectorRegistry

from spark_state_observer.exporters.http import MetricsServer


def _body(megabytes: float) -> bytes:
    line = 'spark_state_rows{{query="q{0}",query_id="00000000-0000-0000-0000-{0:012d}",operator="agg"}} {0}.0\n'
    lines, size, i = [], 0, 0
    while size < megabytes * 1e6:
        text = line.format(i)
        lines.append(text)
        size += len(text)
        i += 1
    return "".join(lines).encode()


def _get(port: int, timeout: float) -> tuple[int, float]:
    """(status, seconds) of one GET; status 0 when refused, reset or timed out."""
    began = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nAccept-Encoding: gzip\r\n\r\n")
            answer = bytearray()
            while chunk := s.recv(1 << 16):
                answer += chunk
    except OSError:
        return 0, time.perf_counter() - began
    status = int(answer[9:12]) if answer.startswith(b"HTTP/1.") else 0
    return status, time.perf_counter() - began


def _trickle(port: int, stop: threading.Event) -> None:
    request = b"GET /metrics HTTP/1.1\r\nHost: bench\r\nX-Slow: " + b"x" * 200
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                for byte in request:
                    s.sendall(bytes([byte]))
                    if stop.wait(2.0):
                        return
        except OSError:
            stop.wait(0.1)


def _summary(times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(ordered) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--body-mb", type=float, default=2.0)
    ap.add_argument("--gets", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--tricklers", type=int, default=20)
    args = ap.parse_args()
    body = _body(args.body_mb)
    server = MetricsServer(lambda: body, CollectorRegistry(), "127.0.0.1", 0)
    try:
        quiet = [_get(server.port, 10.0) for _ in range(args.gets)]
        assert all(status == 200 for status, _ in quiet), sorted({status for status, _ in quiet})
        print(f"quiet: {len(quiet)} GETs of {len(body) / 1e6:.1f} MB (gzip): {_summary([t for _, t in quiet])}")
        stop = threading.Event()
        tricklers = [threading.Thread(target=_trickle, args=(server.port, stop), daemon=True) for _ in range(args.tricklers)]
        for t in tricklers:
            t.start()
        time.sleep(1.0)  # all connected
        scrapes: list[tuple[int, float]] = []
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            scrapes.append(_get(server.port, 5.0))
            time.sleep(0.25)
        stop.set()
        answered = [t for status, t in scrapes if status == 200]
        print(
            f"{args.tricklers} trickling clients: {len(answered)}/{len(scrapes)} GETs answered"
            + (f", {_summary(answered)}" if answered else "")
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
