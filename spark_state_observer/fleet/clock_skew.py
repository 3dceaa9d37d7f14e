"""Clock skew: how far an application's clock is from the watcher's, measured from the newest event time of
reads that follow a read to the file's end.

Clock skew: a driver's clock off from the watcher's would make its batches look old (a stall) or
from the future. Per application, after a read that follows a read to the file's end (so the delay
is at most a poll), the watcher's clock minus the newest event time read is a sample; the smallest of
the last ``SKEW_SAMPLES`` (``spark_state_observer.fleet.followed_app``) is the skew. Beyond tolerance it is counted, exported and handed on
(``AppEvents.clock_skew``): the pipeline judges ages and stalls on the application's clock, whatever
the skew (a driver days off, or an old log copied in now: its stalls are judged on its own times).
Until the skew is known (``AppEvents.clock_known``: enough samples, or a log quiet for longer than a
delivery can take, so no sample can come) nothing is judged on the clock: no stall storm at the start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_state_observer.fleet.followed_app import FollowedApp
from spark_state_observer.fleet.watch_problems import Problems
from spark_state_observer.model.parse import parse_timestamp
from spark_state_observer.model.spark_events import APP_END, QUERY_IDLE, QUERY_PROGRESS, QUERY_STARTED, application_end

# clock skew: the watcher's clock minus the newest event time read, for reads that follow a caught-up read (so
# the delivery delay is at most a poll); the smallest of the last samples (``FollowedApp.skew_samples``) is the skew,
# acted on beyond tolerance
_SKEW_MIN_SAMPLES = 3
SKEW_TOLERANCE_SECONDS = 30.0


def event_time(event_type: str, data: dict[str, Any]) -> float | None:
    """When a listener would have received an event: a progress's trigger time plus its batch duration,
    a started or idle event's own time, an application end's; None when Spark logged none (terminated, other types)."""
    if event_type == QUERY_PROGRESS:
        progress = data.get("progress")
        if not isinstance(progress, dict):
            return None
        return progress_time(progress.get("timestamp"), progress.get("batchDuration"))
    if event_type in (QUERY_STARTED, QUERY_IDLE):
        return parse_timestamp(data.get("timestamp"))
    if event_type == APP_END:
        return application_end(data)[0]
    return None


def progress_time(timestamp: Any, duration: Any) -> float | None:
    """A progress event's time from its ``timestamp`` and ``batchDuration`` fields as decoded (any JSON value)."""
    start = parse_timestamp(timestamp)
    if start is None:
        return None
    if isinstance(duration, (int, float)) and not isinstance(duration, bool) and 0 <= duration < 1e12:
        return start + duration / 1000.0
    return start


class SkewEstimator:
    """Measures each followed application's clock skew from its reads to the file's end."""

    def __init__(self, problems: Problems, *, clock: Callable[[], float], wall_clock: Callable[[], float], poll_interval: float) -> None:
        """``clock``: the watcher's timeouts (monotonic); ``wall_clock``: what event times are compared with."""
        self.problems, self.clock, self.wall_clock, self.poll_interval = problems, clock, wall_clock, poll_interval

    def caught_up(self, app: FollowedApp) -> None:
        """The file is read to its end: measure the clock skew from this poll's newest event (see ``_SKEW_MIN_SAMPLES``)."""
        newest, app.newest_event = app.newest_event, None
        if newest is not None and app.caught_up:
            app.skew_samples.append(self.wall_clock() - newest)
            if len(app.skew_samples) >= _SKEW_MIN_SAMPLES:
                skew = min(app.skew_samples)
                tolerance = SKEW_TOLERANCE_SECONDS + self.poll_interval
                app.clock_skew = skew if tolerance < abs(skew) else 0.0
                app.clock_known = True
                if app.clock_skew:
                    self.problems.report(
                        app,
                        "clock_skew",
                        f"{app.name}: its event times are {skew:.0f} s {'behind' if skew > 0 else 'ahead of'} this watcher's clock; "
                        "ages and stalls are judged on the application's clock",
                        once=True,
                    )
        elif newest is None and app.caught_up and not app.clock_known:
            # nothing new since the last read to the end: a quiet log (stalled, idle) gives no sample; once it
            # has been quiet longer than any delivery takes, its times are judged on this watcher's clock
            now = self.clock()
            if app.quiet_since is None:
                app.quiet_since = now
            if now - app.quiet_since > SKEW_TOLERANCE_SECONDS + self.poll_interval:
                app.clock_known = app.clock_news = True  # handed on in this poll, though the log says nothing new
                app.report()
        if newest is not None:
            app.quiet_since = None
        if app.out is not None:
            app.out.clock_skew, app.out.clock_known = app.clock_skew, app.clock_known
        app.caught_up = True
