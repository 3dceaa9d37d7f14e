"""10,000 generated malformed events through the capture path: nothing may reach Spark.

The JVM hands the callback a Java event object; here a Python object stands in for it whose
``progress().json()`` / ``json()`` returns generated text or raises, as a broken or future Spark could.
Everything goes through the real listener bridge, the bounded queue and the observer's worker code.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import fixture_runs, progress_lines
from spark_state_observer.capture.listener import _JsonBridge
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.settings import Settings

REAL = [json.dumps(p) for run in fixture_runs() for p in progress_lines(run)]


class JavaEvent:
    """What py4j would hand the callback: an object whose getters return text or raise."""

    def __init__(self, payload: object) -> None:
        self._payload = payload

    def _value(self) -> object:
        if isinstance(self._payload, BaseException):
            raise self._payload
        return self._payload

    def progress(self) -> JavaEvent:
        return self

    def json(self) -> object:
        return self._value()


payloads = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=100),
    st.sampled_from(REAL).flatmap(lambda s: st.integers(0, len(s)).map(lambda n: s[:n])),  # truncated real events
    st.sampled_from(REAL).map(lambda s: s.replace("numRowsTotal", "numRowsTotal\\u0000")),
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=20,
    ).map(json.dumps),
    st.sampled_from([RuntimeError("py4j gateway gone"), ValueError("bad"), KeyError("x"), None, 42, object()]),
)
OBSERVER = PrometheusObserver(Settings(http_enabled=False, queue_size=64), serve=False, live=False)
BRIDGE = _JsonBridge(OBSERVER.submit)


@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(["onQueryStarted", "onQueryProgress", "onQueryIdle", "onQueryTerminated"]), payloads)
def test_no_exception_reaches_spark(callback: str, payload: object) -> None:
    before = OBSERVER.queue.put_count
    getattr(BRIDGE, callback)(JavaEvent(payload))  # must not raise
    assert OBSERVER.queue.put_count == before + 1  # the event, or the failure to take it, is recorded
    for item in OBSERVER.queue.drain(0):
        OBSERVER.process(item)  # the worker's code path must not raise either
