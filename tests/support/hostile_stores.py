"""Object-store endpoints that misbehave, on loopback, for the hostile tests and bench/store_hostile.py.

- ``Blackhole``: a TCP socket that accepts connections and never answers (a dead load balancer, a firewall
  that drops replies): a client waits for its read timeout.
- ``EndlessListing``: answers every S3 ``ListObjectsV2`` with a full page of new keys and ``IsTruncated``
  true, forever (a broken or hostile S3-compatible server); other requests are 404.
  ``pages`` counts the pages served.

Each is stopped by ``stop``; threads are daemons.
"""

from __future__ import annotations

import http.server
import socket
import threading
from typing import Any
from urllib.parse import parse_qs, urlsplit


class Blackhole:
    """Accepts TCP connections on 127.0.0.1 and never answers; ``url`` is an http:// endpoint for a client."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self._held.append(conn)  # read nothing, answer nothing, keep it open

    def stop(self) -> None:
        self._stop.set()
        for conn in self._held:
            conn.close()
        self.sock.close()


class EndlessListing:
    """An S3 endpoint whose listing never ends: each page 1,000 new keys under the prefix asked, truncated."""

    def __init__(self) -> None:
        pages = [0]

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                if "list-type" not in query:
                    self._answer(404, b"<?xml version='1.0'?><Error><Code>NoSuchKey</Code><Message>no</Message></Error>")
                    return
                prefix = query.get("prefix", [""])[0]
                pages[0] += 1
                n = pages[0]
                keys = "".join(
                    f'<Contents><Key>{prefix}junk/{n:09d}/{i:04d}-{"x" * 60}</Key><Size>10</Size><ETag>"e"</ETag></Contents>'
                    for i in range(1000)
                )
                body = (
                    "<?xml version='1.0' encoding='UTF-8'?><ListBucketResult xmlns='http://s3.amazonaws.com/doc/2006-03-01/'>"
                    f"<Name>b</Name><Prefix>{prefix}</Prefix><KeyCount>1000</KeyCount><MaxKeys>1000</MaxKeys>"
                    f"<IsTruncated>true</IsTruncated><NextContinuationToken>t{n}</NextContinuationToken>{keys}</ListBucketResult>"
                ).encode()
                self._answer(200, body)

            def do_HEAD(self) -> None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.pages = pages
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
