"""The watcher's own series: its applications, bytes, lines and events, problems and clock skew, and the
object-store figures, as samples its endpoint shows next to every application's."""

from __future__ import annotations

from collections.abc import Sequence

from spark_state_observer.exporters.samples import SampleSink
from spark_state_observer.fleet.app_events import PROBLEM_KINDS, WatchCounts
from spark_state_observer.fleet.store_mirror import PROBLEM_KINDS as STORE_PROBLEM_KINDS
from spark_state_observer.fleet.store_mirror import REQUEST_KINDS, StoreMirror
from spark_state_observer.metrics import catalog

WATCH_COUNTERS = (
    (catalog.WATCH_APPLICATIONS_DISCOVERED, "apps_discovered"),
    (catalog.WATCH_APPLICATIONS_FORGOTTEN, "apps_forgotten"),
    (catalog.WATCH_READ_BYTES, "read_bytes"),
    (catalog.WATCH_DECODED_BYTES, "decoded_bytes"),
    (catalog.WATCH_LINES, "lines"),
    (catalog.WATCH_EVENTS_PARSED, "events_parsed"),
    (catalog.WATCH_EVENTS_DELIVERED, "events_delivered"),
    (catalog.WATCH_EVENTS_DUPLICATE, "events_duplicate"),
)


def render_watch(f: SampleSink, counts: WatchCounts) -> None:
    """The watcher's own series (``catalog.WATCH_METRICS``) from its running totals."""
    for status, n in (("running", counts.apps_running), ("finished", counts.apps_finished), ("lost", counts.apps_lost)):
        f.add(catalog.WATCH_APPLICATIONS, (("status", status),), n)
    for spec, attr in WATCH_COUNTERS:
        f.add(spec, (), getattr(counts, attr))
    for kind in PROBLEM_KINDS:
        f.add(catalog.WATCH_PROBLEMS, (("kind", kind),), counts.problems.get(kind, 0))
    f.add(catalog.WATCH_CLOCK_SKEW, (), counts.clock_skew_seconds)


def render_store(f: SampleSink, mirrors: Sequence[StoreMirror]) -> None:
    """The object-store series (requests and problems by kind), summed over the watched URLs; none without URLs."""
    if not mirrors:
        return
    for kind in REQUEST_KINDS:
        f.add(catalog.WATCH_STORE_REQUESTS, (("kind", kind),), sum(m.requests.get(kind, 0) for m in mirrors))
    for kind in STORE_PROBLEM_KINDS:
        f.add(catalog.WATCH_STORE_PROBLEMS, (("kind", kind),), sum(m.problems.get(kind, 0) for m in mirrors))
