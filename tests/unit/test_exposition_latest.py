"""The endpoint's newest rendering: byte for byte the text rendered before, fresh after a flush, stale only within its bound."""

from __future__ import annotations

import gzip
import json
import math
import random
import urllib.request

import pytest

from conftest import fixture_runs, progress_lines
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.exporters.exposition import Families, QueryLines, family
from spark_state_observer.exporters.http import MetricsServer
from spark_state_observer.exporters.latest import AGE_HEADER, LatestExposition, Rendered
from spark_state_observer.exporters.prometheus import histogram_text
from spark_state_observer.exporters.samples import render_self
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.updates import Update
from spark_state_observer.settings import Settings

RUNS = {run.split("/fixtures/")[1]: progress_lines(run) for run in fixture_runs() if progress_lines(run)}  # runs with batches


def text_before_parts(obs: PrometheusObserver) -> bytes:
    """The exposition as ``StateCollector.exposition`` joined it before it came in parts (the reference the endpoint must keep)."""
    collector = obs.prometheus.collector
    keyed, app = collector.application_lines()
    rest = Families()
    static = obs.view.identity.static
    render_self(rest, obs.view.self_snapshot(), static)
    by_family: dict[object, list[bytes]] = {}
    lines: QueryLines
    for lines in [lines for _, lines in keyed]:
        for spec, text in lines:
            parts = by_family.get(spec)
            if parts is None:
                parts = by_family[spec] = [family(spec).header]
            parts.append(text)
    for spec, text in app + rest.lines():
        by_family.setdefault(spec, [family(spec).header]).append(text)
    return b"".join(part for parts in by_family.values() for part in parts) + histogram_text(obs.view.self_snapshot(), static)


class Served:
    """An endpoint over ``obs`` as the live observer builds it; ``ahead_after`` 0 renders every time on the renderer thread."""

    def __init__(self, obs: PrometheusObserver, ahead_after: float) -> None:
        collector = obs.prometheus.collector
        self.server = MetricsServer(collector.exposition, obs.prometheus.registry, "127.0.0.1", 0, render_parts=collector.exposition_parts)
        self.server.latest.ahead_after = ahead_after

    def get(self, gzipped: bool = True) -> tuple[bytes, float]:
        """The body (decompressed) and the age the endpoint says it has."""
        request = urllib.request.Request(self.server.url, headers={"Accept-Encoding": "gzip"} if gzipped else {})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
            assert (response.headers.get("Content-Encoding") == "gzip") == gzipped
            age = float(response.headers[AGE_HEADER])
        return (gzip.decompress(body) if gzipped else body), age


def feed(obs: PrometheusObserver, kind: str, payload: dict) -> None:
    obs.process(CapturedEvent(kind, json.dumps(payload), 0.0, 0.0))


@pytest.mark.parametrize("ahead_after", [0.0, math.inf], ids=["rendered-ahead", "rendered-in-request"])
def test_served_text_is_byte_for_byte_the_text_rendered_before_on_every_recorded_run(ahead_after: float) -> None:
    obs = PrometheusObserver(Settings(http_enabled=False), serve=False, live=False)
    served = Served(obs, ahead_after)
    try:
        for run, progress in RUNS.items():
            for p in progress:
                feed(obs, "progress", p)
            served.server.invalidate()  # as PrometheusObserver.flush does: the next GET shows all of it
            text = text_before_parts(obs)
            assert served.get()[0] == text, run
            assert served.get(gzipped=False)[0] == text, run  # the same rendering, decompressed
            assert obs.exposition() == text  # what the Pushgateway and replay get
        assert len(RUNS) >= 6 and b"spark_state_rows{" in text
    finally:
        served.server.stop()


def test_served_text_is_byte_for_byte_the_text_rendered_before_after_random_updates() -> None:
    rng = random.Random(17)
    obs = PrometheusObserver(Settings(http_enabled=False, max_queries=6), serve=False, live=False)
    served = Served(obs, 0.0)
    progress = [p for run in RUNS.values() for p in run]
    try:
        for step in range(60):
            for _ in range(rng.randint(1, 5)):
                p = dict(rng.choice(progress))
                query = rng.randrange(8)  # more queries than kept: some are evicted and leave the text
                p["id"], p["name"] = f"00000000-0000-0000-0000-{query:012d}", rng.choice([f"q{query}", f'q"{query}\\n'])
                choice = rng.random()
                if choice < 0.8:
                    feed(obs, "progress", p)
                elif choice < 0.9:
                    feed(obs, "terminated", {k: p[k] for k in ("id", "runId", "name", "timestamp")} | {"exception": "boom"})
                else:
                    obs.tracker.apply_updates([Update(catalog.QUERY_SECONDS_SINCE_PROGRESS, (), rng.random() * 100, p["id"])])
            served.server.invalidate()
            assert served.get()[0] == text_before_parts(obs), step
    finally:
        served.server.stop()


def test_a_get_serves_the_newest_rendering_within_its_age_and_a_fresh_one_after_invalidate() -> None:
    state = [b"a"]
    latest = LatestExposition(lambda: [state[0]], ahead_after=0.0, refresh=3600.0, max_age=3600.0)
    try:
        assert latest.get().text() == b"a"  # nothing rendered yet: rendered for this GET
        state[0] = b"b"
        stale = latest.get()
        assert stale.text() == b"a" and latest.renderings == 1  # within max_age: the newest as it is
        latest.invalidate()
        assert latest.get().text() == b"b" and latest.renderings == 2  # rendered by the renderer thread, after the invalidation
    finally:
        latest.close()


def test_a_rendering_that_fails_fails_the_gets_waiting_for_it_and_the_next_one_recovers() -> None:
    state: list[bytes | None] = [b"a"]

    def render() -> list[bytes]:
        if state[0] is None:
            raise ZeroDivisionError
        return [state[0]]

    latest = LatestExposition(render, ahead_after=0.0, refresh=0.01, max_age=3600.0)
    try:
        assert latest.get().text() == b"a"
        state[0] = None
        latest.invalidate()
        with pytest.raises(ZeroDivisionError):
            latest.get()
        state[0] = b"b"
        latest.invalidate()
        assert latest.get().text() == b"b"
    finally:
        latest.close()


def test_cheap_renderings_are_done_by_each_get_without_a_thread() -> None:
    state = [b"a"]
    latest = LatestExposition(lambda: [state[0]], ahead_after=math.inf, max_age=3600.0)
    assert latest.get().text() == b"a"
    state[0] = b"b"
    assert latest.get().text() == b"b" and latest.renderings == 2
    assert latest._thread is None


def test_the_live_endpoint_says_the_age_of_what_it_serves_and_shows_everything_after_a_flush() -> None:
    obs = PrometheusObserver(Settings(http_port=0), live=False).start()
    request = urllib.request.Request(obs.server.url, headers={"Accept-Encoding": "gzip"})

    def batch_ids() -> set[bytes]:
        with urllib.request.urlopen(request, timeout=30) as response:
            assert float(response.headers[AGE_HEADER]) >= 0.0
            text = gzip.decompress(response.read())
        return {line.rsplit(b" ", 1)[1] for line in text.splitlines() if line.startswith(b"spark_streaming_batch_id{")}

    try:
        obs.server.latest.ahead_after = 0.0  # as for a fleet: every rendering is slow enough to render ahead
        progress = RUNS["rocksdb_restart/run1"]
        for chunk in (progress[:3], progress[3:]):
            for p in chunk:
                obs.submit(CapturedEvent("progress", json.dumps(p), 0.0, 0.0))
            assert obs.flush()
            assert batch_ids() == {str(float(chunk[-1]["batchId"])).encode()}  # the second: not the rendering of the first
    finally:
        obs.stop()


def test_the_renderer_plans_one_rendering_ahead_of_each_expected_scrape() -> None:
    latest = LatestExposition(lambda: [b""], ahead_after=0.0, refresh=1.0, max_age=3600.0)
    latest._newest = Rendered(b"", began=99.5, ended=100.0, cpu=0.25, size=0)  # rendered for the GET at 100
    latest._walls.append(0.5)
    assert latest._due(100.0) is None  # one GET: no scrape interval known yet, the next GET takes the newest
    latest._gets.extend([90.0, 100.0])  # scraped every 10 s
    assert latest._due(100.0) == 100.0 + 10.0 - 0.5 - 1.0  # done about a second before the GET expected at 110
    latest._newest = Rendered(b"", began=108.5, ended=109.0, cpu=0.25, size=0)
    assert latest._due(109.0) is None  # rendered for that GET: nothing more until it comes
    latest._gets.extend([100.1, 100.2, 100.3, 100.4])  # scraped back to back (every 0.1 s)
    latest._newest = Rendered(b"", began=99.5, ended=100.0, cpu=0.25, size=0)
    assert latest._due(100.4) is None  # begun within a rendering plus refresh of the next GET: good enough for it
    latest._newest = Rendered(b"", began=98.9, ended=99.4, cpu=0.25, size=0)
    assert latest._due(100.4) == 98.9 + 1.0  # older: the next one, but at most one per refresh
    latest._newest = Rendered(b"", began=97.0, ended=99.6, cpu=1.0, size=0)
    assert latest._due(100.4) == 99.6 + 1.0  # and never sooner than the last one's CPU time after it ended
