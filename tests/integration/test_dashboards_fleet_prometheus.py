"""Every dashboard panel against a real Prometheus scraping the ``watch`` command over a fleet where names repeat.

The fleet, from recorded logs: ``orders`` ran a query, ended, and was redeployed under the same name with a
new checkpoint (the same query name, a new query id) while the first run is still within the watcher's
grace period; the new run is still running. ``payments`` restarted as a new application on the same
checkpoint (the same query id). Panels must show each query once, with its own values (the truth of the
recordings), and say 0 rather than nothing where the answer is none.
"""

from __future__ import annotations

import glob
import os
import time

import pytest
from test_dashboards import DASHBOARD_FILES, RECORDING_RULES, load, panels
from test_dashboards_prometheus import start_prometheus_with_rules, substitute
from test_fleet import Watch, _lines, _write, value, watches  # noqa: F401  (watches: the module's fixture)

from bench.eventlog_writer import ProgressiveLog, recorded_lines, renamed
from conftest import FIXTURES, progress_lines, prom_query

TERMINATED = b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryTerminatedEvent"'
APP_END = b'{"Event":"SparkListenerApplicationEnd"'


def _write_lines(folder: str, lines: list[bytes], name: str, app_id: str, finish: bool) -> None:
    log = ProgressiveLog(folder, app_id, "zstd", max_file_bytes=60_000)
    for _ in log.steps(renamed(lines, name, app_id)):
        pass
    if finish:
        log.finish()


def _write_running(folder: str, scenario: str, name: str, app_id: str) -> None:
    """A recorded log cut before its query terminated: the application is still running."""
    lines = _lines(scenario)
    cut = next(i for i, line in enumerate(lines) if line.startswith(TERMINATED) or line.startswith(APP_END))
    _write_lines(folder, lines[:cut], name, app_id, finish=False)


def _write_second_run(folder: str, scenario: str, name: str, app_id: str) -> None:
    """The recording's second run (a restart on the same checkpoint), as its own application."""
    (path,) = glob.glob(os.path.join(FIXTURES, scenario, "run2", "eventlog", "*", "events_*"))
    _write_lines(folder, recorded_lines(path), name, app_id, finish=True)


def _last(scenario: str, run: str = "run1") -> dict:
    return progress_lines(os.path.join(FIXTURES, scenario, run))[-1]


def _panel(name: str, title: str) -> dict:
    (panel,) = [p for p in panels(load(name)) if p["title"] == title]
    return panel


@pytest.mark.slow
def test_panels_count_each_query_once_and_say_zero_on_a_fleet_whose_names_repeat(tmp_path, watches: list[Watch]) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    watch = Watch(str(tmp_path), [str(logs)], "--grace-seconds", "3600")
    watches.append(watch)
    watch.wait("the watcher serving", lambda s: True)
    finished = "spark_state_observer_watch_applications"
    _write(str(logs), "rocksdb_plain_log", "orders", "app-orders-1")
    _write(str(logs), "rocksdb_restart", "payments", "app-payments-1")
    watch.wait("the first runs", lambda s: value(s, finished, status="finished") == 2)
    _write_running(str(logs), "hdfs", "orders", "app-orders-2")  # redeployed with a new checkpoint
    _write_second_run(str(logs), "rocksdb_restart", "payments", "app-payments-2")  # restarted on the same checkpoint
    expected_batches = len(progress_lines(os.path.join(FIXTURES, "hdfs", "run1")))
    watch.wait(
        "every application",
        lambda s: (
            value(s, finished, status="finished") == 3
            and value(s, "spark_streaming_batches_total", app="orders", query_id=_last("hdfs")["id"]) == expected_batches
        ),
    )
    prom = start_prometheus_with_rules(str(tmp_path), f"127.0.0.1:{watch.port}", [RECORDING_RULES])
    try:
        deadline = time.monotonic() + 30
        while not prom_query(prom, 'spark_streaming_query_info{app="payments"}'):
            assert time.monotonic() < deadline, "Prometheus never scraped the watcher"
            time.sleep(0.2)
        time.sleep(3)  # a few scrapes: rate() needs two samples
        names = "demo_dedup_window"
        results: dict[tuple[str, str, str], list[dict]] = {}
        for name in DASHBOARD_FILES:
            for p in panels(load(name)):
                for t in p["targets"]:
                    results[(name, p["title"], t["refId"])] = prom_query(prom, substitute(t["expr"], names))
    finally:
        prom.stop()

    # identity: every result that names a query names its id, so no panel adds two queries of one name
    merged = [f"{k}: {r['metric']}" for k, rs in results.items() for r in rs if "query" in r["metric"] and "query_id" not in r["metric"]]
    assert merged == [], "series aggregated over query ids:\n" + "\n".join(merged)

    # the pace of the running query is its own, not its ended namesake's added to it
    running, ended = _last("hdfs"), _last("rocksdb_plain_log")
    pace = results[("overview.json", "Input vs processing rate", "A")]
    orders = {r["metric"]["query_id"]: float(r["value"][1]) for r in pace if r["metric"]["app"] == "orders"}
    assert orders == {running["id"]: pytest.approx(running["inputRowsPerSecond"])}, (orders, ended["inputRowsPerSecond"])

    # state rows per query id and operator: each run's last report, the ended run's and the running one's
    rows = results[("overview.json", "State rows", "A")]
    for run in (running, ended, _last("rocksdb_restart", "run2")):
        for op in run["stateOperators"]:
            (found,) = [
                float(r["value"][1]) for r in rows if r["metric"]["query_id"] == run["id"] and r["metric"]["operator"] == op["operatorName"]
            ]
            assert found == op["numRowsTotal"], (run["id"], op["operatorName"])

    # counts: each query once; a state no query is in reads 0, not "No data"
    def stat(title: str) -> float:
        (result,) = results[("overview.json", title, "A")]
        return float(result["value"][1])

    assert stat("Active queries") == 1  # orders' running query; the ended runs terminated
    assert stat("Failed queries") == 0 and stat("Crash looping") == 0 and stat("Falling behind") == 0
    assert progress_lines(os.path.join(FIXTURES, "rocksdb_restart", "run2"))[0]["batchId"] > 0  # it resumed committed batches
    assert stat("Restarts") == 1  # payments' second application; orders' second run started a new checkpoint
    status = results[("overview.json", "Query status", "A")]
    assert sorted((r["metric"]["app"], r["metric"]["status"]) for r in status) == [
        ("orders", "active"),
        ("orders", "terminated"),
        ("payments", "terminated"),
    ]

    # no Kafka source in this fleet: the Kafka panels are empty and say so
    for (name, title, _), result in results.items():
        if not result:
            assert _panel(name, title)["fieldConfig"]["defaults"]["noValue"], f"{name} / {title} is empty without saying why"
    kafka = [k for k in results if k[1].startswith("Kafka lag") and k[2] == "A"]
    assert kafka and all(not results[k] and "Kafka" in _panel(k[0], k[1])["fieldConfig"]["defaults"]["noValue"] for k in kafka)
