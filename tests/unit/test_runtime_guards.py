"""A part of the pipeline that fails on an event (the executor poll, placement) is counted and logged once,
never raised: ``Observer.process`` runs on the worker, and under ``attach()`` it must never reach Spark. The
per-event path calls those parts without ``_guarded``'s call layer, so the guard is asserted here."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from conftest import FIXTURES, progress_lines
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.metrics import catalog
from spark_state_observer.model import kinds
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.pipeline.runtime import Observer
from spark_state_observer.placement.tasks import BatchTasks, ExecutorChange
from spark_state_observer.settings import Settings


class FailingSource:
    """A placement source whose every answer fails, as a bug in it would."""

    name = "failing"

    def take(self, progress: QueryProgress) -> list[BatchTasks | ExecutorChange]:
        raise RuntimeError("placement bug")

    def executors(self) -> Iterable[ExecutorChange]:
        return ()

    def close(self) -> None:
        pass


def _failing_poll() -> set[str]:
    raise OSError("driver unreachable")


def test_a_failing_executor_poll_and_placement_are_counted_and_the_event_still_applied() -> None:
    observer = Observer(Settings.from_env(poll_executors=True), live=False, executor_ids=_failing_poll, placement=FailingSource())
    lines = progress_lines(os.path.join(FIXTURES, "rocksdb_restart", "run1"))[:3]
    for line in lines:
        observer.process(CapturedEvent(kinds.PROGRESS, json.dumps(line), 0.0, 0.0))
    assert observer.self_metrics.failed == 2 * len(lines)  # each event: the poll and placement, nothing else
    record = observer.tracker.get(lines[0]["id"])
    assert record is not None and record.counters[(catalog.BATCHES, ())] == len(lines)
    assert sorted(observer._error_logged) == ["executors:OSError", "placement:RuntimeError"]
