"""How every part of the event-log watcher reports a problem: counted in ``WatchCounts.problems`` and, for an
application, in its own counts and its next report; logged once per episode where asked.

Why one object: the watcher's parts (listing, tailing, lines, identity, clock, lifecycle, positions) each meet bad
input of their own, and all of it must end in the same counters and log, never in an exception.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from spark_state_observer.fleet.app_events import WatchCounts
from spark_state_observer.fleet.followed_app import FollowedApp
from spark_state_observer.model.bounded import clean_text

log = logging.getLogger("spark_state_observer.fleet.eventlog_watch")  # the watcher's one logger, whichever module writes


class Problems:
    """Counts and reports the watcher's problems (``counts.problems`` by kind)."""

    def __init__(self, counts: WatchCounts) -> None:
        self.counts = counts
        self._reported: set[str] = set()  # folder entries already reported as unusable

    def report(self, app: FollowedApp | None, kind: str, message: str, once: bool = False) -> None:
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

    def report_once(self, path: str, kind: str, message: str) -> None:
        """Report a problem of a folder entry once while it stays (``keep_only``)."""
        if path in self._reported:
            return
        self._reported.add(path)
        self.report(None, kind, message)

    def cleared(self, path: str) -> None:
        """``path`` is usable again: a later problem with it is reported again."""
        self._reported.discard(path)

    def keep_only(self, paths: Iterable[str]) -> None:
        """Forget the reports of entries no longer listed (one that comes back is reported again)."""
        self._reported &= set(paths)
