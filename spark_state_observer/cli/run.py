"""``spark-state-observer run -- CMD...``: run a command with the observer attached to every SparkSession it creates.

Like OpenTelemetry's ``opentelemetry-instrument``: the command runs as it is (``python job.py``,
``spark-submit job.py``, ``pyspark``), with ``spark_state_observer/zerocode/boot`` first on ``PYTHONPATH`` so that its
``sitecustomize`` hooks PySpark in the driver (``spark_state_observer.zerocode``). The observer is configured by the
usual ``SPARK_STATE_OBSERVER_*`` and ``OTEL_*`` variables. This process becomes the command (exec): its
pid, signals and exit status are the job's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any

from spark_state_observer.zerocode import boot_path


def add_parser(sub: Any) -> None:
    r = sub.add_parser(
        "run",
        help="run a command (python job.py, spark-submit job.py, pyspark) with the observer attached to every SparkSession it creates",
        description="Run CMD with the observer attached to every SparkSession its driver creates, configured by the "
        "SPARK_STATE_OBSERVER_* and OTEL_* environment variables; nothing in the job changes.",
    )
    r.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command and its arguments, after --")
    r.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    command = list(args.cmd)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("spark-state-observer: run needs a command, e.g. spark-state-observer run -- spark-submit job.py", file=sys.stderr)
        return 2
    executable = shutil.which(command[0])
    if executable is None:
        print(f"spark-state-observer: run: command not found: {command[0]}", file=sys.stderr)
        return 127
    os.environ["PYTHONPATH"] = with_boot_path(os.environ.get("PYTHONPATH", ""))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(executable, command)


def with_boot_path(pythonpath: str) -> str:
    """``PYTHONPATH`` with the boot folder first (once: a nested ``run`` does not add it twice).

    Every other entry stays as it was, empty ones too: an empty entry means the current folder, and a job may
    rely on it. An unset or empty ``PYTHONPATH`` has no entries, so it gains none.
    """
    if not pythonpath:
        return boot_path()
    rest = [p for p in pythonpath.split(os.pathsep) if not (p and os.path.abspath(p) == boot_path())]
    return os.pathsep.join([boot_path(), *rest])
