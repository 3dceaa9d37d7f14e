"""The worker's plumbing: the bounded queue, the growth window, and what sinks are handed, in which order."""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

import pytest

from conftest import fixture_runs, progress_lines
from spark_state_observer.capture.queue import CapturedEvent, CaptureQueue
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.metrics import catalog
from spark_state_observer.model.events import Event, QueryProgress, QueryStarted
from spark_state_observer.model.signal_kinds import QUERY_RESTARTED, QUERY_STARTED, RESTORE, SignalEvent
from spark_state_observer.pipeline.sink import Sink
from spark_state_observer.settings import Settings
from spark_state_observer.signals.growth_window import FLAT, RISING, GrowthWindow

RESTART = fixture_runs("rocksdb_restart")


def item(n: int) -> CapturedEvent:
    return CapturedEvent("progress", f"event {n}", float(n), 0.0)


def test_queue_overflow_drops_the_oldest_and_counts_it() -> None:
    queue = CaptureQueue(3)
    for n in range(5):
        queue.put(item(n))
    assert queue.dropped == 2 and queue.put_count == 5 and len(queue) == 3
    assert [i.payload for i in queue.drain(0)] == ["event 2", "event 3", "event 4"]
    assert queue.drain(0) == []


def test_queue_drops_reach_the_observers_own_metrics() -> None:
    obs = PrometheusObserver(Settings(http_enabled=False, history_enabled=False, queue_size=2), serve=False, live=False)
    progress = progress_lines(RESTART[0])
    for p in progress:
        obs.submit(CapturedEvent("progress", json.dumps(p), 0.0, 0.0))
    assert obs.flush()
    dropped = len(progress) - 2
    assert obs.self_metrics.dropped["queue_full"] == dropped
    assert f'spark_state_observer_events_dropped_total{{reason="queue_full"}} {float(dropped)}'.encode() in obs.exposition()
    # the two newest were processed
    assert obs.tracker.snapshot()[0].last_progress.batch_id == progress[-1]["batchId"]


def test_growth_window_fits_the_slope_and_slides() -> None:
    w = GrowthWindow(window_seconds=50, min_points=4)
    assert w.trend() is None and not w.rising()
    for t in range(0, 100, 10):  # rows grow 5/s, memory 20 B/s, 50 added and nothing removed per batch
        w.add(float(t), 1000 + 5.0 * t, 4000 + 20.0 * t, 50, 0)
    rows_rate, bytes_rate, ratio, rows_eta, bytes_eta = w.rates(rows_budget=2000, bytes_budget=0)
    assert len(w.points) == 6  # 40..90: older points left the 50 s window
    assert rows_rate == pytest.approx(5.0) and bytes_rate == pytest.approx(20.0)
    assert w.trend().shape == RISING and w.rising() and ratio == 0.0
    assert rows_eta == pytest.approx((2000 - 1450) / 5.0) and bytes_eta is None
    for t in range(100, 160, 10):  # flat now, evicting as much as it adds
        w.add(float(t), 1450, 5800, 50, 50)
    rows_rate, _, ratio, _, _ = w.rates()
    assert rows_rate == pytest.approx(0.0) and ratio == pytest.approx(1.0)
    assert w.trend().shape == FLAT and not w.rising()


def test_growth_window_running_sums_match_a_fresh_fit() -> None:
    """The O(1) running sums stay equal to a refit over the points (they are recomputed every 1,000 adds)."""
    w = GrowthWindow(window_seconds=30, min_points=2, max_points=50)
    for t in range(2500):
        w.add(t * 0.5, 1e9 + (t % 7) * 3.0 + t, 7.0 * t, 3, t % 2)
    fresh = GrowthWindow(window_seconds=30, min_points=2, max_points=50)
    for point in w.points:
        fresh.add(*point)
    a, b = w.rates(), fresh.rates()
    assert a[0] == pytest.approx(b[0], rel=1e-6)
    assert a[1] == pytest.approx(b[1], rel=1e-6)


def test_growth_window_needs_half_a_window_of_history() -> None:
    w = GrowthWindow(window_seconds=100, min_points=3)
    for t in range(0, 40, 10):  # 4 points but only 30 s of the 100 s window
        w.add(float(t), 100.0 + t, 0.0, 10, 0)
    assert w.trend() is None and not w.rising()


class RecordingSink:
    """A sink that notes each call and what the metric state showed at that moment."""

    name = "recording"

    def __init__(self, obs: PrometheusObserver) -> None:
        self.obs = obs
        self.calls: list[tuple[str, Any]] = []

    def on_event(self, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        restarts = sum(v for (spec, _), v in self.obs.tracker.snapshot()[0].counters.items() if spec is catalog.QUERY_RESTARTS)
        self.calls.append(("event", (type(event).__name__, [s.kind for s in signals], restarts)))

    def tick(self, processed: int) -> None:
        self.calls.append(("tick", processed))

    def flush(self) -> None:
        self.calls.append(("flush", None))

    def close(self) -> None:
        self.calls.append(("close", None))


def test_sinks_get_each_event_then_the_signals_it_caused_with_the_state_applied() -> None:
    obs = PrometheusObserver(Settings(http_enabled=False, history_enabled=False), serve=False, live=False)
    sink = RecordingSink(obs)
    assert isinstance(sink, Sink)
    obs.add_sink(sink)
    run1, run2 = (progress_lines(r) for r in RESTART)
    started = {"id": run2[0]["id"], "runId": run2[0]["runId"], "name": run2[0]["name"], "timestamp": run2[0]["timestamp"]}
    for p in run1:
        obs.submit(CapturedEvent("progress", json.dumps(p), 0.0, 0.0))
    obs.submit(CapturedEvent("started", json.dumps(started), 0.0, 0.0))
    obs.submit(CapturedEvent("progress", json.dumps(run2[0]), 0.0, 0.0))
    obs.stop()
    events = [args for call, args in sink.calls if call == "event"]
    assert events[-2] == (QueryStarted.__name__, [QUERY_STARTED, QUERY_RESTARTED], 1.0)  # the restart already counted
    assert events[-1] == (QueryProgress.__name__, [RESTORE, RESTORE], 1.0)
    assert [call for call, _ in sink.calls[-3:]] == ["tick", "flush", "close"]
    assert ("tick", len(run1) + 2) in sink.calls  # one round of the worker took every queued event


def test_pushgateway_replay_and_endpoint_share_one_exposition(tmp_path: Any) -> None:
    """The Pushgateway receives exactly ``exposition()``, the text /metrics serves and replay prints."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from spark_state_observer.exporters.push import Pusher
    from spark_state_observer.offline.replay import replay

    received: list[tuple[str, bytes]] = []

    class Gateway(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = replay([os.path.join(RESTART[0], "progress.jsonl")], Settings(http_enabled=False, history_enabled=False))
        failures: list[int] = []
        pusher = Pusher(
            result.collector.exposition,
            f"127.0.0.1:{server.server_port}",
            "my job/1",
            3600,
            5,
            None,
            {"instance": "a"},
            lambda: failures.append(1),
        )
        pusher.stop()  # the final push
    finally:
        server.shutdown()
        server.server_close()
    assert failures == []
    ((path, body),) = received
    assert path == "/metrics/job@base64/bXkgam9iLzE=/instance/a"
    assert body == result.collector.exposition() and body.decode() == result.exposition()
    assert b"spark_state_rows{" in body
