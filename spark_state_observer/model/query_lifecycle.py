"""A query's lifecycle across applications, defined once: the states and the one rule that derives them.

The listener, the watcher and replay each keep a query's latest run (``spark_state_observer.metrics.tracker``: its
status and the batches it completed) and the lifecycle rule's crash-loop verdict (``spark_state_observer.signals.lifecycle``);
``state_of`` turns those into the state that ``spark_streaming_query_lifecycle``, the history's lasting statuses
and the alerts share. A failed or crash-looping query is *lasting*: the watcher keeps it after its application is
forgotten (``spark_state_observer.fleet.query_statuses``) until a later run of the query runs or an operator retires it.

A query whose driver is gone without a word (killed by the OOM killer, its node lost: its event log stops with no
end) is ``lost``, a state of its own rather than ``failed`` with a cause: ``failed`` is what Spark said (a
termination with an exception, its class and root cause), while nothing was said of a lost run, whose end is an
inference from a silent log (``spark_state_observer.signals.lifecycle``) that its log growing again takes back. The
two call for different actions (read the exception; look for the process: OOM kills, node loss), and a lost run
still counts as a crash for the crash-loop rule, as every run whose end was never seen does. It is lasting and an
incident like ``failed``: the watcher keeps it after it forgets the application, until a later run of the query runs.
"""

from __future__ import annotations

from spark_state_observer.model import kinds

RUNNING = "running"
IDLE = "idle"
STOPPED = "stopped"
SCHEDULED = "scheduled"
FAILED = "failed"
CRASH_LOOPING = "crash_looping"
LOST = "lost"
RETIRED = "retired"
STATES = (RUNNING, IDLE, STOPPED, SCHEDULED, FAILED, CRASH_LOOPING, LOST)
"""The label values of ``spark_streaming_query_lifecycle`` (a retired query has no series: it is no one's concern)."""
LASTING = frozenset({FAILED, CRASH_LOOPING, SCHEDULED, LOST})
"""States that outlive their application: they end only with a run that runs, or a retirement. A scheduled
query between its runs lasts so that a run that does not come is seen (its application is long forgotten
when the next run is due)."""
TROUBLE = frozenset({FAILED, CRASH_LOOPING, LOST})
"""Lasting states that are an incident (a scheduled query waiting for its next run is not one)."""


def state_of(status: str, crash_loop: bool, run_batches: int, scheduled: bool = False, lost: bool = False) -> str:
    """The state of a query whose latest run has tracker ``status`` (``kinds.QUERY_STATUSES``) and completed
    ``run_batches`` batches, ``crash_loop`` being the lifecycle rule's verdict (restarts within its window)
    and ``scheduled`` its schedule verdict (``spark_streaming_query_scheduled``), ``lost`` its verdict that the
    run's driver is gone (``spark_streaming_query_lost``: a run still open whose log went silent).

    A crash loop ends only once a run completes a batch: a new run in the loop that has not got that far
    (each of the loop's runs fails at start) is still the loop, not a query running again. A query on a
    schedule that stopped cleanly is ``scheduled``: waiting for its next run, not stopped.
    """
    if status == kinds.FAILED:
        return CRASH_LOOPING if crash_loop else FAILED
    if status == kinds.TERMINATED:
        return SCHEDULED if scheduled else STOPPED
    if crash_loop and (run_batches == 0 or lost):
        return CRASH_LOOPING
    if lost:
        return LOST
    return IDLE if status == kinds.IDLE else RUNNING
