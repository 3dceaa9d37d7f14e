"""Run the HTTP hostile corpus against the endpoint's WSGI app behind waitress or cheroot instead of its own server.

    pip install waitress cheroot
    python scripts/library_servers.py waitress|cheroot [-k EXPR]

docs/architecture.md says what this found: why the endpoint keeps its own server. The app, basic auth and
the renderings are the endpoint's own (``metrics_app``, ``latest``); only the serving changes. waitress has
no TLS, so TLS cases go to cheroot in both runs. Each test runs in its own pytest process, bounded in time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = (
    "corpus_leaves and open",
    "trickling",
    "over_tls",
    "flood_of_idle",
    "never_read",
    "every_answer_slot",
    "empty_connects",
)


class LibraryServer:
    """``MetricsServer``'s interface over waitress (plain) or cheroot (TLS, or when asked for)."""

    def __init__(self, render: Callable[[], bytes], registry: Any, host: str, port: int, **kw: Any) -> None:
        from spark_state_observer.exporters import http, metrics_app
        from spark_state_observer.exporters.latest import LatestExposition

        self.latest = LatestExposition(kw.get("render_parts") or metrics_app._one_part(render))
        self.refusals = metrics_app.Refusals(kw.get("on_refused"))
        app: Any = metrics_app._text_app(self.latest, registry)
        if kw.get("basic_auth"):
            app = metrics_app._BasicAuth(app, *kw["basic_auth"], self.refusals)
        self.host, certfile = host, kw.get("certfile", "")
        if os.environ["LIBRARY_SERVER"] == "waitress" and not certfile:
            import waitress

            server: Any = waitress.create_server(
                app, host=host, port=port, threads=http.MAX_CONNECTIONS, channel_timeout=http.HEADER_DEADLINE_SECONDS, cleanup_interval=1
            )
            self.port, run, self._stop = server.effective_port, server.run, server.close
        else:
            from cheroot import wsgi
            from cheroot.ssl.builtin import BuiltinSSLAdapter

            server = wsgi.Server((host, port), app, numthreads=http.MAX_CONNECTIONS, timeout=max(1, int(http.HEADER_DEADLINE_SECONDS)))
            if certfile:
                server.ssl_adapter = BuiltinSSLAdapter(certfile, kw.get("keyfile", ""))
            server.prepare()
            self.port, run, self._stop = server.bind_addr[1], server.serve, server.stop
        self.scheme = "https" if certfile else "http"
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}/metrics"

    def invalidate(self) -> None:
        self.latest.invalidate()

    def stop(self) -> None:
        self._stop()
        self._thread.join(5)
        self.latest.close()


def pytest_collection_modifyitems(items: Iterable[Any]) -> None:
    """The pytest plugin side: every ``MetricsServer`` the tests and the endpoint build is a ``LibraryServer``."""
    from spark_state_observer.exporters import endpoint, http

    http.MetricsServer = endpoint.MetricsServer = LibraryServer  # type: ignore[misc,assignment]
    for item in items:
        if hasattr(item.module, "MetricsServer"):
            item.module.MetricsServer = LibraryServer


def main() -> int:
    kind, tests = sys.argv[1], TESTS if len(sys.argv) < 4 else (sys.argv[3],)
    env = {**os.environ, "LIBRARY_SERVER": kind, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "scripts")])}
    for test in tests:
        args = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "library_servers",
            "tests/unit/test_hostile_http.py",
            "-k",
            test,
        ]
        try:
            out = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120).stdout
            lines = out.strip().splitlines()
            failure = next((line for line in lines if line.startswith("E ")), "")
            print(f"{kind}: {test}: {lines[-1] if lines else '?'} {failure[:160]}")
        except subprocess.TimeoutExpired:
            print(f"{kind}: {test}: no result within 120 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
