"""The last export at ``stop()`` (the final Pushgateway push, the OpenTelemetry SDK's shutdown export), bounded.

A gateway or collector that accepts connections and never answers held a job's ``spark.stop()`` for the
exporter's whole timeout, retries included (10 s for OTLP, 5 s for a push). The last export runs in a
thread of its own instead, and the stop waits for it ``stop_flush_seconds`` at most: an export not done
by then is given up (its thread ends with its socket's timeout, or with the process) and counted by the
caller as a failed export.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


def within(seconds: float, export: Callable[[], object], name: str) -> bool:
    """Run ``export`` and wait for it ``seconds`` at most; whether it ended in time (raised or not: it counts its
    own failures). Where no thread can be started (the interpreter is exiting) it runs here, bounded by its own
    timeouts."""
    ended = threading.Event()

    def run() -> None:
        try:
            export()
        except Exception as exc:  # the exporter counts its failures; this thread only must not print a traceback
            log.debug("spark-state-observer: last %s export failed: %r", name, exc)
        finally:
            ended.set()

    thread = threading.Thread(target=run, name=f"spark-state-observer-last-{name}", daemon=True)
    try:
        thread.start()
    except RuntimeError:
        run()
        return True
    return ended.wait(max(0.0, seconds))
