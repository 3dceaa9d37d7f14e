"""Placement from event logs (``replay``, ``backtest``, ``watch``): task events in, closed batches out.

The live path asks the driver's REST API once per progress event (``spark_state_observer.placement.task_poll``). A
recorded or watched event log has every task already, in the order Spark wrote them: this source is fed
each raw event (a parsed event-log JSON object) *before* the pipeline processes the progress event that
follows it, and hands the batches that event closed to ``spark_state_observer.placement.feed`` at that
progress event. Both paths meet in the same ``PlacementFeed``, so replay shows what live shows (and more:
only event logs carry per-partition load times, rows and memory).

Who calls ``feed``:

- replay: ``spark_state_observer.offline.replay`` taps every line of the log (``read_records(..., tap=...)``) and
  passes the task-level lines through ``feed_line``;
- watch: for every ``RawEvent`` of an application, in order, ``feed_line(raw.line)`` for the task, job and
  SQL events (the watcher hands them over unparsed: ``raw_events=PLACEMENT_EVENTS``, only the lines
  ``wanted_line`` keeps) and ``feed(raw.data)`` for the others, before the progress event's
  ``CapturedEvent`` goes to ``Observer.process``.

Task, job and SQL lines are read through ``TaskEventReader.feed_line`` (a typed decode of the fields the
reader uses, ``spark_state_observer.placement.task_decode``); what it declines is parsed whole and fed as before.

Memory is bounded: the reader's own bounds, and at most ``max_pending`` closed items waiting.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any

from spark_state_observer.model import decode
from spark_state_observer.model.bounded import loads
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.model.spark_events import QUERY_PROGRESS, line_prefix
from spark_state_observer.placement.restore_progress import RestoreProgress
from spark_state_observer.placement.task_lines import wanted_line
from spark_state_observer.placement.tasks import BatchTasks, ExecutorChange, TaskEventReader

_PROGRESS_LINE = line_prefix(QUERY_PROGRESS)
MAX_PENDING = 4096
MAX_APPS = 1024  # applications followed by one source (watch); the least recently fed is forgotten first


class EventLogSource:
    """A ``PlacementSource`` fed with an event log's task-level events, in the log's order; thread-confined."""

    name = "eventlog"

    def __init__(self, max_pending: int = MAX_PENDING, max_apps: int = MAX_APPS) -> None:
        self._readers: OrderedDict[str, TaskEventReader] = OrderedDict()  # per application: stage and task ids are per application
        self.max_apps = max_apps
        self._pending: deque[BatchTasks | ExecutorChange] = deque(maxlen=max_pending)
        self.bad_lines = 0
        self._restores: RestoreProgress | None = None

    def feed(self, event: Mapping[str, Any], app: str = "") -> None:
        """One parsed event-log object of application ``app`` (any type: the reader keeps what it needs); never raises."""
        self._pending.extend(self._reader(app).feed(event))

    def _reader(self, app: str) -> TaskEventReader:
        reader = self._readers.get(app)
        if reader is None:
            reader = self._readers[app] = TaskEventReader()
            reader.restores = self._restores
            while len(self._readers) > self.max_apps:
                self._readers.popitem(last=False)
        self._readers.move_to_end(app)
        return reader

    def follow_restores(self, progress: RestoreProgress) -> None:
        """Tell ``progress`` each restoring batch's job start and stateful task end, as the log has them."""
        self._restores = progress
        for reader in self._readers.values():
            reader.restores = progress

    def run_started(self, query_id: str, run_id: str) -> None:
        """Nothing: the reader sees the run's start in the log itself, in order."""

    def restore_tick(self) -> None:
        """Nothing: the log's lines come in through ``feed_line``."""

    def forget(self, app: str) -> None:
        """An application the watcher stopped following: its open batches will not complete."""
        self._readers.pop(app, None)

    def feed_line(self, line: bytes, app: str = "", wanted: bool = False) -> None:
        """One raw event-log line of application ``app``: parsed only when it is of a type placement uses (most
        lines are not), and then only the fields placement reads where the typed decode takes the line.

        ``wanted``: the caller kept the line by ``wanted_line`` already (the watcher's ``raw_keep``), so it is not
        searched again (a stateless task end costs a dozen searches of its kilobytes)."""
        if line.startswith(_PROGRESS_LINE):  # the most common line placement reads: its ids and operator names only
            reader = self._reader(app)
            ids = decode.event_progress_ids(line)  # the typed decode the pipeline reads the metrics from next
            if ids is not None:
                self._pending.extend(reader.progress_ids(ids))
                return
        elif not wanted and not wanted_line(line):
            return
        else:
            done = self._reader(app).feed_line(line)
            if done is not None:
                self._pending.extend(done)
                return
        try:  # not the shape the typed decodes read: the whole line
            obj = loads(line)  # bounded: a 30 MB ``[{},{},...]`` is refused, counted as a bad line
        except (ValueError, RecursionError):
            self.bad_lines += 1  # replay reports the count (the record reader skips these lines unparsed)
            return
        if isinstance(obj, dict):
            self.feed(obj, app)

    def take(self, progress: QueryProgress) -> list[BatchTasks | ExecutorChange]:
        """What was closed up to this progress event's own batch, in order; nothing when that batch is not closed yet.

        Fed in step with the pipeline (replay, watch), the batch was closed by this very progress event and
        everything pending goes. A source fed ahead of the pipeline (a whole log at once) still hands each
        progress event only its own batch and what came before it, so the metrics move batch by batch.
        """
        key = (progress.query_id, progress.batch_id)
        for i in range(len(self._pending) - 1, -1, -1):
            item = self._pending[i]
            if isinstance(item, BatchTasks) and (item.query_id, item.batch_id) == key:
                return [self._pending.popleft() for _ in range(i + 1)]
        return []

    def executors(self) -> list[ExecutorChange]:
        """Executor changes come in order through ``take``: nothing more to ask."""
        return []

    def problems(self) -> dict[str, int]:
        """What the reader could not use, by kind (plus unparsable task lines)."""
        out: dict[str, int] = {}
        for reader in self._readers.values():
            for what, n in reader.problems.items():
                out[what] = out.get(what, 0) + n
        if self.bad_lines:
            out["bad_json"] = self.bad_lines
        return out

    def close(self) -> None:
        """Batches still open at the end had no progress event: they never completed, and are dropped."""
        self._pending.clear()
