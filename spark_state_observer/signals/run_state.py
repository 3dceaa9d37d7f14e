"""What the lifecycle rule remembers of one query across its runs and applications, and the two rules on it that
decide a restart: whether a run succeeds the held one, and how a restart enters the crash loop's window. Kept apart
from the rule (``signals/lifecycle.py``) because the engine, the runtime and the assembly pass this state between
observers: a query's runs in separate applications share one ``RunState``."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from spark_state_observer.metrics.tracker import QueryTotals

if TYPE_CHECKING:
    from spark_state_observer.signals.lifecycle import Lifecycle

SCHEDULE_CYCLES = 2  # clean runs, each followed by a longer pause, that make a schedule
SCHEDULE_RUNS_KEPT = 8  # start-to-start intervals of clean runs whose median is a schedule's interval
LastAliveHint = Callable[[str, float], "float | None"]  # a query's last sign of life, as its event log shows it


@dataclass
class RunState:
    """What the lifecycle rules remember of one query."""

    run_id: str | None = None
    progress_run: str | None = None
    run_start: float | None = None
    previous_run_start: float | None = None  # when the run before this one started
    last_alive: float | None = None
    last_progress: float | None = None  # when the latest batch ended (any run)
    run_end: float | None = None  # when this run terminated
    run_outcome: str | None = None  # how it terminated (event_kinds.CLEAN or EXCEPTION; None: not seen)
    previous_run_outcome: str | None = None  # how the run before this one terminated (None: not seen ending)
    ended_with_app: bool = False  # this run ended with its application (no termination logged: a SIGTERM, an exit)
    previous_ended_with_app: bool = False
    restart_after_clean: float | None = None  # this run's restart, after a clean run: a crash loop's only if this run crashes
    cycles: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=SCHEDULE_CYCLES))  # clean runs: (ran, paused) seconds
    intervals: deque[float] = field(default_factory=lambda: deque(maxlen=SCHEDULE_RUNS_KEPT))  # start to start, clean runs
    previous_run_end: float | None = None  # when the run before this one terminated (None: not seen ending)
    restart_pending: bool = False
    first_seen: bool = True
    progress_at: deque[float] = field(default_factory=lambda: deque(maxlen=20))
    durations: deque[float] = field(default_factory=lambda: deque(maxlen=20))  # recent batch durations, seconds
    first_duration: float = 0.0  # the run's first batch: how long a batch may take until later ones are known
    growth: float = 1.0  # the last batch's input over processing rate (at least 1): how much longer the next may take
    stalled: bool = False
    lost: bool = False  # the run's driver is judged gone (``Lifecycle.tick``: its log silent, no end)
    beats: deque[float] = field(default_factory=lambda: deque(maxlen=20))  # the run's progress and idle events: its cadence
    restarts: deque[float] = field(default_factory=lambda: deque(maxlen=100))
    crash_loop: bool = False
    holder: object | None = None  # the Lifecycle whose application runs the query now (None: no run live)
    # the Lifecycle whose application ran the query last (its counters are where the next application's go on
    # from), and those counters once that application is forgotten (``Lifecycle.detach``)
    last_holder: Lifecycle | None = None
    totals: QueryTotals | None = None
    # what other rules keep of the query across its runs (the restore's baseline, growth, the Kafka offsets), by rule:
    # taken over with this state, so a restart as a new application is judged against the runs before it
    carried: dict[str, Any] = field(default_factory=dict)
    real_time_first_batch: float | None = None  # a real-time run's first batch, seconds (set by the engine)


def count_restart(q: RunState, ts: float) -> None:
    """A restart the crash loop counts. One not after the newest counted (logs concatenated or replayed twice, a
    restart repeating the times of the runs before, a clock stepped back) ends the window there: the restarts at or
    after its time leave, as the growth windows' points do, so a log replayed twice is not twice the restarts."""
    while q.restarts and ts <= q.restarts[-1]:
        q.restarts.pop()
    q.restarts.append(ts)


def succeeds(q: RunState, run_id: str | None, at: float | None) -> bool:
    """Whether a run ``run_id`` starting at ``at`` in another application follows ``q``'s held run: a new run
    that starts after that run's last sign of life. A driver killed without a word (no termination, its log
    left in progress until the watcher calls it lost, minutes later) still holds its run; its successor on
    the same checkpoint continues the query, as a listener in the new process and a replay of both logs do.
    The same run in two applications (one recording under many names) is two queries, not a succession."""
    return run_id is not None and at is not None and run_id != q.run_id and (q.last_alive is None or at >= q.last_alive)
