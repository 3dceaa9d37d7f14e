"""The application a recorded event log belongs to, for replay and backtest (issue 25).

A live observer knows its application; the watcher reads it from ``SparkListenerApplicationStart``. A
replay had no identity, so its series and alerts had no ``app`` and a backtest summary read "query X of
is stopped". This reads the same event (within a log's first lines) from each log replayed: the logs of one
job (its restarts as new applications share ``spark.app.name``) give its name, and one log its id too.
Progress lines carry no application: their replay stays without one.
"""

from __future__ import annotations

import json
import os
from typing import Any

from observer.capture.codecs import EventLogError, open_decompressed
from observer.model.bounded import clean_label
from observer.model.identity import AppContext, Pairs
from observer.offline.eventlog import expand

APP_START = b'{"Event":"SparkListenerApplicationStart"'
SCAN_LINES = 50  # the application start comes within a log's first few events (log version, resources, environment)
MAX_NAME_CHARS = 200


def application_of(paths: list[str], static: Pairs = ()) -> AppContext:
    """The identity of the application(s) ``paths`` recorded: ``name`` when every log agrees on it."""
    starts = [start for path in expand(paths) if (start := _app_start(path)) is not None]
    names = {clean_label(str(s.get("App Name") or ""), MAX_NAME_CHARS) for s in starts}
    if len(names) != 1 or not next(iter(names)):
        return AppContext(static=static)
    single = len(starts) == 1
    return AppContext(
        name=names.pop(),
        static=static,
        app_id=str(starts[0].get("App ID") or "") if single else "",
        attempt_id=str(starts[0].get("App Attempt ID") or "") if single else "",
        log_name=os.path.basename(paths[0].rstrip(os.sep)) if single else "",
    )


def _app_start(path: str) -> dict[str, Any] | None:
    try:
        with open_decompressed(path) as stream:
            for n, line in enumerate(stream):
                if line.startswith(APP_START):
                    event = json.loads(line)
                    return event if isinstance(event, dict) else None
                if n >= SCAN_LINES:
                    return None
    except (OSError, EventLogError, ValueError):
        return None  # an unreadable log: the replay itself reports it
    return None
