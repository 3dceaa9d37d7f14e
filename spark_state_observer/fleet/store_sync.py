"""Object-store mirrors synced in threads of their own, beside the watcher's poll of the local folders.

Why: a store that hangs (an endpoint that accepts and never answers), throttles or lists for long must not
delay what the watcher reads from local folders, nor other stores. Each mirror
(``spark_state_observer.fleet.store_mirror``) gets a daemon thread that syncs it every poll interval; a sync's
own deadline and the client's timeouts bound each round, and the watcher reads whatever the mirror holds
when it polls. Stopping waits a short while for a round in progress, then leaves the daemon thread behind.
"""

from __future__ import annotations

import threading
import time
from typing import Sequence

from spark_state_observer.fleet.store_mirror import StoreMirror


class StoreSync:
    """Sync each mirror every ``interval`` seconds in its own thread until ``stop``."""

    def __init__(self, mirrors: Sequence[StoreMirror], interval: float) -> None:
        self.mirrors = list(mirrors)
        self.interval = interval
        self.rounds = 0  # syncs done, all mirrors together (tests wait on it)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> StoreSync:
        for i, mirror in enumerate(self.mirrors):
            thread = threading.Thread(target=self._run, args=(mirror,), name=f"spark-state-observer-store-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _run(self, mirror: StoreMirror) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            mirror.sync()  # never raises: failures are the mirror's counted problems
            self.rounds += 1
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self, timeout: float = 5.0) -> None:
        """Stop after the rounds in progress, waiting at most ``timeout`` seconds in all."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
