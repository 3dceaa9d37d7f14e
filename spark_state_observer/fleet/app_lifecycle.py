"""Lifecycle: an application is running, finished (read to its end after an end marker or event), lost (no growth
without an end) or forgotten (a grace period later, or its log gone or replaced); the gauges by status.

A log is silent from its last sign of life: when the watcher first reads it, the newer of its last event's time and
its file's modification time (a log found long dead is silent since then, not since the watcher started); after
that, from the last growth this watcher saw on its own clock.

Lifecycle: an application finished (final ``appstatus`` marker, a log renamed from ``.inprogress``,
or ``SparkListenerApplicationEnd``) and read to its end is forgotten ``grace_seconds`` later; one that
stops growing without an end is reported ``lost`` after ``lost_after_seconds`` (counted from its last sign of
life: a log found long dead is lost at once) and forgotten after a further grace period. Logs already finished when the watcher first starts are not read (a History
Server folder holds thousands) unless ``read_finished_at_start``. Memory is bounded: at most
``max_apps`` applications, per application a bounded partial line, a bounded set of query runs and
a bounded backlog of events held until the identity is known; each poll decodes at most
``max_decoded_bytes_per_poll`` in all (the rest waits for the next poll, ``backlog`` says so).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable

from spark_state_observer.fleet.app_events import StatusChange
from spark_state_observer.fleet.clock_skew import SKEW_TOLERANCE_SECONDS
from spark_state_observer.fleet.followed_app import FollowedApp, FollowedApps
from spark_state_observer.fleet.identification import IdentityResolver
from spark_state_observer.fleet.log_tailing import Tailer
from spark_state_observer.fleet.watch_problems import Problems, log
from spark_state_observer.model.bounded import clean_text


class LifecycleJudge:
    """Judges each followed application's status after its read, and forgets the ended ones."""

    def __init__(
        self,
        book: FollowedApps,
        problems: Problems,
        tailer: Tailer,
        identity: IdentityResolver,
        *,
        grace_seconds: float,
        lost_after_seconds: float,
        wall_clock: Callable[[], float],
        poll_interval: float,
    ) -> None:
        self.book, self.problems, self.tailer, self.identity = book, problems, tailer, identity
        self.grace_seconds, self.lost_after_seconds = grace_seconds, lost_after_seconds
        self.wall_clock, self.poll_interval = wall_clock, poll_interval

    def judge(self, app: FollowedApp, now: float) -> None:
        """``app``'s status at ``now`` (the watcher's clock), after this poll's read."""
        tail = app.tail
        sig = (
            app.listing.path,
            app.listing.mtime_ns,
            tuple(sorted(app.files)),
            tail.index if tail else None,
            tail.size if tail else None,
            app.marker_final,
        )
        if sig != app.growth_sig:
            # first seen: how long it was silent before (a log found long dead) dates a loss, but the verdict waits for
            # silence on this watcher's clock: a file server's or a driver's clock off by any amount cannot make it
            app.dead_for = self.silent_before(app) if not app.growth_sig else 0.0
            app.last_growth = now
            app.growth_sig = sig
        ended = app.marker_final or app.end_seen or (app.listing.kind == "single" and app.listing.finished)
        read_all = tail is None or tail.broken or (tail.size >= 0 and tail.raw >= tail.size)
        if (
            ended
            and read_all
            and tail is not None
            and not tail.broken
            and tail.partial
            and app.status == "running"
            and (app.marker_final or app.listing.finished)
        ):
            self.tailer.truncated(app, tail, "though the application ended")
        drained = read_all and (tail is None or tail.broken or not tail.partial)
        if app.status in ("running", "lost") and ended and drained and self.tailer.next_index(app, tail.index if tail else -1) is None:
            if app.identity is None:
                self.identity.fallback(app, "the log ended without an application-start event")
            how = "end marker" if app.marker_final or app.listing.finished else "application-end event"
            self.set_status(app, "finished", f"{app.name}: finished ({how}), read to its end", now)
        elif app.status == "running" and now - app.last_growth > self.lost_after_seconds:
            if app.identity is None and app.held:
                self.identity.fallback(app, "the log stopped growing before an application-start event")
            self.set_status(
                app,
                "lost",
                f"{app.name}: no growth for {now - app.last_growth:.0f} s and no end marker (a killed driver leaves its log like this)",
                now,
            )
        elif app.status == "lost" and app.last_growth >= app.status_since:
            self.set_status(app, "running", f"{app.name}: growing again", now)

    def silence(self, log_name: str, now: float) -> float | None:
        """Seconds up to ``now`` (the watcher's clock) since ``log_name``'s log last showed life, while it is followed
        without an end: how long its driver has said nothing (None: not followed, or ended). Measured from the growth
        this watcher saw; a log first read long after its last event and modification time counts from the newer of
        them (``silent_before``), so a driver dead for weeks is not taken for one that died now."""
        app = self.book.apps.get(log_name)
        if app is None or app.status == "finished" or app.end_seen or app.marker_final:
            return None
        return now - app.last_growth

    def last_life(self, log_name: str) -> float | None:
        """When (on the watcher's clock) ``log_name``'s log last showed life: its last growth this watcher saw, or for
        a log not grown since it was first read, the newer of its last event's time and its modification time (a loss
        is dated then, so a driver dead for weeks does not read as one that died now). None: not followed."""
        app = self.book.apps.get(log_name)
        return None if app is None else app.last_growth - app.dead_for

    def silent_before(self, app: FollowedApp) -> float:
        """Seconds the log was silent before this watcher first read it: from the newer of its last event's time (the
        driver's clock) and its file's modification time (the file server's) to now. Either is a sign of life, so a
        clock off on one side makes the silence shorter, never longer; under the skew tolerance it counts as none."""
        times = [app.last_event] if app.last_event is not None else []
        if app.tail is not None:
            try:
                times.append(os.stat(app.tail.path).st_mtime)
            except OSError:
                pass
        if not times:
            return 0.0
        silent = self.wall_clock() - max(times)
        return silent if silent > SKEW_TOLERANCE_SECONDS + self.poll_interval else 0.0

    def set_status(self, app: FollowedApp, status: str, message: str, now: float) -> None:
        message = clean_text(message, 2000)
        app.status, app.status_since = status, now
        app.report().status_changes.append(StatusChange(status, message, time.time()))
        self.book.dirty = True
        if status != "running":
            log.info("%s", message)

    def forget(self, now: float) -> None:
        """Forget the applications ended (finished or lost) ``grace_seconds`` ago."""
        for app in list(self.book.apps.values()):
            if app.status in ("finished", "lost") and now - app.status_since >= self.grace_seconds:
                self.book.drop(app, "forgotten", f"{app.name}: forgotten {self.grace_seconds:.0f} s after it was {app.status}")

    def update_gauges(self) -> None:
        """The watcher's gauges by status, and the skew farthest from 0."""
        apps, counts = self.book.apps.values(), self.problems.counts
        counts.clock_skew_seconds = max((app.clock_skew for app in apps), key=abs, default=0.0)
        statuses = Counter(app.status for app in apps)
        counts.apps_running, counts.apps_finished, counts.apps_lost = statuses["running"], statuses["finished"], statuses["lost"]
