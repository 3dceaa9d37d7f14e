"""A restore listener in the shape Kafka Streams operators know (``StateRestoreListener``).

Kafka Streams calls ``onRestoreStart``, ``onBatchRestored`` and ``onRestoreEnd`` on one object per
application; operators write one class and keep their restore bookkeeping in it. The observer derives the
same three moments as signal events (``restore_started``, ``restore_progress``, ``restore_finished``, from
``spark_state_observer.placement.restore_progress``); this module declares the listener those who prefer an object
implement, and subscribes it to the three kinds. It is called on the observer's worker thread, never on
Spark's listener thread, like every signal callback; a method that raises is logged and counted by the bus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from spark_state_observer.model.signal_kinds import RESTORE_FINISHED, RESTORE_PROGRESS, RESTORE_STARTED, SignalEvent


@dataclass(frozen=True)
class RestoreUpdate:
    """One operator's restore at one moment, read from its signal event (absent figures are None).

    ``partitions_total`` is None until Spark says how many partitions the batch has; ``eta_seconds`` is None
    where no estimate can be made yet; ``duration_seconds`` and ``complete`` are set on the end only
    (``complete`` is False when the batch ended before the observer saw every partition load).
    """

    query_id: str
    query: str
    run_id: str | None
    timestamp: float
    operator: str
    batch_id: int | None
    reason: str | None
    partitions_total: int | None
    partitions_done: int | None
    elapsed_seconds: float | None
    eta_seconds: float | None
    duration_seconds: float | None
    complete: bool | None
    eta_basis: str | None  # "estimate" (the checkpoint's work, nothing finished yet), "blend" or "observed"
    executors_lost: tuple[str, ...]  # executors lost while it ran (their partitions loaded again)
    partitions_retried: int | None
    loads_from_dfs: int | None  # on the end, Spark 4.2+: stores loaded from the checkpoint, not reused
    event: SignalEvent

    @classmethod
    def of(cls, event: SignalEvent) -> RestoreUpdate:
        a = event.attributes
        return cls(
            query_id=event.query_id,
            query=event.query,
            run_id=event.run_id,
            timestamp=event.timestamp,
            operator=str(a.get("operator", "")),
            batch_id=a.get("batch_id"),
            reason=a.get("reason"),
            partitions_total=a.get("partitions_total"),
            partitions_done=a.get("partitions_done"),
            elapsed_seconds=a.get("elapsed_seconds"),
            eta_seconds=a.get("eta_seconds"),
            duration_seconds=a.get("duration_seconds"),
            complete=a.get("complete"),
            eta_basis=a.get("eta_basis"),
            executors_lost=tuple(a.get("executors_lost") or ()),
            partitions_retried=a.get("partitions_retried"),
            loads_from_dfs=a.get("loads_from_dfs"),
            event=event,
        )


class RestoreListener:
    """Subclass and override what you need; every method does nothing by default.

    ``on_restore_start`` once per stateful operator of a restoring batch, ``on_restore_progress`` as its
    partitions load (at most once per tenth of them, and at least every ``restore`` interval otherwise),
    ``on_restore_end`` once, with the duration.
    """

    def on_restore_start(self, restore: RestoreUpdate) -> None:
        """A restoring batch's stateful operator began loading its state stores."""

    def on_restore_progress(self, restore: RestoreUpdate) -> None:
        """More of the operator's partitions have loaded."""

    def on_restore_end(self, restore: RestoreUpdate) -> None:
        """The operator's restore ended (``complete``: every partition seen loading)."""


def subscribe_restore_listener(subscribe: Callable[[str, Callable[[SignalEvent], Any]], None], listener: RestoreListener) -> None:
    """Route the three restore kinds to ``listener``'s methods through ``subscribe`` (an observer's ``on``)."""
    subscribe(RESTORE_STARTED, lambda event: listener.on_restore_start(RestoreUpdate.of(event)))
    subscribe(RESTORE_PROGRESS, lambda event: listener.on_restore_progress(RestoreUpdate.of(event)))
    subscribe(RESTORE_FINISHED, lambda event: listener.on_restore_end(RestoreUpdate.of(event)))
