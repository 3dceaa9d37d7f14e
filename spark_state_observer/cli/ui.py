"""``spark-state-observer ui``: the state browser (Streamlit) over a history and checkpoints."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    ui = sub.add_parser("ui", help="serve the state browser (Streamlit) over a history and checkpoints")
    ui.add_argument("--history", default=None, help="history database (default: setting history_path)")
    ui.add_argument("--checkpoint-root", action="append", default=[], help="folder whose checkpoints may be opened (repeatable)")
    ui.add_argument(
        "--runbook-url", default=None, help="base URL of alerts/runbook.md for the verdicts' links (default: the one this browser serves)"
    )
    ui.add_argument("--port", type=int, default=8501)
    ui.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")
    ui.set_defaults(run=run, serving=True)


def run(args: argparse.Namespace) -> int:
    """Become ``streamlit run`` on the browser app (exec: the pid stays the same, so stopping it stops the server)."""
    import importlib.util
    import os

    from spark_state_observer.settings import Settings

    if importlib.util.find_spec("streamlit") is None:
        print("spark-state-observer: the state browser is not installed (pip install 'spark-state-observer[ui]')", file=sys.stderr)
        return 2
    from spark_state_observer.browser import APP_PATH
    from spark_state_observer.history.url import secrets_of

    history = args.history or Settings.from_env().history_path
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        APP_PATH,
        "--server.headless",
        "true",
        "--server.address",
        args.host,
        "--server.port",
        str(args.port),
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "viewer",
        "--server.enableStaticServing",  # the runbook file at /app/static/runbook.md, for links written before /runbook
        "true",
        "--",
    ]
    if secrets_of(history):  # a password in the URL goes through the environment, not the process list
        os.environ["SPARK_STATE_OBSERVER_UI_HISTORY"] = history
    else:
        command += ["--history", history]
    for root in args.checkpoint_root:
        command += ["--checkpoint-root", root]
    if args.runbook_url:
        command += ["--runbook-url", args.runbook_url]
    sys.stdout.flush()
    os.execv(sys.executable, command)
