"""Capture: the StreamingQueryListener that takes each event as cheaply as Spark allows.

Classic PySpark converts every progress event field by field over py4j before a listener sees it
(dozens to hundreds of JVM round trips, ~0.4-0.8 s per event measured here). The fast path registers a
Python object that implements the JVM's ``PythonStreamingQueryListener`` directly and asks the Java
event for its JSON in one call. Where that internal interface is not there (Spark Connect, where the
listener receives events already as JSON; a future Spark), the public event objects are used instead.

Either way the callback only enqueues: it never raises into Spark and does no I/O.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, cast

from pyspark.sql.streaming.listener import StreamingQueryListener

from spark_state_observer.capture.queue import CapturedEvent, captured
from spark_state_observer.model import kinds


def _json_or_fields(jevent: Any, fields: tuple[str, ...]) -> str:
    """``jevent.json()`` (Spark 3.5+), else a JSON object built from the event's getters."""
    try:
        return cast(str, jevent.json())
    except Exception:
        out: dict[str, Any] = {}
        for name in fields:
            value = getattr(jevent, name)()
            out[name] = value if value is None or isinstance(value, (str, int, float)) else str(value)
        return json.dumps(out)


def _jvm_progress(jevent: Any) -> str:
    return cast(str, jevent.progress().json())


def _jvm_started(jevent: Any) -> str:
    return _json_or_fields(jevent, ("id", "runId", "name", "timestamp"))


def _jvm_idle(jevent: Any) -> str:
    return _json_or_fields(jevent, ("id", "runId", "timestamp"))


def _jvm_terminated(jevent: Any) -> str:
    return _json_or_fields(jevent, ("id", "runId", "exception"))


def take(submit: Callable[[CapturedEvent], None], kind: str, convert: Callable[[Any], Any], event: Any) -> None:
    """Hand one event to the observer, whatever happens: this runs on Spark's listener thread.

    A failure to convert the event is itself submitted (counted and logged by the worker); nothing raises.
    """
    started = time.perf_counter()
    try:
        submit(captured(kind, convert(event), started))
    except Exception as exc:
        try:
            submit(captured(kind, None, started, error=repr(exc)[:300]))
        except Exception:
            pass


class _JsonBridge:
    """Implements ``org.apache.spark.sql.streaming.PythonStreamingQueryListener`` for py4j."""

    def __init__(self, submit: Callable[[CapturedEvent], None]) -> None:
        self._submit = submit

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 - JVM interface names
        take(self._submit, kinds.STARTED, _jvm_started, jevent)

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        take(self._submit, kinds.PROGRESS, _jvm_progress, jevent)

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        take(self._submit, kinds.IDLE, _jvm_idle, jevent)

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        take(self._submit, kinds.TERMINATED, _jvm_terminated, jevent)

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def _public_started(event: Any) -> dict[str, Any]:
    return {
        "id": str(event.id),
        "runId": str(event.runId),
        "name": event.name,
        "timestamp": event.timestamp,
        "jobTags": sorted(getattr(event, "jobTags", None) or ()),
    }


def _public_progress(event: Any) -> Any:
    progress = event.progress
    try:
        return progress.json  # classic: one JVM call; Connect: json.dumps of the received dict
    except Exception:
        return dict(progress)


def _public_idle(event: Any) -> dict[str, Any]:
    return {"id": str(event.id), "runId": str(event.runId), "timestamp": event.timestamp}


def _public_terminated(event: Any) -> dict[str, Any]:
    return {
        "id": str(event.id),
        "runId": str(event.runId),
        "exception": event.exception,
        "errorClassOnException": getattr(event, "errorClassOnException", None),
    }


class QueryListener(StreamingQueryListener):
    """A listener that hands every event, as taken, to ``submit``; it knows nothing of who consumes them.

    ``fast_path`` (classic PySpark) registers the JSON bridge instead of PySpark's field-by-field converter.
    """

    def __init__(self, submit: Callable[[CapturedEvent], None], fast_path: bool = True) -> None:
        self._submit_event = submit
        self._fast_path = fast_path
        self._bridge = _JsonBridge(submit)

    @property
    def _jlistener(self) -> Any:
        """Classic PySpark registers this JVM-side object: our JSON bridge instead of PySpark's converter."""
        if not self._fast_path:
            return super()._jlistener
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            jvm = SparkContext._jvm
            assert jvm is not None, "classic PySpark registers listeners through a running SparkContext"
            self._jlistenerobj = jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(self._bridge)
        return self._jlistenerobj

    # the public-object path: Spark Connect, or fast_path=False
    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - PySpark's names
        take(self._submit_event, kinds.STARTED, _public_started, event)

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        take(self._submit_event, kinds.PROGRESS, _public_progress, event)

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        take(self._submit_event, kinds.IDLE, _public_idle, event)

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        take(self._submit_event, kinds.TERMINATED, _public_terminated, event)
