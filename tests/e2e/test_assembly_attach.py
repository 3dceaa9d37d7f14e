"""One assembly, the fourth entry point on real Spark: a sink registered in the table is built by ``attach()``
and receives the session's events (the other three: ``tests/unit/test_assembly.py``)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

import spark_state_observer as observer
from spark_state_observer.assembly import SINKS
from spark_state_observer.model.events import Event, QueryProgress, QueryStarted, QueryTerminated
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.pipeline.sink import SinkContext

pytestmark = pytest.mark.slow


class Recorder:
    name = "recorder"

    def __init__(self, context: SinkContext) -> None:
        self.context = context
        self.events: list[Event] = []
        self.closed = False

    def on_event(self, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        if event is not None:
            self.events.append(event)

    def tick(self, processed: int) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_attach_builds_a_registered_sink_and_feeds_it(spark, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    built: list[Recorder] = []

    def build(context: SinkContext, options: object) -> Recorder:
        built.append(Recorder(context))
        return built[-1]

    monkeypatch.setitem(SINKS, "recorder", build)
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text('{"k": 1}\n{"k": 2}\n')
    handle = observer.attach(spark, http_enabled=False, history_enabled=False, placement="off")
    try:
        query = (
            spark.readStream.schema("k INT")
            .json(str(source))
            .writeStream.format("noop")
            .queryName("assembly_attach")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        deadline = time.monotonic() + 60  # Spark's listener bus is asynchronous: wait for the termination
        while handle.observer.self_metrics.received["terminated"] < 1 and time.monotonic() < deadline:
            time.sleep(0.25)
        assert handle.flush()
    finally:
        handle.stop()
    (sink,) = built
    assert sink.context.view is handle.observer.view and sink.context.identity.app_id
    assert [type(e) for e in sink.events if not isinstance(e, QueryProgress)] == [QueryStarted, QueryTerminated]
    assert any(isinstance(e, QueryProgress) and e.name == "assembly_attach" for e in sink.events)
    assert sink.closed
