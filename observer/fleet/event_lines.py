"""Event lines: parse a wanted line (bounded), take what identity and lifecycle need from it, drop a progress
already delivered (the duplicate guard after a restart), and deliver the rest.
"""

from __future__ import annotations

from typing import Any

from observer.fleet.app_events import RawEvent
from observer.fleet.clock_skew import event_time
from observer.fleet.file_tail import FileTail
from observer.fleet.followed_app import FollowedApp
from observer.fleet.watcher_core import WatcherCore
from observer.model.bounded import JsonTooLarge, clean_identity, loads
from observer.model.capacity import relevant
from observer.model.log_time import time_before
from observer.model.spark_events import APP_END, APP_START, ENVIRONMENT, LOG_START, QUERY_PROGRESS, QUERY_TERMINATED, STREAMING_EVENTS

MAX_RUNS = 1_000  # query runs remembered per application for the duplicate guard


class EventLines(WatcherCore):
    """Line parsing and the duplicate guard of the ``EventLogWatcher``."""

    def _line(self, app: FollowedApp, tail: FileTail, line_no: int, event_type: str, line: bytes) -> bool:
        """Parse and deliver one wanted line; True when the application turned out to be streaming (scan for more types)."""
        if event_type == ENVIRONMENT and app.identity is not None:
            return False
        turned_streaming = event_type in STREAMING_EVENTS and not app.streaming
        if turned_streaming:
            app.streaming = True
            tail.filter.set_patterns(self._patterns)
        if event_type in self.raw_events:
            if self.raw_keep is None or self.raw_keep(line):
                replayed = app.replay_until is not None and (tail.index, line_no) <= app.replay_until
                self._deliver(app, RawEvent(event_type, {}, f"{tail.path}:{line_no}", replayed, line))
            return turned_streaming
        source = f"{tail.path}:{line_no}"
        try:
            obj = loads(line)  # bounded: a short line of ``[{},{},...]`` would expand a hundredfold in memory
        except JsonTooLarge as exc:
            self._problem(app, "line_too_long", f"{source}: {exc}; skipped")
            return turned_streaming
        except (ValueError, RecursionError) as exc:
            why = "nested too deep" if isinstance(exc, RecursionError) else str(exc)[:80]
            self._problem(app, "bad_json", f"{source}: not valid JSON ({why}); skipped")
            return turned_streaming
        self.counts.events_parsed += 1
        if not isinstance(obj, dict):
            self._problem(app, "bad_json", f"{source}: not a JSON object; skipped")
            return turned_streaming
        replayed = app.replay_until is not None and (tail.index, line_no) <= app.replay_until
        if event_type in STREAMING_EVENTS:
            at = event_time(event_type, obj)
            if at is not None and (app.newest_event is None or at > app.newest_event):
                app.newest_event = at
        if event_type == LOG_START:
            app.spark_version = clean_identity(obj.get("Spark Version")) or None
        elif event_type == ENVIRONMENT:
            props = obj.get("Spark Properties")
            if isinstance(props, list):  # older logs: a list of [key, value] pairs
                props = {p[0]: p[1] for p in props if isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)}
            if isinstance(props, dict):
                app.properties = {k: clean_identity(props[k]) for k in self.identity_properties if k in props}
                app.spark_conf = relevant(props)
        elif event_type == APP_START:
            self._identify(app, obj)
        elif event_type == APP_END:
            app.end_seen = True
        elif event_type == QUERY_PROGRESS and not self._new_batch(app, obj, replayed):
            return turned_streaming
        if event_type in self.wanted:
            # a termination is placed as replay places it: at the latest time of the lines before it
            logged_at = time_before(tail.filter.lines_before()) if event_type == QUERY_TERMINATED else None
            self._deliver(app, RawEvent(event_type, obj, source, replayed, logged_at=logged_at))
        return turned_streaming

    def _new_batch(self, app: FollowedApp, obj: dict[str, Any], replayed: bool) -> bool:
        progress = obj.get("progress")
        if not isinstance(progress, dict):
            return True
        run = (clean_identity(progress.get("id")), clean_identity(progress.get("runId")))
        batch = progress.get("batchId")
        if type(batch) is not int:
            return True
        last = app.runs.get(run)
        if last is not None and batch <= last and not replayed:
            self.counts.events_duplicate += 1
            return False
        app.runs[run] = batch if last is None else max(batch, last)
        app.runs.move_to_end(run)
        while len(app.runs) > MAX_RUNS:
            app.runs.popitem(last=False)
        return True
