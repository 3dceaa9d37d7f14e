"""Where the browser reads from: the history database and the checkpoint roots it may open.

``streamlit run app.py -- --history DB --checkpoint-root DIR`` passes them as arguments (that is what
``spark-state-observer ui`` does); the environment variables serve embedders and tests, which run the
script without a command line of its own.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from spark_state_observer.mixin.config import MixinConfig
from spark_state_observer.settings import DEFAULT_HISTORY_PATH

ENV_HISTORY = "SPARK_STATE_OBSERVER_UI_HISTORY"
ENV_ROOTS = "SPARK_STATE_OBSERVER_UI_CHECKPOINT_ROOTS"  # os.pathsep-separated
DEFAULT_HISTORY = DEFAULT_HISTORY_PATH
ENV_RUNBOOK = "SPARK_STATE_OBSERVER_UI_RUNBOOK_URL"
# where the verdicts' runbook links go: empty (the mixin's default) is the browser's own /runbook page
DEFAULT_RUNBOOK_URL = MixinConfig().runbook_base_url


@dataclass(frozen=True)
class AppConfig:
    history: str
    checkpoint_roots: tuple[str, ...]
    runbook_url: str = DEFAULT_RUNBOOK_URL  # a runbook of your own (its sections #alertname in lower case), or "": /runbook


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamlit_app", add_help=False)
    p.add_argument("--history", default=None)
    p.add_argument("--checkpoint-root", action="append", default=None)
    p.add_argument("--runbook-url", default=None)
    return p


def load_config(argv: list[str] | None = None) -> AppConfig:
    """Arguments win over the environment; the history defaults to the observer's default file."""
    if argv is None:
        # only a script started as app.py owns sys.argv (under AppTest it is pytest's)
        argv = sys.argv[1:] if os.path.basename(sys.argv[0] if sys.argv else "") == "app.py" else []
    args, _ = parser().parse_known_args(argv)
    history = args.history or os.environ.get(ENV_HISTORY) or os.environ.get("SPARK_STATE_OBSERVER_HISTORY_PATH") or DEFAULT_HISTORY
    roots = args.checkpoint_root or [r for r in os.environ.get(ENV_ROOTS, "").split(os.pathsep) if r]
    runbook = args.runbook_url or os.environ.get(ENV_RUNBOOK) or DEFAULT_RUNBOOK_URL
    return AppConfig(history_location(history), tuple(os.path.realpath(r) for r in roots), runbook.rstrip("#"))


def history_location(history: str) -> str:
    """A file path made absolute; a ``sqlite:///`` or ``postgresql://`` URL as given."""
    return history if "://" in history else os.path.abspath(history)
