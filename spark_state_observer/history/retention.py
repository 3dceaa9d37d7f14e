"""How long the history keeps rows: one default age, overridden per application and per query.

A shared PostgreSQL history holds applications with different needs (a payments job kept 30 days, a
noisy test job 1 day). ``history_retention`` lists the exceptions as ``app:NAME=SECONDS`` and
``query:NAME_OR_ID=SECONDS``, comma-separated; a query's own entry wins over its application's, which
wins over ``history_max_age_seconds``. Every writer to one database should be given the same policy:
any of them may enforce it (one at a time).

The ages count back from where the window ends (``window_end``), not from the wall clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class RetentionError(ValueError):
    """The retention setting cannot be parsed; the message shows the bad entry."""


@dataclass(frozen=True)
class RetentionPolicy:
    default_seconds: float = 7 * 86400.0
    apps: dict[str, float] = field(default_factory=dict)
    queries: dict[str, float] = field(default_factory=dict)  # by query name or query id

    @classmethod
    def parse(cls, default_seconds: float, text: str = "") -> RetentionPolicy:
        apps: dict[str, float] = {}
        queries: dict[str, float] = {}
        for entry in (e.strip() for e in text.split(",")):
            if not entry:
                continue
            selector, eq, seconds = entry.rpartition("=")
            scope, colon, name = selector.partition(":")
            if not eq or not colon or not name or scope not in ("app", "query"):
                raise RetentionError(f"history_retention entry {entry!r}: expected app:NAME=SECONDS or query:NAME_OR_ID=SECONDS")
            try:
                value = float(seconds)
            except ValueError:
                raise RetentionError(f"history_retention entry {entry!r}: {seconds!r} is not a number of seconds") from None
            if value <= 0:
                raise RetentionError(f"history_retention entry {entry!r}: the age must be positive")
            (apps if scope == "app" else queries)[name.strip()] = value
        return cls(default_seconds, apps, queries)

    @property
    def uniform(self) -> bool:
        return not self.apps and not self.queries

    def max_age(self, query_id: str, name: str | None, app: str | None) -> float:
        """The age beyond which this query's rows go."""
        for key in (query_id, name):
            if key is not None and key in self.queries:
                return self.queries[key]
        if app is not None and app in self.apps:
            return self.apps[app]
        return self.default_seconds

    def cutoffs(self, now: float, known: list[tuple[str, str | None, str | None]]) -> dict[float, list[str]]:
        """Query ids per cutoff time for the queries (id, name, app) that do not follow the default."""
        out: dict[float, list[str]] = {}
        for query_id, name, app in known:
            age = self.max_age(query_id, name, app)
            if age != self.default_seconds:
                out.setdefault(now - age, []).append(query_id)
        return out


def window_end(newest: float | None, now: float) -> float:
    """Where the retention window ends: the newest data time a writer has written, or ``now`` if earlier.

    The data's own time, not the day it is written, because of what a user expects of "keep a week":

    - a live job writes data of now, so its window ends now;
    - a replay of an event log a month old keeps that log's last week, instead of deleting every row the
      moment it is written (an old log is replayed to be looked at);
    - a time ahead of ``now`` (a driver's clock ahead, a hostile timestamp in the year 9999) cannot move
      the window past now and delete today's rows;
    - a history that a live writer shares holds one window, the newest: replayed rows older than the live
      window go at the live writer's next retention pass.

    ``now`` comes from the writer's injectable clock (``time.time`` unless a test pins it); ``newest`` is
    None until something is written, and then the window ends at ``now``.
    """
    return now if newest is None else min(now, newest)
