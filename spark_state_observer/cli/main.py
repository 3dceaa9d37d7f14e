"""The ``spark-state-observer`` command: each subcommand is one module here with ``add_parser`` and its ``run``."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from spark_state_observer.cli import backtest, demo, inspect, mcp, reference, replay, retire, run, size, ui, watch
from spark_state_observer.mixin import cli as mixin_cli

# in the order ``--help`` lists them; each registers its subcommand(s) with set_defaults(run=...), and
# serving=True when it serves clients until stopped
COMMANDS = (demo, replay, inspect, ui, backtest, size, watch, run, retire, mcp, reference, mixin_cli)


def build_parser() -> argparse.ArgumentParser:
    """The command line: every subcommand and its options (the hostile corpus enumerates the subcommands from it)."""
    parser = argparse.ArgumentParser(prog="spark-state-observer", description="Observe the state of Spark Structured Streaming jobs.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # a short command dies quietly of a closed pipe (`replay ... | head`), as other command-line tools do; one that
    # serves clients keeps Python's handling (ignored), so a client that hangs up is an error on that connection only
    if hasattr(signal, "SIGPIPE") and argv is None and not getattr(args, "serving", False):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
