"""``spark-state-observer mcp``: the read-only MCP server for assistants (``spark_state_observer.mcp``).

stdio by default (an assistant starts the command and talks on its stdin and stdout); ``--transport http``
serves streamable HTTP at ``/mcp`` for a shared server, with the TLS and basic-auth settings of ``/metrics``
(``SPARK_STATE_OBSERVER_TLS_CERTFILE``, ``..._BASIC_AUTH_USER`` and the rest; ``spark-state-observer settings``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from contextlib import closing
from typing import Any


def add_parser(sub: Any) -> None:
    mcp = sub.add_parser("mcp", help="serve a read-only MCP server for assistants over a history and checkpoints (stdio or HTTP)")
    mcp.add_argument("--history", default=None, metavar="URL", help="history database (default: setting history_path)")
    mcp.add_argument("--checkpoint-root", action="append", default=[], help="folder whose checkpoints may be inspected (repeatable)")
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="stdio (default) or streamable HTTP")
    mcp.add_argument("--host", default=None, help="HTTP bind address (default: setting http_host, 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765; 0 picks a free one)")
    mcp.set_defaults(run=run, serving=True)


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None:
        print("spark-state-observer: the MCP server is not installed (pip install 'spark-state-observer[mcp]')", file=sys.stderr)
        return 2
    from spark_state_observer.history.backend import HistoryError, open_backend
    from spark_state_observer.history.url import parse, redact
    from spark_state_observer.mcp.serve import ServeError, serve_http, serve_stdio
    from spark_state_observer.mcp.server import build
    from spark_state_observer.settings import Settings, SettingsError

    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"spark-state-observer mcp: {exc}", file=sys.stderr)
        return 2
    history = args.history or settings.history_path
    try:
        target = parse(history)
        if target.kind == "sqlite" and not os.path.isfile(target.location):
            print(f"spark-state-observer mcp: no history at {redact(history)} (give --history, or run the observer first)", file=sys.stderr)
            return 2
        with closing(open_backend(history, readonly=True)) as backend:
            backend.rows("SELECT query_id FROM queries LIMIT 1")  # a history, not any database
    except HistoryError as exc:
        print(f"spark-state-observer mcp: {exc}", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"spark-state-observer mcp: --port must be 0..65535, not {args.port}", file=sys.stderr)
        return 2
    server = build(history, tuple(args.checkpoint_root))
    if args.transport == "stdio":
        serve_stdio(server)
        return 0
    host = args.host or settings.http_host

    def announce(url: str) -> None:
        auth = " (basic auth)" if settings.basic_auth_user else ""
        print(f"spark-state-observer mcp: serving {url}{auth} over history {redact(history)}", file=sys.stderr, flush=True)

    try:
        serve_http(server, host, args.port, settings, announce)
    except ServeError as exc:
        print(f"spark-state-observer mcp: {exc}", file=sys.stderr)
        return 2
    return 0
