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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spark_state_observer.fleet.runtime import WatchOptions
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


@dataclass(frozen=True)
class WatchFlag:
    """One ``watch`` option, declared once: its argparse arguments and where its value goes."""

    name: str
    kwargs: Mapping[str, Any]
    setting: str | None = None  # the Settings field it overrides when given
    option: str | None = None  # the WatchOptions field it sets
    to_option: Callable[[Any], Any] | None = None  # how its value becomes that field's (default: as it is)

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")


def _given(text: str) -> str | None:
    """``--history ""`` is no history, as no ``--history`` is."""
    return text or None


def _flag(
    name: str, setting: str | None = None, option: str | None = None, to_option: Callable[[Any], Any] | None = None, **kwargs: Any
) -> WatchFlag:
    return WatchFlag(name, kwargs, setting, option, to_option)


# the defaults are WatchOptions' own (a test holds them equal); the help texts are what ``watch --help`` prints
WATCH_FLAGS = (
    _flag("--port", setting="http_port", type=int, default=None, help="metrics port (default: setting http_port, 9108)"),
    _flag("--host", setting="http_host", default=None, help="metrics bind address (default: setting http_host, 127.0.0.1)"),
    _flag(
        "--history",
        setting="history_path",  # a path, sqlite:///path or postgresql://... (spark_state_observer.history.backend)
        option="history",
        to_option=bool,
        type=_given,
        default=None,
        metavar="URL",
        help="write the history here: sqlite:///path (or a path) or postgresql://user@host/db; default: no history",
    ),
    _flag(
        "--shard",
        option="shard",
        type=shard,
        default=None,
        metavar="K/N",
        help="follow only the logs whose name's CRC-32 modulo N is K (0-based): N watchers split a folder",
    ),
    _flag("--poll-interval", option="poll_interval", type=float, default=2.0, help="seconds between polls of the folders (default 2)"),
    _flag("--state-file", option="state_path", default=None, help="save read positions here; a restart resumes from them (default: none)"),
    _flag(
        "--grace-seconds",
        option="grace_seconds",
        type=float,
        default=300.0,
        help="forget a finished or lost application this long after (default 300)",
    ),
    _flag(
        "--lost-after-seconds",
        option="lost_after_seconds",
        type=float,
        default=600.0,
        help="an application whose log stops growing without an end for this long is lost (default 600); its running "
        "queries are lost sooner, by their own cadence (setting lost_min_seconds, 120 s at least)",
    ),
    _flag(
        "--read-finished",
        option="read_finished_at_start",
        action="store_true",
        help="also read logs already finished when the watcher starts",
    ),
    _flag(
        "--follow-symlinks",
        option="follow_symlinks",
        action="store_true",
        help="follow symbolic links wherever they point (default: only those whose target is inside a watched folder)",
    ),
    _flag("--labels", setting="labels", default=None, metavar="k=v,...", help="static labels on every series (default: setting labels)"),
    _flag("--max-apps", option="max_apps", type=int, default=10_000, help="applications followed at most (default 10000)"),
)


class WatchArgsError(ValueError):
    """A ``watch`` option out of range, or settings that are not valid: one line for stderr."""


def add_parser(sub: Any) -> None:
    w = sub.add_parser("watch", help="follow Spark event-log folders and observe every streaming application in them")
    w.add_argument(
        "dirs",
        nargs="+",
        metavar="DIR",
        help="event-log folder (spark.eventLog.dir) or object-store URL (s3://, s3a://, gs://, abfs://, hdfs://); several may be given",
    )
    for flag in WATCH_FLAGS:
        w.add_argument(flag.name, **flag.kwargs)
    w.set_defaults(run=run, serving=True)


def watch_setup(args: argparse.Namespace) -> tuple[Settings, WatchOptions]:
    """The settings (the environment's, with the flags over them) and the watcher's options, from parsed flags."""
    from spark_state_observer.fleet.runtime import WatchOptions
    from spark_state_observer.settings import Settings, SettingsError

    overrides: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    for flag in WATCH_FLAGS:
        value = getattr(args, flag.dest)
        if flag.setting and value is not None:
            overrides[flag.setting] = value
        if flag.option:
            fields[flag.option] = flag.to_option(value) if flag.to_option else value
    try:
        settings = Settings.from_env(**overrides)
    except SettingsError as exc:
        raise WatchArgsError(str(exc)) from None
    options = WatchOptions(**fields)
    durations = (options.poll_interval, options.grace_seconds, options.lost_after_seconds)
    if (
        not all(math.isfinite(d) for d in durations)
        or options.poll_interval <= 0
        or options.grace_seconds < 0
        or options.lost_after_seconds <= 0
    ):
        raise WatchArgsError("--poll-interval and --lost-after-seconds must be finite and > 0, --grace-seconds finite and >= 0")
    if options.max_apps < 1:
        raise WatchArgsError(f"--max-apps must be at least 1, got {options.max_apps}")
    return settings, options


def run(args: argparse.Namespace) -> int:
    from spark_state_observer.capture.storage import StorageError, is_url, redact
    from spark_state_observer.exporters.http import ExporterError
    from spark_state_observer.fleet.runtime import FleetObserver

    try:
        settings, options = watch_setup(args)
        dirs, mirrors, scratch = _mirrors(args.dirs, options)
    except (WatchArgsError, StorageError) as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    missing = [d for d in args.dirs if not is_url(d) and not os.path.isdir(d)]
    if missing:  # a folder that comes later is fine, but a typo should be seen at once
        log.warning("spark-state-observer: not a folder (yet): %s; watching it anyway", ", ".join(missing))
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
    print("spark-state-observer: stopped; positions saved" if options.state_path else "spark-state-observer: stopped", file=sys.stderr)
    return 0


def _mirrors(urls: list[str], options: WatchOptions) -> tuple[list[str], list[StoreMirror], str | None]:
    """The folders to watch: object-store URLs become local mirrors (``spark_state_observer.fleet.store_mirror``).

    With ``--state-file`` a URL's mirror lives beside it (``<state file>.mirror/``), so a restart fetches
    nothing twice; without, in a temporary folder removed at exit (returned as the third item).
    """
    from spark_state_observer.capture.storage import filesystem, is_url
    from spark_state_observer.fleet.store_mirror import StoreMirror

    dirs: list[str] = []
    mirrors: list[StoreMirror] = []
    scratch: str | None = None
    for d in urls:
        if not is_url(d):
            dirs.append(d)
            continue
        if d.lower().startswith("file://"):
            dirs.append(d[len("file://") :])
            continue
        filesystem(d)  # a missing extra or an unsupported URL is said now, before serving
        if options.state_path:
            root = options.state_path + ".mirror"
        else:
            scratch = scratch or tempfile.mkdtemp(prefix="sso-watch-mirror-")
            root = scratch
        local = os.path.join(root, hashlib.sha256(d.encode()).hexdigest()[:16])
        mirrors.append(StoreMirror(d, local, shard=options.shard, read_finished_at_start=options.read_finished_at_start))
        dirs.append(local)
    return dirs, mirrors, scratch
