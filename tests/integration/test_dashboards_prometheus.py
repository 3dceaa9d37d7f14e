"""Every dashboard panel's query returns data from a real Prometheus scraping a replay."""

from __future__ import annotations

import glob
import json
import os
import time

from test_dashboards import (
    DASHBOARD_FILES,
    DASHBOARD_SCHEMAS,
    RECORDING_RULES,
    annotation_expressions,
    load,
    panel_queries,
    rendered,
    v2_annotation_expressions,
)

from conftest import FIXTURES, Server, fixture_runs, free_port, need, progress_lines, prom_query
from spark_state_observer.mixin.config import MixinConfig

# static identity labels given at scrape time, as docs/deploy.md shows for observers that do not set them
STATIC_LABELS = {"cluster": "test-cluster", "namespace": "test-namespace"}


# Panels whose data the recorded fixtures cannot contain: these queries must still be valid PromQL.
RESTORE_GAUGES = (
    "a running restore's gauges live from its job's start to its last partition, and the placement run's log is fed "
    "whole before a scrape (tests/unit/test_restore_progress.py follows them line by line)"
)
NO_DATA_IN_FIXTURES = {
    (
        "overview.json",
        "Input vs processing rate",
    ): "every recorded query has ended, and the pace panel draws running queries only (test_dashboards_fleet_prometheus.py has one)",
    (
        "restore.json",
        "Executors and executor changes",
    ): "recorded in local mode: no executors come or go, and the count is polled live from the JVM",
    (
        "state-store.json",
        "Implausible RocksDB memory reports",
    ): "the counter starts with its first implausible report, and these recordings have none (tests/unit/test_capacity_live.py has one)",
    ("restore.json", "Partitions left to restore"): RESTORE_GAUGES,
    ("restore.json", "Restore elapsed and ETA"): RESTORE_GAUGES,
}


# --- every query against a real Prometheus --------------------------------------------------------------
def recorded_event_groups() -> list[list]:
    """The recorded event logs as CapturedEvents, one list per recorded job (runs of a job in order)."""
    from spark_state_observer.capture.queue import CapturedEvent
    from spark_state_observer.offline.eventlog import EventLogError, read_records

    groups = []
    # the top-level jobs and the real-time-mode recordings (their panels read only real-time series)
    jobs = sorted(glob.glob(os.path.join(FIXTURES, "*"))) + [os.path.join(FIXTURES, "realtime", "restart")]
    for job in jobs:
        logs = sorted(glob.glob(os.path.join(job, "run*", "eventlog")))
        events = []
        for item in read_records(logs):
            assert not isinstance(item, EventLogError), item
            if not item.kind.startswith("executor_"):
                events.append(CapturedEvent(item.kind, item.payload, item.timestamp or time.time(), 0.0))
        groups.append(events)
    assert len(groups) >= 4
    return groups


def placement_events() -> tuple[list, object]:
    """The placement fixture's kill run: its streaming events, and a placement source fed every task event of it.

    The source hands each progress event only its own batch (``EventLogSource.take``), so feeding it the
    whole log first gives the worker the same batches, batch by batch, as replay does.
    """
    from spark_state_observer.capture.queue import CapturedEvent
    from spark_state_observer.offline.eventlog import EventLogError, read_records
    from spark_state_observer.placement.task_log import EventLogSource

    source = EventLogSource()
    events = []
    for item in read_records([os.path.join(FIXTURES, "placement", "kill", "eventlog")], tap=source.feed_line):
        assert not isinstance(item, EventLogError), item
        if not item.kind.startswith("executor_"):
            events.append(CapturedEvent(item.kind, item.payload, item.timestamp or time.time(), 0.0))
    return events, source


def start_prometheus_with_rules(tmp: str, target: str, rule_files: list[str]) -> Server:
    binary = need("prometheus")
    port = free_port()
    config = os.path.join(tmp, "prometheus.yml")
    with open(config, "w") as f:
        f.write(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files: {json.dumps(rule_files)}\n"
            f"scrape_configs:\n  - job_name: spark_state_observer\n    static_configs:\n      - targets: [{json.dumps(target)}]\n"
            f"        labels: {json.dumps(STATIC_LABELS)}\n"
        )
    return Server(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={os.path.join(tmp, 'data')}", f"--web.listen-address=127.0.0.1:{port}"],
        f"http://127.0.0.1:{port}/-/ready",
    )


def wait_for_scrapes(prom: Server, progress_events: int) -> None:
    """Until Prometheus has scraped the observer after it processed ``progress_events``, then two more scrapes."""
    deadline = time.monotonic() + 30
    expr = 'spark_state_observer_events_received_total{kind="progress"}'
    while True:
        result = prom_query(prom, expr)
        if result and float(result[0]["value"][1]) == progress_events:
            break
        assert time.monotonic() < deadline, f"Prometheus never saw {progress_events} progress events: {result}"
        time.sleep(0.2)
    time.sleep(2.5)


def substitute(expr: str, query_names: str) -> str:
    for variable, value in (
        ("$__rate_interval", "1m"),
        ("$__interval", "15s"),
        ("$__range", "5m"),
        ("$cluster", STATIC_LABELS["cluster"]),
        ("$namespace", STATIC_LABELS["namespace"]),
        ("$app", ".*"),
        ("$query", query_names),
        ("$operator", ".*"),
        ("${datasource}", "prometheus"),
    ):
        expr = expr.replace(variable, value)
    return expr


def test_every_panel_query_returns_data_from_a_real_prometheus(tmp_path) -> None:
    from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
    from spark_state_observer.settings import Settings

    groups = recorded_event_groups()
    placement, source = placement_events()
    groups.append(placement)
    halves = [[e for g in groups for e in g[: len(g) // 2]], [e for g in groups for e in g[len(g) // 2 :]]]
    settings = Settings(http_port=0, growth_min_batches=3, state_rows_budget=1e7, state_memory_budget_bytes=1e10)
    obs = PrometheusObserver(settings)
    obs.set_placement(source)  # the placement row's series: the kill run, executor 1 SIGKILLed after batch 4
    obs.start()
    try:
        prom = start_prometheus_with_rules(str(tmp_path), f"127.0.0.1:{obs.http_port}", [RECORDING_RULES])
        try:
            fed = 0
            for half in halves:  # counters must change between scrapes for rate() to have two samples
                for event in half:
                    obs.submit(event)
                assert obs.flush()
                fed += sum(1 for e in half if e.kind == "progress")
                wait_for_scrapes(prom, fed)
            info = prom_query(prom, "spark_streaming_query_info")
            names = sorted({r["metric"]["query"] for r in info})
            assert all(r["metric"]["cluster"] == STATIC_LABELS["cluster"] for r in info), "the panels filter by the static labels"
            recorded = {p["name"] for run in fixture_runs() for p in progress_lines(run)} | {
                e.payload["name"] for g in groups for e in g if e.kind == "progress"
            }
            assert names == sorted(recorded)  # every recorded query
            empty, checked = [], dict.fromkeys(DASHBOARD_SCHEMAS, 0)
            for schema in DASHBOARD_SCHEMAS:  # the classic files and the v2 resources, against the same Prometheus
                for name in DASHBOARD_FILES:
                    for title, ref, expr in panel_queries(name, schema):
                        result = prom_query(prom, substitute(expr, "|".join(names)))  # asserts status success
                        checked[schema] += 1
                        if not result and (name, title) not in NO_DATA_IN_FIXTURES:
                            empty.append(f"{schema} {name} / {title} / {ref}: {expr}")
                    marks = (
                        annotation_expressions(load(name))
                        if schema == "classic"
                        else v2_annotation_expressions(rendered(MixinConfig(), "v2")[name])
                    )
                    for expr in marks:  # a mark only where a run starts: valid is enough
                        prom_query(prom, substitute(expr, "|".join(names)))
            assert checked["classic"] > 60 and checked["v2"] == checked["classic"]
            assert empty == [], "panel queries without data:\n" + "\n".join(empty)
        finally:
            prom.stop()
    finally:
        obs.stop()
