"""The bounded hand-off between Spark's listener thread and the observer's worker.

Spark calls the listener on its single "streams" listener-bus thread; anything slow there backs up every
other listener. So the callback only appends here: ``deque.append`` with ``maxlen`` is atomic, never
blocks, and on overflow silently pushes out the oldest entry, which we count.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CapturedEvent:
    """One event as taken from Spark: its kind, its JSON text (or object), and what taking it cost."""

    kind: str
    payload: Any
    received_at: float  # time.time() when the callback ran
    callback_seconds: float
    error: str | None = None  # set when even taking the event failed


class CaptureQueue:
    """Drop-oldest bounded queue with a wake-up signal for one consumer."""

    def __init__(self, maxsize: int) -> None:
        self._items: deque[CapturedEvent] = deque(maxlen=maxsize)
        self._maxsize = maxsize
        self._ready = threading.Event()
        self.dropped = 0  # events pushed out by overflow
        self.put_count = 0  # events ever put (for flush: wait until all of them are taken or dropped)

    def put(self, item: CapturedEvent) -> None:
        """Never blocks; counts the oldest event it pushes out when full."""
        if len(self._items) >= self._maxsize:
            self.dropped += 1
        self._items.append(item)
        self.put_count += 1
        self._ready.set()

    def drain(self, timeout: float) -> list[CapturedEvent]:
        """Wait up to ``timeout`` seconds for events, then take all that are there."""
        if not self._items:
            self._ready.wait(timeout)
        self._ready.clear()
        out: list[CapturedEvent] = []
        while True:
            try:
                out.append(self._items.popleft())
            except IndexError:
                return out

    def wake(self) -> None:
        self._ready.set()

    def __len__(self) -> int:
        return len(self._items)


def captured(kind: str, payload: Any, started: float, error: str | None = None) -> CapturedEvent:
    """Stamp an event with its receive time and the callback's cost so far (perf_counter ``started``)."""
    return CapturedEvent(kind, payload, time.time(), time.perf_counter() - started, error)
