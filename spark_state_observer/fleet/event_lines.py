"""Event lines: parse a wanted line (bounded), take what identity and lifecycle need from it, drop a progress
already delivered (the duplicate guard after a restart), and deliver the rest.

A progress line, with ``progress_as_bytes`` (the ``watch`` command), is not parsed into a dict: msgspec cuts
its ``progress`` object's JSON out of the line (validating the whole line as JSON, as ``json.loads`` would)
and reads the five fields the guard and the clock need from it; the pipeline decodes the object itself
(``spark_state_observer.model.decode``), as replay hands it over. Anything that path cannot vouch for (a line over the JSON
item bound, ``NaN``, lone surrogates, bytes that are not UTF-8, nesting too deep, a ``progress`` that is not an
object) goes the ``json.loads`` way, which reports or delivers it as before.

Cheap filtering: lines are selected by their first bytes (``spark_state_observer.fleet.line_filter``); only
wanted event types are JSON-parsed. Task and SQL events (``STREAMING_ONLY_EVENTS``) are parsed only
once an application has shown a streaming query, so a batch application costs the decompression and
a substring scan, nothing more. Types in ``raw_events`` are not parsed at all: their lines (those
``raw_keep`` accepts) go to the consumer as bytes, which decodes the few fields it reads (``watch``
does so for placement's task, job and SQL events).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from spark_state_observer.fleet.app_events import STREAMING_ONLY_EVENTS, RawEvent
from spark_state_observer.fleet.clock_skew import event_time, progress_time
from spark_state_observer.fleet.file_tail import FileTail
from spark_state_observer.fleet.followed_app import FollowedApp
from spark_state_observer.fleet.identification import IdentityResolver
from spark_state_observer.fleet.line_filter import line_pattern
from spark_state_observer.fleet.watch_problems import Problems
from spark_state_observer.model.bounded import MAX_JSON_ITEMS, Decoder, JsonTooLarge, clean_identity, loads
from spark_state_observer.model.capacity import relevant
from spark_state_observer.model.log_time import time_before
from spark_state_observer.model.spark_events import (
    APP_END,
    APP_START,
    ENVIRONMENT,
    LOG_START,
    QUERY_PROGRESS,
    QUERY_STARTED,
    QUERY_TERMINATED,
    STREAMING_EVENTS,
)
from spark_state_observer.model.spark_time import NO_DATA_PROGRESS_CONF

MAX_RUNS = 1_000  # query runs remembered per application for the duplicate guard


class _ProgressLine(msgspec.Struct):
    progress: msgspec.Raw


class _Guard(msgspec.Struct):
    """What the watcher reads of a progress object: its run and batch (the duplicate guard) and its time;
    ``Any``, so each value is what ``json.loads`` gives and the guard judges it the same way."""

    id: Any = None
    runId: Any = None  # noqa: N815
    batchId: Any = None  # noqa: N815
    timestamp: Any = None
    batchDuration: Any = None  # noqa: N815


_LINE = Decoder(_ProgressLine)
_GUARD = Decoder(_Guard)


def progress_fields(line: bytes) -> tuple[bytes, _Guard] | None:
    """A progress line's ``progress`` object as its JSON bytes and the fields the guard reads; ``None`` when the
    line is for ``json.loads`` instead (see the module's docstring)."""
    if len(line) > MAX_JSON_ITEMS:  # may hold more items than the bounded parse accepts: it counts them
        return None
    try:
        if not line.isascii():
            line.decode()  # msgspec does not check the bytes of the strings it skips; json.loads does
        raw = bytes(_LINE.decode(line).progress)
        if not raw.startswith(b"{"):
            return None
        return raw, _GUARD.decode(raw)
    except Exception:  # declining is always safe: the json.loads path decides and reports
        return None


def line_patterns(wanted: frozenset[str]) -> tuple[dict[bytes, str], dict[bytes, str]]:
    """The first bytes of the lines the reader takes, by type: of a streaming application, and of one not shown to be
    streaming yet (whose task and SQL events are not even searched for). Identity and lifecycle events are always
    read; the environment (one line per application) gives the identity properties and the capacity estimate's conf."""
    patterns = {line_pattern(t): t for t in sorted(wanted | {APP_START, APP_END, LOG_START, QUERY_STARTED, ENVIRONMENT})}
    return patterns, {p: t for p, t in patterns.items() if t not in STREAMING_ONLY_EVENTS}


class EventReader:
    """Parses the wanted lines of the followed logs, guards against duplicates and hands the events on."""

    def __init__(
        self,
        problems: Problems,
        identity: IdentityResolver,
        *,
        wanted: frozenset[str],
        raw_events: frozenset[str],
        raw_keep: Callable[[bytes], bool] | None,
        progress_as_bytes: bool,
        identity_properties: tuple[str, ...],
        patterns: dict[bytes, str],
    ) -> None:
        """``patterns``: every line type searched for once an application turned streaming (see the watcher's
        constructor for the other settings)."""
        self.problems, self.counts, self.identity = problems, problems.counts, identity
        self.wanted, self.raw_events, self.raw_keep = wanted, raw_events, raw_keep
        self.progress_as_bytes, self.identity_properties, self.patterns = progress_as_bytes, identity_properties, patterns

    def line(self, app: FollowedApp, tail: FileTail, line_no: int, event_type: str, line: bytes) -> bool:
        """Parse and deliver one wanted line; True when the application turned out to be streaming (scan for more types)."""
        if event_type == ENVIRONMENT and app.identity is not None:
            return False
        turned_streaming = event_type in STREAMING_EVENTS and not app.streaming
        if turned_streaming:
            app.streaming = True
            tail.filter.set_patterns(self.patterns)
        if event_type in self.raw_events:
            if self.raw_keep is None or self.raw_keep(line):
                replayed = app.replay_until is not None and (tail.index, line_no) <= app.replay_until
                self.identity.deliver(app, RawEvent(event_type, {}, f"{tail.path}:{line_no}", replayed, line))
            return turned_streaming
        if event_type == QUERY_PROGRESS and self.progress_as_bytes:
            fields = progress_fields(line)
            if fields is not None:
                self._progress_bytes(app, tail, line_no, line, *fields)
                return turned_streaming
        source = f"{tail.path}:{line_no}"
        try:
            obj = loads(line)  # bounded: a short line of ``[{},{},...]`` would expand a hundredfold in memory
        except JsonTooLarge as exc:
            self.problems.report(app, "line_too_long", f"{source}: {exc}; skipped")
            return turned_streaming
        except (ValueError, RecursionError) as exc:
            why = "nested too deep" if isinstance(exc, RecursionError) else str(exc)[:80]
            self.problems.report(app, "bad_json", f"{source}: not valid JSON ({why}); skipped")
            return turned_streaming
        self.counts.events_parsed += 1
        if not isinstance(obj, dict):
            self.problems.report(app, "bad_json", f"{source}: not a JSON object; skipped")
            return turned_streaming
        replayed = app.replay_until is not None and (tail.index, line_no) <= app.replay_until
        if event_type in STREAMING_EVENTS:
            self._newest(app, event_time(event_type, obj))
        if event_type == LOG_START:
            app.spark_version = clean_identity(obj.get("Spark Version")) or None
        elif event_type == ENVIRONMENT:
            props = obj.get("Spark Properties")
            if isinstance(props, list):  # older logs: a list of [key, value] pairs
                props = {p[0]: p[1] for p in props if isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)}
            if isinstance(props, dict):
                app.properties = {k: clean_identity(props[k]) for k in self.identity_properties if k in props}
                app.spark_conf = relevant(props)
                if NO_DATA_PROGRESS_CONF in props:  # the lost verdict's cadence (spark_state_observer.signals.lifecycle)
                    app.spark_conf[NO_DATA_PROGRESS_CONF] = clean_identity(props[NO_DATA_PROGRESS_CONF])
        elif event_type == APP_START:
            self.identity.identify(app, obj)
        elif event_type == APP_END:
            app.end_seen = True
        elif event_type == QUERY_PROGRESS:
            progress = obj.get("progress")
            if isinstance(progress, dict) and not self._new_batch(
                app, progress.get("id"), progress.get("runId"), progress.get("batchId"), replayed
            ):
                return turned_streaming
        if event_type in self.wanted:
            # a termination is placed as replay places it: at the latest time of the lines before it
            logged_at = time_before(tail.filter.lines_before()) if event_type == QUERY_TERMINATED else None
            self.identity.deliver(app, RawEvent(event_type, obj, source, replayed, logged_at=logged_at))
        return turned_streaming

    def _progress_bytes(self, app: FollowedApp, tail: FileTail, line_no: int, line: bytes, progress: bytes, guard: _Guard) -> None:
        """The ``json.loads`` path's steps for a progress line, from the fields ``progress_fields`` read."""
        self.counts.events_parsed += 1
        replayed = app.replay_until is not None and (tail.index, line_no) <= app.replay_until
        at = progress_time(guard.timestamp, guard.batchDuration)
        self._newest(app, at)
        if not self._new_batch(app, guard.id, guard.runId, guard.batchId, replayed):
            return
        if QUERY_PROGRESS in self.wanted:
            self.identity.deliver(
                app, RawEvent(QUERY_PROGRESS, {}, f"{tail.path}:{line_no}", replayed, line, logged_at=at, progress=progress)
            )

    @staticmethod
    def _newest(app: FollowedApp, at: float | None) -> None:
        if at is not None and (app.newest_event is None or at > app.newest_event):
            app.newest_event = at
            if app.last_event is None or at > app.last_event:
                app.last_event = at

    def _new_batch(self, app: FollowedApp, query_id: Any, run_id: Any, batch: Any, replayed: bool) -> bool:
        """False for a progress already delivered (by query run and batch id): dropped, counted as a duplicate."""
        if type(batch) is not int:
            return True
        run = (clean_identity(query_id), clean_identity(run_id))
        last = app.runs.get(run)
        if last is not None and batch <= last and not replayed:
            self.counts.events_duplicate += 1
            return False
        app.runs[run] = batch if last is None else max(batch, last)
        app.runs.move_to_end(run)
        while len(app.runs) > MAX_RUNS:
            app.runs.popitem(last=False)
        return True
