"""A restore as an OTLP span, through a real OTLP/HTTP receiver: the recorded large restart replayed with traces on.

The span runs from the restoring batch's job submission to the last partition's task end, one child per
listed partition from its task's launch to its finish; the times are read here from the event log itself.
"""

from __future__ import annotations

from typing import Any

from test_restore_progress import LARGE, log_truth

from otlp_receiver import HttpReceiver
from spark_state_observer.exporters.otel.sink import OtelSink
from spark_state_observer.model.signal_kinds import RESTORE_FINISHED, SignalEvent
from spark_state_observer.offline.replay import replay
from spark_state_observer.pipeline.runtime import Observer
from spark_state_observer.settings import Settings


def test_a_restore_is_a_span_with_its_partitions() -> None:
    server = HttpReceiver()
    settings = Settings(otlp_endpoint=server.endpoint, otlp_traces=True, otlp_interval_seconds=3600.0, otlp_timeout_seconds=2.0)
    sinks: list[OtelSink] = []

    def add_sink(observer: Observer, _at: float) -> None:  # replay builds no exporter: the test adds this one
        if not sinks:
            sinks.append(OtelSink(observer.view, settings, lambda: None, {"service.name": "restore-test"}))
            observer.add_sink(sinks[0])

    finished: list[SignalEvent] = []
    try:
        replay([LARGE], settings, before_event=add_sink, on_signal=lambda s: finished.append(s) if s.kind == RESTORE_FINISHED else None)
        spans = server.received.spans()
    finally:
        server.stop()
    (batch,) = {s.attributes["batch_id"] for s in finished}
    truth = log_truth([LARGE], batch)
    restores = [s for s in spans if s["name"].startswith("restore ")]
    assert len(restores) == len(finished) == 2
    for signal in finished:
        (span,) = [s for s in restores if s["attributes"]["spark.restore.operator"] == signal.attributes["operator"]]
        assert abs(span["start"] - truth["submitted"] * 1e9) < 1e3  # the job submission, to the microsecond
        assert abs(span["end"] - signal.timestamp * 1e9) < 1e3
        assert span["attributes"]["spark.restore.partitions_done"] == 16
        children: list[dict[str, Any]] = [s for s in spans if s["parent"] == span["span_id"]]
        assert sorted(c["attributes"]["spark.state.partition"] for c in children) == list(range(16))  # the 16 slowest: all
        assert max(c["end"] for c in children) == span["end"]
        assert all(span["start"] <= c["start"] < c["end"] for c in children)
