"""A query's health in one word, for the list an on-call engineer scans first.

Derived from what the history holds, so it works on a live history and on a replayed one: the last
run's outcome (failed, stopped), the newest lifecycle signal (stalled, idle, crash loop) and the time
since the last batch, judged against the query's own batch interval like the live stall rule. Where the
watcher keeps a lasting state for the query (``spark_state_observer.history.query_status``), the tables show that instead
(``spark_state_observer.browser.parts.summary``): failed until a later run runs, retired once an operator retired it.
"""

from __future__ import annotations

import statistics
from typing import Sequence

from spark_state_observer.model.signal_kinds import CRASH_LOOP, LIFECYCLE_KINDS, QUERY_IDLE, STALLED
from spark_state_observer.settings import DEFAULT_STALL_FACTOR as STALL_FACTOR
from spark_state_observer.settings import DEFAULT_STALL_MIN_SECONDS as STALL_MIN_SECONDS

__all__ = ["LIFECYCLE_KINDS", "STALL_FACTOR", "STALL_MIN_SECONDS", "derive_health", "typical_interval"]


def typical_interval(batch_times: Sequence[float]) -> float | None:
    """Median time between consecutive batches, or None with fewer than two."""
    gaps = [b - a for a, b in zip(batch_times, batch_times[1:]) if b > a]
    return statistics.median(gaps) if gaps else None


def derive_health(
    last_outcome: str | None,
    last_lifecycle: str | None,
    last_lifecycle_ts: float | None,
    last_batch_ts: float | None,
    interval: float | None,
    now: float,
) -> str:
    """One of running, idle, stalled, failed, stopped."""
    if last_outcome == "exception" or last_lifecycle == CRASH_LOOP:
        return "failed"
    if last_outcome == "clean":
        return "stopped"
    newest_batch = last_batch_ts or 0.0
    if last_lifecycle == STALLED and (last_lifecycle_ts or 0.0) >= newest_batch:
        return "stalled"
    if last_lifecycle == QUERY_IDLE and (last_lifecycle_ts or 0.0) >= newest_batch:
        return "idle"
    if last_batch_ts is not None and now - last_batch_ts > max(STALL_MIN_SECONDS, STALL_FACTOR * (interval or 0.0)):
        return "stalled"
    return "running"
