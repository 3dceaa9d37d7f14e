"""The application a recorded event log belongs to, for replay and backtest (issue 25).

A live observer knows its application; the watcher reads it from ``SparkListenerApplicationStart``. A
replay had no identity, so its series and alerts had no ``app`` and a backtest summary read "query X of
is stopped". This reads the same event (within a log's first lines) from each log replayed: the logs of one
job (its restarts as new applications share ``spark.app.name``) give its name, and one log its id too.
Progress lines carry no application: their replay stays without one.
"""

from __future__ import annotations

import os
from typing import Any

from spark_state_observer.capture.codecs import DEFAULT_MAX_LINE_BYTES, EventLogError, open_decompressed
from spark_state_observer.model.bounded import clean_label, loads
from spark_state_observer.model.identity import AppContext, Pairs
from spark_state_observer.model.spark_events import APP_START, line_prefix
from spark_state_observer.offline.eventlog import bounded_lines, chunk_limit, expand

_APP_START_LINE = line_prefix(APP_START)
SCAN_LINES = 50  # the application start comes within a log's first few events (log version, resources, environment)
MAX_NAME_CHARS = 200


def application_of(paths: list[str], static: Pairs = (), max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> AppContext:
    """The identity of the application(s) ``paths`` recorded: ``name`` when every log agrees on it.

    Lines are read as the replay reads them (``max_line_bytes``, a longer line skipped unheld): this scan
    runs before the replay and must not hold what the replay would refuse.
    """
    starts = [start for path in expand(paths) if (start := app_start(path, max_line_bytes)) is not None]
    names = {clean_label(str(s.get("App Name") or ""), MAX_NAME_CHARS) for s in starts}
    if len(names) != 1 or not next(iter(names)):
        return AppContext(static=static)
    if len(starts) == 1:
        return identity_of(starts[0], static, os.path.basename(paths[0].rstrip(os.sep)))
    return AppContext(name=names.pop(), static=static)


def identity_of(start: dict[str, Any], static: Pairs = (), log_name: str = "") -> AppContext:
    """One ``SparkListenerApplicationStart`` event's application: its name, id and attempt."""
    return AppContext(
        name=clean_label(str(start.get("App Name") or ""), MAX_NAME_CHARS),
        static=static,
        app_id=clean_label(str(start.get("App ID") or ""), MAX_NAME_CHARS),
        attempt_id=clean_label(str(start.get("App Attempt ID") or ""), MAX_NAME_CHARS),
        log_name=log_name,
    )


def app_start(path: str, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> dict[str, Any] | None:
    """The ``SparkListenerApplicationStart`` event of one log file (None: not within its first lines, or unreadable)."""
    try:
        with open_decompressed(path, chunk_limit(max_line_bytes)) as stream:
            for n, line in bounded_lines(stream, max_line_bytes, path):
                if isinstance(line, bytes) and line.startswith(_APP_START_LINE):
                    event = loads(line)  # counted before parsed, as the replay parses
                    return event if isinstance(event, dict) else None
                if n > SCAN_LINES:
                    return None
    except (OSError, EventLogError, ValueError, RecursionError):
        return None  # an unreadable log: the replay itself reports it
    return None
