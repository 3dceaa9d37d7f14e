"""Scale of the /metrics render: 100 queries x 4 operators, the per-partition cap at 2,000 partitions,
and a fleet (1,000 applications x 2 queries x 2 operators) scraped while events keep arriving.

    python bench/render_scale.py [--repeat 11]
    python bench/render_scale.py --fleet [--apps 1000] [--seconds 60] [--rate 200]

Workload derived from a recorded real progress (RocksDB, ~40 custom metrics per operator). For each
workload it prints the series count and exposition size, the traced memory of the observer's state
(and of the endpoint's per-query cache after a first scrape), then median times, in the same run, of:

- endpoint GET: a full HTTP GET of /metrics, gzip accepted as Prometheus asks, against the same
  endpoint ``PrometheusObserver.start()`` serves (``StateCollector.exposition``, cached per query), on 127.0.0.1;
- endpoint render: ``StateCollector.exposition()`` alone;
- generate_latest: prometheus-client over the registry (what the endpoint served before, and the
  Pushgateway too until both shared ``exposition()``), and its ratio to the endpoint's render.

"cold" is a scrape after every query received a new progress (nothing cached is valid), "warm" a
scrape after 1 query did. Events are applied between timed scrapes, untimed.

``--fleet``: one live observer (worker thread, endpoint on 127.0.0.1) holding ``apps`` x 2 queries of
2 operators, as one event-log watcher carrying a cluster would; a feeder thread submits progress events
at ``--rate`` per second to random queries while the main thread GETs /metrics (gzip) back to back for
``--seconds``, then renders and gzips in-process for a third of that, timing the scraping thread's CPU
seconds. Prints the series count, GET median (min-max), the events applied meanwhile, the scrape's CPU
cost, the process RSS before and after loading the queries (per query) and at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.parse
import urllib.request
from typing import Callable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from prometheus_client import generate_latest

from bench.common import derived, recorded_progress
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.exporters.http import MetricsServer
from spark_state_observer.exporters.latest import AGE_HEADER, Rendered
from spark_state_observer.offline.prometheus_server import PrometheusServer
from spark_state_observer.settings import Settings


class Workload:
    """An observer fed ``queries`` queries of ``operators`` operators; ``advance`` gives some a new batch."""

    def __init__(self, queries: int, operators: int, partitions: int = 0) -> None:
        self.base = recorded_progress()[-1]
        self.queries, self.operators, self.partitions = queries, operators, partitions
        self.batch = self.base["batchId"]
        self.obs = PrometheusObserver(Settings(http_enabled=False), serve=False, live=False)
        for _ in range(3):
            self.advance(queries)

    def advance(self, n: int) -> None:
        """The next batch's progress for the first ``n`` queries."""
        for q in range(n):
            p = derived(self.base, q, self.batch, self.operators)
            if self.partitions:
                custom = p["stateOperators"][0]["customMetrics"]
                for i in range(self.partitions):
                    custom[f"SnapshotLastUploaded.partition_{i}_default"] = self.batch - self.base["batchId"] + (i % 7)
            self.obs.process(CapturedEvent("progress", json.dumps(p), 0.0, 0.0))
        self.batch += 1


def timed(prepare: Callable[[], object], fn: Callable[[], object], repeat: int) -> float:
    """Median seconds of ``fn``, each run after an untimed ``prepare``."""
    times = []
    for _ in range(repeat):
        prepare()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def report(label: str, repeat: int, queries: int, operators: int, partitions: int = 0) -> None:
    tracemalloc.start()
    w = Workload(queries, operators, partitions)
    state = tracemalloc.get_traced_memory()[0]
    text = w.obs.prometheus.collector.exposition()
    cache = tracemalloc.get_traced_memory()[0] - state - len(text)
    tracemalloc.stop()
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    collector = w.obs.prometheus.collector
    server = MetricsServer(collector.exposition, w.obs.prometheus.registry, "127.0.0.1", 0, render_parts=collector.exposition_parts)
    request = urllib.request.Request(server.url, headers={"Accept-Encoding": "gzip"})
    try:

        def get() -> None:
            with urllib.request.urlopen(request, timeout=60) as response:
                response.read()

        print(
            f"\n{label}: {series:,} series, {len(text) / 1e6:.1f} MB exposition, "
            f"observer state {state / 1e6:.1f} MB, endpoint cache {cache / 1e6:.1f} MB",
            flush=True,
        )
        print("| scrape | endpoint GET (gzip) | endpoint render | generate_latest | generate_latest / endpoint render |")
        print("|---|---|---|---|---|")
        cases = [("cold (all queries changed)", queries, False), ("all changed, pre-rendered by the worker (live default)", queries, True)]
        cases += [("warm (1 query changed)", 1, False)] if queries > 1 else []
        for case, changed, prerendered in cases:

            def prepare(
                changed: int = changed, prerendered: bool = prerendered
            ) -> None:  # the previous timed scrape cached everything before these changes
                w.advance(changed)
                server.invalidate()  # the GET shows these changes (no rendering from before them is served)
                if prerendered:  # what the live worker does after each round of events, off the scrape path
                    w.obs.prometheus.collector.prerender()

            endpoint = timed(prepare, get, repeat)
            render = timed(prepare, w.obs.prometheus.collector.exposition, repeat)
            latest = timed(prepare, lambda: generate_latest(w.obs.prometheus.registry), repeat)
            print(
                f"| {case} | {endpoint * 1000:.0f} ms | {render * 1000:.0f} ms | {latest * 1000:.0f} ms | {latest / render:.1f}x |",
                flush=True,
            )
    finally:
        server.stop()


def _rss(field: str = "VmRSS") -> int:
    """``field`` of /proc/self/status in bytes (VmRSS now, VmHWM the peak)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def rss_bytes() -> int:
    """Resident set size of this process (Linux)."""
    return _rss()


def _span(values: list[float], scale: float = 1000.0) -> str:
    """``median (min-max)`` of ``values`` times ``scale``."""
    if not values:
        return "-"
    return f"{statistics.median(values) * scale:,.0f} ({min(values) * scale:,.0f}-{max(values) * scale:,.0f})"


FLEET_MODES = {
    "before": "rendered and gzipped in the request (the endpoint before issue 17 goal 3)",
    "after": "newest rendering, rendered ahead of the scrapes (spark_state_observer.exporters.latest)",
}


def _fleet_server(obs: PrometheusObserver, mode: str) -> MetricsServer:
    """A fresh endpoint over ``obs``: the one this change replaced ("before") or the live one ("after")."""
    collector = obs.prometheus.collector
    if mode == "before":  # every GET renders the whole text and gzips it in its request, as before
        server = MetricsServer(obs.exposition, obs.prometheus.registry, "127.0.0.1", 0)
        server.latest.ahead_after = math.inf
        return server
    return MetricsServer(obs.exposition, obs.prometheus.registry, "127.0.0.1", 0, render_parts=collector.exposition_parts)


def _recorded(server: MetricsServer, ages: list[float], served: list[float]) -> None:
    """Record each response's age header and the time the app took (the body is then written) on ``server``."""
    app = server._httpd.get_app()

    def recording(environ: dict, start_response: Callable) -> object:
        t = time.perf_counter()

        def recording_start(status: str, headers: list[tuple[str, str]], exc_info: object = None) -> object:
            ages.extend(float(v) for k, v in headers if k == AGE_HEADER)
            print(
                f"  {time.strftime('%H:%M:%S')} served on port {server.port} after {time.perf_counter() - t:.3f} s, age {ages[-1]:.3f} s",
                flush=True,
            )
            return start_response(status, headers, exc_info)

        body = app(environ, recording_start)
        served.append(time.perf_counter() - t)
        return body

    server._httpd.set_app(recording)


def _scrape_durations(prometheus_url: str, seconds: float) -> tuple[list[float], list[float]]:
    """Every ``scrape_duration_seconds`` and ``up`` sample of the last ``seconds``, from Prometheus itself."""
    out = []
    for metric in ("scrape_duration_seconds", "up"):
        query = urllib.parse.urlencode({"query": f'{metric}{{job="observer"}}[{int(seconds)}s]'})
        body = json.loads(urllib.request.urlopen(f"{prometheus_url}/api/v1/query?{query}", timeout=60).read())
        out.append([float(v) for series in body["data"]["result"] for _, v in series["values"]])
    return out[0], out[1]


def fleet(apps: int, seconds: float, rate: float, rounds: int, modes: list[str], prometheus: float, scrape_interval: float) -> None:
    """GET /metrics of a live observer holding ``apps`` x 2 queries while events keep arriving, per endpoint.

    The endpoints take turns (``rounds`` phases each, ``seconds`` in all per endpoint), each phase on a
    fresh server over the same observer, so all see the same state, load and event rate. Then, with
    ``prometheus`` seconds, a real Prometheus scrapes each endpoint in turn every ``scrape_interval``.
    """
    base = recorded_progress()[-1]
    queries = apps * 2
    marker = 987654321  # the batch id placeholder in each query's JSON text
    texts = []
    for q in range(queries):
        p = derived(base, q, marker)
        p["name"] = f"app{q // 2:04d}_query{q % 2}"
        texts.append(json.dumps(p, separators=(",", ":")))
    settings = Settings(http_host="127.0.0.1", http_port=0, max_queries=queries, history_enabled=False, poll_executors=False)
    rss_empty = rss_bytes()
    # serve=True: the worker pre-renders changed queries after each round, as a live observer does; its own
    # endpoint is never scraped here (each phase serves from a server of its own)
    obs = PrometheusObserver(settings, serve=True, live=True).start()
    batch = [0]

    def round_of(n: int) -> None:
        batch[0] += 1
        for q in random.sample(range(queries), n) if n < queries else range(queries):
            obs.submit(CapturedEvent("progress", texts[q].replace(f'"batchId":{marker}', f'"batchId":{batch[0]}'), time.time(), 0.0))

    keys = ("get", "age", "cpu", "wall", "rate", "rss", "p_duration", "p_up", "p_age", "p_served", "p_cpu", "p_rate")
    results: dict[str, dict[str, list[float]]] = {m: {k: [] for k in keys} for m in modes}

    def phase(mode: str, length: float, scraper: Callable[[MetricsServer, float], None], prefix: str = "") -> None:
        r = results[mode]
        server = _fleet_server(obs, mode)
        seen: dict[float, Rendered] = {}
        processed_before, started = obs._taken, time.monotonic()
        done = threading.Event()

        def watch() -> None:  # every rendering the endpoint made, whoever asked for it
            while not done.wait(0.05):
                newest = server.latest.newest
                if newest is not None:
                    seen[newest.began] = newest

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            scraper(server, started + length)
        finally:
            done.set()
            watcher.join()
            server.stop()
        r[prefix + "rate"].append((obs._taken - processed_before) / (time.monotonic() - started))
        r[prefix + "cpu"] += [x.cpu for x in seen.values()]
        if not prefix:
            r["wall"] += [x.wall for x in seen.values()]
            r["rss"].append(rss_bytes())

    def back_to_back(mode: str) -> Callable[[MetricsServer, float], None]:
        def scrape(server: MetricsServer, until: float) -> None:
            request = urllib.request.Request(server.url, headers={"Accept-Encoding": "gzip"})
            while time.monotonic() < until:
                t = time.perf_counter()
                with urllib.request.urlopen(request, timeout=120) as response:
                    response.read()
                    age = float(response.headers[AGE_HEADER])
                results[mode]["get"].append(time.perf_counter() - t)
                results[mode]["age"].append(age)

        return scrape

    def by_prometheus(mode: str) -> Callable[[MetricsServer, float], None]:
        def scrape(server: MetricsServer, until: float) -> None:
            r = results[mode]
            _recorded(server, r["p_age"], r["p_served"])
            with (
                tempfile.TemporaryDirectory() as tmp,
                PrometheusServer(
                    os.path.join(tmp, "data"), tmp, scrape_targets=(f"127.0.0.1:{server.port}",), scrape_interval=scrape_interval
                ) as prom,
            ):
                began = time.monotonic()
                time.sleep(max(0.0, until - began))
                durations, up = _scrape_durations(prom.url, time.monotonic() - began)
            r["p_duration"] += durations
            r["p_up"] += up

        return scrape

    try:
        for _ in range(3):
            round_of(queries)
            obs.flush(600)
        rss_loaded = rss_bytes()
        text = obs.exposition()
        series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
        size = len(text)
        del text
        stop = threading.Event()
        fed = [0]

        def feed() -> None:
            started = time.monotonic()
            while not stop.is_set():
                due = int((time.monotonic() - started) * rate) - fed[0]
                if due > 0:
                    round_of(min(due, queries))
                    fed[0] += min(due, queries)
                time.sleep(0.05)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        for _ in range(rounds):
            for mode in modes:
                phase(mode, seconds / rounds, back_to_back(mode))
        rss_scraped = rss_bytes()
        if prometheus:
            for mode in modes:
                phase(mode, prometheus, by_prometheus(mode), prefix="p_")
        stop.set()
        feeder.join()
    finally:
        obs.stop()
    print(
        f"\nfleet: {apps:,} applications x 2 queries x 2 operators = {queries:,} queries, {series:,} series, "
        f"{size / 1e6:.1f} MB exposition; events submitted at {rate:,.0f}/s; {rounds} phases of {seconds / rounds:.0f} s per endpoint, "
        f"taking turns, each GETting /metrics (gzip) back to back; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        "| endpoint | GET /metrics (gzip), ms | GETs | age of the served text, ms | CPU per rendering, ms | wall per rendering, ms |"
        " events processed/s per phase | RSS after each phase, MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for mode in modes:
        r = results[mode]
        print(
            f"| {mode}: {FLEET_MODES[mode]} | {_span(r['get'])} | {len(r['get'])} | {_span(r['age'])} | {_span(r['cpu'])} | "
            f"{_span(r['wall'])} | {', '.join(f'{x:,.0f}' for x in r['rate'])} | {', '.join(f'{x / 1e6:.0f}' for x in r['rss'])} |"
        )
    if len(modes) == 2 and seconds:
        before, after = (statistics.median(results[m]["get"]) for m in modes)
        print(f"GET median: {modes[1]} / {modes[0]} = {after / before:.3f}")
    if prometheus:
        print(f"\nA real Prometheus scraping each endpoint every {scrape_interval:g} s for {prometheus:.0f} s (events still arriving):")
        print(
            "| endpoint | scrape_duration_seconds, ms | scrapes (up=1) | endpoint's time per GET (body not yet written), ms |"
            " age of the served text, ms | renderings, CPU each, ms | events processed/s |"
        )
        print("|---|---|---|---|---|---|---|")
        for mode in modes:
            r = results[mode]
            print(
                f"| {mode} | {_span(r['p_duration'])} | {len(r['p_duration'])} ({int(sum(r['p_up']))}) | {_span(r['p_served'])} | "
                f"{_span(r['p_age'])} | {len(r['p_cpu'])}, {_span(r['p_cpu'])} | {', '.join(f'{x:,.0f}' for x in r['p_rate'])} |"
            )
    print(
        f"RSS: {rss_empty / 1e6:.0f} MB before the observer, {rss_loaded / 1e6:.0f} MB with {queries:,} queries "
        f"({(rss_loaded - rss_empty) / queries / 1e3:.0f} kB per query), {rss_scraped / 1e6:.0f} MB after the back-to-back scrapes, "
        f"{rss_bytes() / 1e6:.0f} MB at the end, peak {_rss('VmHWM') / 1e6:.0f} MB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=11, help="timed scrapes per cell (median reported)")
    parser.add_argument("--fleet", action="store_true", help="only the fleet case (see above)")
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=200.0, help="progress events per second submitted during the scrapes")
    parser.add_argument("--rounds", type=int, default=3, help="--fleet: phases per endpoint (they take turns)")
    parser.add_argument("--modes", default="before,after", help="--fleet: endpoints to measure (before, after; one per process for RSS)")
    parser.add_argument("--prometheus", type=float, default=0.0, help="--fleet: then seconds of a real Prometheus scraping each endpoint")
    parser.add_argument("--scrape-interval", type=float, default=10.0, help="--prometheus: its scrape interval, seconds")
    args = parser.parse_args()
    if args.fleet:
        modes = args.modes.split(",")
        unknown = set(modes) - set(FLEET_MODES)
        if unknown:
            parser.error(f"unknown --modes {', '.join(sorted(unknown))}: choose from {', '.join(FLEET_MODES)}")
        fleet(args.apps, args.seconds, args.rate, args.rounds, modes, args.prometheus, args.scrape_interval)
        return 0
    report("100 queries x 4 operators", args.repeat, 100, 4)
    report("1 query, 2,000 partitions (top-K 10)", args.repeat, 1, 2, 2000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
