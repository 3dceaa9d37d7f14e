"""The state every part of the event-log watcher reads, how it reports a problem, and the steps one part
asks of another.

Why a base class: ``EventLogWatcher`` is one object (one poll lists, tails, parses, identifies and ends
applications), written in modules by job: ``log_listing``, ``log_tailing``, ``event_lines``,
``identification``, ``clock_skew``, ``app_lifecycle``, ``watch_positions``. Each job is a class on this base;
the state they share is declared here (``EventLogWatcher.__init__`` sets it), and a step one job takes from
another is declared here (abstract) so that each module type-checks alone.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from typing import Any

from spark_state_observer.fleet.app_events import RawEvent, WatchCounts
from spark_state_observer.fleet.file_tail import FileTail
from spark_state_observer.fleet.followed_app import FollowedApp
from spark_state_observer.model.bounded import clean_text

log = logging.getLogger("spark_state_observer.fleet.eventlog_watch")  # the watcher's one logger, whichever module writes


class WatcherCore(abc.ABC):
    """The watcher's shared state and problem reporting; the jobs are the subclasses (see the module's docstring)."""

    dirs: list[str]
    follow_symlinks: bool
    _roots: list[str]
    poll_interval: float
    wanted: frozenset[str]
    raw_events: frozenset[str]
    raw_keep: Callable[[bytes], bool] | None
    progress_as_bytes: bool
    shard: tuple[int, int] | None
    state_path: str | None
    grace_seconds: float
    lost_after_seconds: float
    max_line_bytes: int
    identity_properties: tuple[str, ...]
    read_finished_at_start: bool
    replay_on_resume: bool
    max_apps: int
    max_decoded_bytes_per_poll: int
    clock: Callable[[], float]
    wall_clock: Callable[[], float]
    counts: WatchCounts
    backlog: bool
    _patterns: dict[bytes, str]
    _patterns_batch: dict[bytes, str]
    _apps: dict[str, FollowedApp]
    _done: set[str]
    _reported: set[str]
    _order: int
    _listed_dirs: set[str]
    _dirty: bool
    _saved: dict[str, Any]
    _forgotten: list[FollowedApp]

    def _problem(self, app: FollowedApp | None, kind: str, message: str, once: bool = False) -> None:
        """Count and report a problem; ``once`` reports it once per episode (until it clears)."""
        if app is not None and once:
            if kind in app.active_problems:
                return
            app.active_problems.add(kind)
        message = clean_text(message, 2000)  # names from the data: a lone surrogate must not break a log handler
        self.counts.problems[kind] += 1
        log.warning("%s", message)
        if app is not None:
            app.problems[kind] += 1
            app.report().problems.append(message)

    def _report_once(self, path: str, kind: str, message: str) -> None:
        if path in self._reported:
            return
        self._reported.add(path)
        self._problem(None, kind, message)

    # --- steps one job takes from another -----------------------------------------------------------

    @abc.abstractmethod
    def _new_tail(self, app: FollowedApp, path: str, index: int, pos: dict[str, Any] | None = None) -> FileTail:
        """A reading position in ``path`` (``spark_state_observer.fleet.log_tailing``)."""

    @abc.abstractmethod
    def _next_index(self, app: FollowedApp, index: int) -> int | None:
        """The rolling log's next part after ``index``, if listed (``spark_state_observer.fleet.log_tailing``)."""

    @abc.abstractmethod
    def _truncated(self, app: FollowedApp, tail: FileTail, why: str) -> None:
        """Report a file that ends inside a line or unit (``spark_state_observer.fleet.log_tailing``)."""

    @abc.abstractmethod
    def _link_inside(self, path: str) -> bool:
        """Whether a symbolic link may be followed (``spark_state_observer.fleet.log_listing``)."""

    @abc.abstractmethod
    def _line(self, app: FollowedApp, tail: FileTail, line_no: int, event_type: str, line: bytes) -> bool:
        """Parse and deliver one wanted line (``spark_state_observer.fleet.event_lines``)."""

    @abc.abstractmethod
    def _identify(self, app: FollowedApp, obj: dict[str, Any]) -> None:
        """Take the identity from an application-start event (``spark_state_observer.fleet.identification``)."""

    @abc.abstractmethod
    def _deliver(self, app: FollowedApp, event: RawEvent) -> None:
        """Hand an event on, or hold it until the identity is known (``spark_state_observer.fleet.identification``)."""

    @abc.abstractmethod
    def _fallback_identity(self, app: FollowedApp, why: str) -> None:
        """Name an application after its log (``spark_state_observer.fleet.identification``)."""

    @abc.abstractmethod
    def _caught_up(self, app: FollowedApp) -> None:
        """Note a read to the file's end: the clock-skew sample (``spark_state_observer.fleet.clock_skew``)."""

    @abc.abstractmethod
    def _drop(self, app: FollowedApp, status: str, message: str, done: bool = True) -> None:
        """Forget an application (``spark_state_observer.fleet.app_lifecycle``)."""

    @abc.abstractmethod
    def _restore(self, app: FollowedApp, saved: dict[str, Any]) -> None:
        """Resume an application at its saved position (``spark_state_observer.fleet.watch_positions``)."""
