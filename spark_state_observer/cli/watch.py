"""``spark-state-observer watch DIR [DIR...]``: observe every streaming application in event-log folders.

One long-running process, no change to any job: it follows the folders Spark writes its event logs to
(``spark.eventLog.dir``, the History Server's folder) and serves every application's metrics on one
``/metrics`` endpoint (``spark_state_observer.fleet.runtime``). It stops cleanly on SIGTERM or Ctrl-C, saving
its positions (``--state-file``) so a restart resumes without counting anything twice.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spark_state_observer.fleet.store_mirror import StoreMirror
    from spark_state_observer.settings import Settings

log = logging.getLogger("spark_state_observer")


def shard(text: str) -> tuple[int, int]:
    """``K/N`` (0-based: 0/2 and 1/2 split a folder in two) as ``(K, N)``."""
    k, sep, n = text.partition("/")
    try:
        pair = (int(k), int(n))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: want K/N, e.g. 0/4") from None
    if not sep or pair[1] < 1 or not 0 <= pair[0] < pair[1]:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: want K/N with 0 <= K < N")
    return pair


def add_parser(sub: Any) -> None:
    w = sub.add_parser("watch", help="follow Spark event-log folders and observe every streaming application in them")
    w.add_argument(
        "dirs",
        nargs="+",
        metavar="DIR",
        help="event-log folder (spark.eventLog.dir) or object-store URL (s3://, s3a://, gs://, abfs://, hdfs://); several may be given",
    )
    w.add_argument("--port", type=int, default=None, help="metrics port (default: setting http_port, 9108)")
    w.add_argument("--host", default=None, help="metrics bind address (default: setting http_host, 127.0.0.1)")
    w.add_argument(
        "--history",
        default=None,
        metavar="URL",
        help="write the history here: sqlite:///path (or a path) or postgresql://user@host/db; default: no history",
    )
    w.add_argument(
        "--shard",
        type=shard,
        default=None,
        metavar="K/N",
        help="follow only the logs whose name's CRC-32 modulo N is K (0-based): N watchers split a folder",
    )
    w.add_argument("--poll-interval", type=float, default=2.0, help="seconds between polls of the folders (default 2)")
    w.add_argument("--state-file", default=None, help="save read positions here; a restart resumes from them (default: none)")
    w.add_argument("--grace-seconds", type=float, default=300.0, help="forget a finished or lost application this long after (default 300)")
    w.add_argument(
        "--lost-after-seconds",
        type=float,
        default=600.0,
        help="an application whose log stops growing without an end for this long is lost (default 600); its running "
        "queries are lost sooner, by their own cadence (setting lost_min_seconds, 120 s at least)",
    )
    w.add_argument("--read-finished", action="store_true", help="also read logs already finished when the watcher starts")
    w.add_argument(
        "--follow-symlinks",
        action="store_true",
        help="follow symbolic links wherever they point (default: only those whose target is inside a watched folder)",
    )
    w.add_argument("--labels", default=None, metavar="k=v,...", help="static labels on every series (default: setting labels)")
    w.add_argument("--max-apps", type=int, default=10_000, help="applications followed at most (default 10000)")


def watcher_settings(port: int | None, host: str | None, labels: str | None = None, history: str | None = None) -> Settings | None:
    """The environment's settings with what the command line says over them (``watch`` and ``demo --watch``
    alike); ``None``, after saying why on stderr, when they are not valid."""
    from spark_state_observer.settings import Settings, SettingsError

    overrides: dict[str, Any] = {}
    if port is not None:
        overrides["http_port"] = port
    if host is not None:
        overrides["http_host"] = host
    if labels is not None:
        overrides["labels"] = labels
    if history:
        overrides["history_path"] = history  # a path, sqlite:///path or postgresql://... (spark_state_observer.history.backend)
    try:
        return Settings.from_env(**overrides)
    except SettingsError as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return None


def run(args: argparse.Namespace) -> int:
    from spark_state_observer.capture.storage import StorageError, is_url, redact
    from spark_state_observer.exporters.http import ExporterError
    from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions

    settings = watcher_settings(args.port, args.host, args.labels, args.history)
    if settings is None:
        return 2
    durations = (args.poll_interval, args.grace_seconds, args.lost_after_seconds)
    if not all(math.isfinite(d) for d in durations) or args.poll_interval <= 0 or args.grace_seconds < 0 or args.lost_after_seconds <= 0:
        print(
            "spark-state-observer: --poll-interval and --lost-after-seconds must be finite and > 0, --grace-seconds finite and >= 0",
            file=sys.stderr,
        )
        return 2
    if args.max_apps < 1:
        print(f"spark-state-observer: --max-apps must be at least 1, got {args.max_apps}", file=sys.stderr)
        return 2
    try:
        dirs, mirrors, scratch = _mirrors(args)
    except StorageError as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    missing = [d for d in args.dirs if not is_url(d) and not os.path.isdir(d)]
    if missing:  # a folder that comes later is fine, but a typo should be seen at once
        log.warning("spark-state-observer: not a folder (yet): %s; watching it anyway", ", ".join(missing))
    options = WatchOptions(
        poll_interval=args.poll_interval,
        shard=args.shard,
        state_path=args.state_file,
        grace_seconds=args.grace_seconds,
        lost_after_seconds=args.lost_after_seconds,
        read_finished_at_start=args.read_finished,
        follow_symlinks=args.follow_symlinks,
        max_apps=args.max_apps,
        history=bool(args.history),
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        fleet = FleetObserver(dirs, settings, options, mirrors=mirrors).start()
    except ExporterError as exc:
        signal.signal(signal.SIGTERM, previous)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    print(
        f"spark-state-observer: watching {', '.join(redact(d) if is_url(d) else os.path.abspath(d) for d in args.dirs)}; metrics at "
        f"{fleet.server.url if fleet.server else '(not served)'} (Ctrl-C or SIGTERM stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        fleet.stop()
        signal.signal(signal.SIGTERM, previous)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    print("spark-state-observer: stopped; positions saved" if args.state_file else "spark-state-observer: stopped", file=sys.stderr)
    return 0


def _mirrors(args: argparse.Namespace) -> tuple[list[str], list[StoreMirror], str | None]:
    """The folders to watch: object-store URLs become local mirrors (``spark_state_observer.fleet.store_mirror``).

    With ``--state-file`` a URL's mirror lives beside it (``<state file>.mirror/``), so a restart fetches
    nothing twice; without, in a temporary folder removed at exit (returned as the third item).
    """
    from spark_state_observer.capture.storage import filesystem, is_url
    from spark_state_observer.fleet.store_mirror import StoreMirror

    dirs: list[str] = []
    mirrors: list[StoreMirror] = []
    scratch: str | None = None
    for d in args.dirs:
        if not is_url(d):
            dirs.append(d)
            continue
        if d.lower().startswith("file://"):
            dirs.append(d[len("file://") :])
            continue
        filesystem(d)  # a missing extra or an unsupported URL is said now, before serving
        if args.state_file:
            root = args.state_file + ".mirror"
        else:
            scratch = scratch or tempfile.mkdtemp(prefix="sso-watch-mirror-")
            root = scratch
        local = os.path.join(root, hashlib.sha256(d.encode()).hexdigest()[:16])
        mirrors.append(StoreMirror(d, local, shard=args.shard, read_finished_at_start=args.read_finished))
        dirs.append(local)
    return dirs, mirrors, scratch
