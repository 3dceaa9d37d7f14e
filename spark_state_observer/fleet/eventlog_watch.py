"""Follow every Spark application in event-log folders while it runs: the capture side of ``watch``.

Why a watcher: platform teams cannot edit every job to attach a listener, but every Spark application
already writes its listener events to ``spark.eventLog.dir`` (the folder the History Server reads). One
process following that folder observes all of them. This module only *captures*: for every application
it yields the application's identity and its raw events (``AppEvents``); the pipeline that turns them
into metrics and signals is the one replay uses.

This module holds the coordinator (``EventLogWatcher``: its settings, one round, the run loop). The state of each
application is data (``FollowedApp``, all of them in ``FollowedApps``: ``followed_app``); each job of the round is a
small object of its own, given what it needs when it is built: the listing is a pure function (``log_listing``),
what to follow of it ``discovery``, reading ``Tailer`` (``log_tailing``), line parsing and the duplicate guard
``EventReader`` (``event_lines``), identity ``IdentityResolver`` (``identification``), clock skew ``SkewEstimator``
(``clock_skew``), lifecycle ``LifecycleJudge`` (``app_lifecycle``), restart positions ``PositionStore``
(``watch_positions``), problems ``Problems`` (``watch_problems``); what it hands over is in ``app_events``, log
names and shards in ``log_names``.

How each part stays correct and cheap (bounded memory, bad input counted, never a traceback) is said in its module.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from spark_state_observer.capture.codecs import DEFAULT_MAX_LINE_BYTES
from spark_state_observer.fleet.app_events import DEFAULT_WANTED_EVENTS, AppEvents, WatchCounts
from spark_state_observer.fleet.app_lifecycle import LifecycleJudge
from spark_state_observer.fleet.clock_skew import SkewEstimator
from spark_state_observer.fleet.discovery import Discovery
from spark_state_observer.fleet.event_lines import EventReader, line_patterns
from spark_state_observer.fleet.followed_app import FollowedApps
from spark_state_observer.fleet.identification import IdentityResolver
from spark_state_observer.fleet.log_listing import link_inside
from spark_state_observer.fleet.log_tailing import Tailer
from spark_state_observer.fleet.watch_positions import PositionStore, SavedPositions
from spark_state_observer.fleet.watch_problems import Problems, log
from spark_state_observer.model.bounded import clean_text


class EventLogWatcher:
    """Poll event-log folders and return, per application, its identity and new events."""

    def __init__(
        self,
        dirs: Iterable[str],
        *,
        poll_interval: float = 2.0,
        wanted_events: Iterable[str] = DEFAULT_WANTED_EVENTS,
        shard: tuple[int, int] | None = None,
        state_path: str | None = None,
        grace_seconds: float = 300.0,
        lost_after_seconds: float = 600.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        identity_properties: Iterable[str] = (),
        read_finished_at_start: bool = False,
        replay_on_resume: bool = False,
        max_apps: int = 10_000,
        max_decoded_bytes_per_poll: int = 16 << 20,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        raw_events: Iterable[str] = (),
        raw_keep: Callable[[bytes], bool] | None = None,
        follow_symlinks: bool = False,
        progress_as_bytes: bool = False,
    ) -> None:
        """``raw_events``: wanted types delivered as their line, not parsed (``RawEvent.line``); with ``raw_keep``
        only those lines it accepts (a consumer's cheap byte test: most task lines do not matter to it).

        ``progress_as_bytes``: progress events come as their line and their ``progress`` object's JSON
        (``RawEvent.progress``, for ``spark_state_observer.model.decode``'s fast path, as replay hands them) with their time in
        ``RawEvent.logged_at``, not parsed into a dict: the watcher reads only the few fields its guard needs
        (``spark_state_observer.fleet.event_lines``). A line that path declines is parsed and delivered as before.

        ``follow_symlinks``: follow a symbolic link wherever it points; by default only one whose target stays
        inside a watched folder (a link planted in a shared log folder must not make the watcher read other files).
        """
        if shard is not None and not (shard[1] >= 1 and 0 <= shard[0] < shard[1]):
            raise ValueError(f"shard {shard!r}: want (K, N) with 0 <= K < N")
        self.dirs = [os.path.abspath(d) for d in dirs]
        self.poll_interval, self.shard, self.clock = poll_interval, shard, clock
        self.max_decoded_bytes_per_poll = max_decoded_bytes_per_poll
        self.counts = WatchCounts()
        self.problems, self.book = Problems(self.counts), FollowedApps(self.counts)
        wanted = frozenset(wanted_events)
        patterns, patterns_batch = line_patterns(wanted)
        inside = partial(link_inside, roots=[os.path.realpath(d) for d in self.dirs], follow_symlinks=follow_symlinks)
        self.identity = IdentityResolver(self.book, self.problems)
        self.skew = SkewEstimator(self.problems, clock=clock, wall_clock=wall_clock, poll_interval=poll_interval)
        self.reader = EventReader(
            self.problems,
            self.identity,
            wanted=wanted,
            raw_events=frozenset(raw_events) & wanted,
            raw_keep=raw_keep,
            progress_as_bytes=progress_as_bytes,
            identity_properties=tuple(identity_properties),
            patterns=patterns,
        )
        self.tailer = Tailer(
            self.book,
            self.problems,
            patterns=patterns,
            patterns_batch=patterns_batch,
            max_line_bytes=max_line_bytes,
            link_inside=inside,
            on_line=self.reader.line,
            on_caught_up=self.skew.caught_up,
        )
        self.lifecycle = LifecycleJudge(
            self.book,
            self.problems,
            self.tailer,
            self.identity,
            grace_seconds=grace_seconds,
            lost_after_seconds=lost_after_seconds,
            wall_clock=wall_clock,
            poll_interval=poll_interval,
        )
        self.positions = PositionStore(self.book, self.problems, self.tailer, state_path=state_path, replay_on_resume=replay_on_resume)
        self.discovery = Discovery(
            self.book,
            self.problems,
            self.positions.restore,
            dirs=self.dirs,
            skip=self.positions.state_path,
            link_inside=inside,
            shard=shard,
            max_apps=max_apps,
            read_finished_at_start=read_finished_at_start,
        )
        if self.positions.load():  # a state means we watched before: every log not in it is new, not found at the start
            self.discovery.listed_dirs = set(self.dirs)

    def poll(self) -> list[AppEvents]:
        """One round: discover, read what grew, update lifecycles. Never raises."""
        try:
            self.commit()
            return self._poll()
        except Exception as exc:  # a bug must not stop the watcher: report it and go on next poll
            log.exception("event-log watcher poll failed")
            self.problems.report(None, "unreadable", f"poll failed: {type(exc).__name__}: {exc}")
            return []

    def _poll(self) -> list[AppEvents]:
        now = self.clock()
        self.discovery.round(now)
        budget, self.tailer.backlog = self.max_decoded_bytes_per_poll, False
        for app in self.book.in_turn():
            try:
                budget = self.tailer.follow(app, budget)
            except Exception as exc:  # per application: the others go on
                log.exception("event-log watcher failed on %s", clean_text(app.name, 300))
                self.problems.report(app, "unreadable", f"{app.name}: {type(exc).__name__}: {exc}")
            if not app.dropped:
                self.lifecycle.judge(app, now)
        self.lifecycle.forget(now)
        self.lifecycle.update_gauges()
        return self.book.reports()

    def run(self, callback: Callable[[list[AppEvents]], None], stop_event: threading.Event) -> None:
        """Poll until ``stop_event`` is set; ``callback`` gets each non-empty poll's result, then positions are saved."""
        while not stop_event.is_set():
            started = self.clock()
            found = self.poll()
            if found:
                try:
                    callback(found)
                except Exception as exc:
                    log.exception("event-log watcher callback failed")
                    self.problems.report(None, "callback", f"callback failed: {type(exc).__name__}: {exc}")
            self.commit()
            if not self.backlog:
                stop_event.wait(max(0.0, self.poll_interval - (self.clock() - started)))
        self.commit()

    def snapshot(self) -> SavedPositions | None:
        """The positions of everything delivered so far (``PositionStore.snapshot``); None if nothing moved."""
        return self.positions.snapshot()

    def save(self, positions: SavedPositions, extra: dict[str, Any] | None = None) -> bool:
        """Persist ``positions`` (and ``extra``) atomically (``PositionStore.save``); False on a failure, counted."""
        return self.positions.save(positions, extra)

    def commit(self) -> None:
        """Persist the positions of everything delivered so far; a no-op without a state path."""
        self.positions.commit()

    def finished_logs(self) -> frozenset[str]:
        """The names of the logs finished for good (not read again while they stay): a mirror may drop their copies."""
        return frozenset(self.book.done)

    def silence(self, log_name: str) -> float | None:
        """Seconds since ``log_name``'s log last showed life, while followed without an end (``LifecycleJudge.silence``)."""
        return self.lifecycle.silence(log_name, self.clock())

    def last_life(self, log_name: str) -> float | None:
        """When (on ``clock``) ``log_name``'s log last showed life (``LifecycleJudge.last_life``); None: not followed."""
        return self.lifecycle.last_life(log_name)

    def app_problems(self) -> dict[str, dict[str, int]]:
        """Problems counted per followed application (log name -> kind -> count)."""
        return {name: dict(app.problems) for name, app in self.book.apps.items() if app.problems}

    # what callers and tests read or change after construction, kept by the part that acts on it
    backlog = property(lambda self: self.tailer.backlog, doc="The last poll left bytes unread (budget): poll again without waiting.")
    state_path = property(lambda self: self.positions.state_path)
    _apps = property(lambda self: self.book.apps)
    _done = property(lambda self: self.book.done)
    lost_after_seconds = property(
        lambda self: self.lifecycle.lost_after_seconds, lambda self, value: setattr(self.lifecycle, "lost_after_seconds", value)
    )
    grace_seconds = property(lambda self: self.lifecycle.grace_seconds, lambda self, value: setattr(self.lifecycle, "grace_seconds", value))
