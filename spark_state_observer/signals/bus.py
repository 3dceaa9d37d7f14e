"""Where signals go once derived: the recent list, the log, and the callbacks users subscribed.

A failing callback is logged and counted (``spark_state_observer_callback_failures_total``); it never
reaches the worker, let alone Spark.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable, Iterable

from spark_state_observer.model.signal_kinds import ALL, SIGNAL_KINDS, SignalEvent

log = logging.getLogger("spark_state_observer")
Callback = Callable[[SignalEvent], Any]


class SignalBus:
    def __init__(self, on_callback_failure: Callable[[], None] = lambda: None, recent: int = 1000) -> None:
        self.recent: deque[SignalEvent] = deque(maxlen=recent)
        self._subscribers: dict[str, list[Callback]] = {}
        self._on_failure = on_callback_failure

    def subscribe(self, kind: str, callback: Callback) -> None:
        """Call ``callback(event)`` for every signal of ``kind`` ("*" for all); an unknown kind is a ValueError."""
        if kind != ALL and kind not in SIGNAL_KINDS:
            raise ValueError(f"unknown signal kind {kind!r}; one of: {ALL}, {', '.join(SIGNAL_KINDS)}")
        self._subscribers.setdefault(kind, []).append(callback)

    def publish(self, signals: Iterable[SignalEvent]) -> None:
        for event in signals:
            self.recent.append(event)
            if log.isEnabledFor(logging.INFO):  # ``describe`` formats every attribute: only for a log that shows it
                log.info("spark-state-observer: %s", event.describe())
            for callback in self._subscribers.get(event.kind, []) + self._subscribers.get(ALL, []):
                try:
                    callback(event)
                except Exception as exc:  # a user's callback must never reach Spark
                    self._on_failure()
                    log.warning("spark-state-observer: %s callback %r failed: %r", event.kind, callback, exc)
