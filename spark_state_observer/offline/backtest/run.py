"""One backtest from event logs to report: record the series, load them into a real Prometheus, backfill
the recording rules, evaluate every alerting rule over each scraped stretch."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from spark_state_observer.offline.backtest.backfill import backfill_level
from spark_state_observer.offline.backtest.evaluation import evaluate_alert, query_steps, steps_between
from spark_state_observer.offline.backtest.history import query_runs
from spark_state_observer.offline.backtest.recording import record_series
from spark_state_observer.offline.backtest.report import BacktestReport
from spark_state_observer.offline.backtest.rules import dependency_levels, load_rules
from spark_state_observer.offline.backtest.settings import (
    DEFAULT_EVAL_INTERVAL,
    DEFAULT_IDLE_KEEP,
    DEFAULT_MAX_SCRAPES,
    DEFAULT_SCRAPE_INTERVAL,
    IDLE_KEEP_RANGE,
    INTERVAL_RANGE,
    MAX_SCRAPES_RANGE,
    TAIL_RANGE,
    check_setting,
)
from spark_state_observer.offline.eventlog import expand
from spark_state_observer.offline.log_identity import app_start
from spark_state_observer.offline.prometheus_server import PrometheusServer, promtool


def in_time_order(paths: list[str]) -> list[str]:
    """``paths`` ordered by the start of the application each records (those without a readable start last,
    in their given order).

    The replay scrapes forwards on the logs' own clock: a log handed over after a later one (restarts named
    so that they do not sort by time, logs of several jobs) would have its events behind the scrape clock,
    never scraped, and its alerts never evaluated.
    """

    def started(path: str) -> float:
        files = expand([path], [])
        start = app_start(files[0]) if files else None
        stamp = start.get("Timestamp") if start else None
        return float(stamp) if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else float("inf")

    return sorted(paths, key=started)


def run_backtest(
    paths: list[str],
    rule_files: list[str],
    *,
    scrape_interval: float = DEFAULT_SCRAPE_INTERVAL,
    eval_interval: float = DEFAULT_EVAL_INTERVAL,
    tail_seconds: float = 0.0,
    max_scrapes: int = DEFAULT_MAX_SCRAPES,
    idle_keep: float = DEFAULT_IDLE_KEEP,
    settings: Any = None,
    work_dir: str | None = None,
    prometheus: str | None = None,
    promtool_binary: str | None = None,
    scrape_labels: dict[str, str] | None = None,
) -> BacktestReport:
    """Replay ``paths``, load the series into a real Prometheus, evaluate ``rule_files`` over the period
    (``scrape_labels``: the labels every scraped series gets, ``recording.target_labels`` of the mixin
    configuration the rules come from; default job="spark_state_observer", instance="backtest")."""
    scrape_interval = check_setting("--scrape-interval", scrape_interval, INTERVAL_RANGE)
    eval_interval = check_setting("--eval-interval", eval_interval, INTERVAL_RANGE)
    tail_seconds = check_setting("--tail", tail_seconds, TAIL_RANGE)
    idle_keep = check_setting("--idle-keep", idle_keep, IDLE_KEEP_RANGE)
    max_scrapes = int(check_setting("--max-scrapes", max_scrapes, MAX_SCRAPES_RANGE))
    recording, alerting = load_rules(rule_files)
    paths = in_time_order(paths)
    own_dir = work_dir is None
    work = work_dir or tempfile.mkdtemp(prefix="sso-backtest-")
    os.makedirs(work, exist_ok=True)
    try:
        om_path = os.path.join(work, "series.om")
        recorder, signals, events, errors = record_series(
            paths,
            om_path,
            scrape_interval,
            tail_seconds,
            settings,
            max_scrapes=max_scrapes,
            idle_keep=idle_keep,
            scrape_labels=scrape_labels,
        )
        start, end = float(recorder.first or 0.0), float(recorder.last or 0.0)
        segments = [(a, b) for a, b in recorder.segments]
        data = os.path.join(work, "data")
        promtool(["tsdb", "create-blocks-from", "openmetrics", om_path, data], promtool_binary)
        report = BacktestReport(
            start,
            end,
            scrape_interval,
            eval_interval,
            list(rule_files),
            events,
            recorder.scrapes,
            signals=signals,
            errors=errors,
            gaps=list(recorder.gaps),
            capped_at=recorder.capped_at,
            max_scrapes=max_scrapes,
            runs=query_runs(paths),
        )
        server = PrometheusServer(data, work, prometheus).start()
        try:
            for n, level in enumerate(dependency_levels(recording)):
                server = backfill_level(server, level, n, segments, eval_interval, work, promtool_binary, prometheus)
            for seg_start, seg_end in segments:
                steps = steps_between(seg_start, seg_end, eval_interval)
                for rule in alerting:
                    matrix = query_steps(server, rule.expr, steps, eval_interval)
                    firings = evaluate_alert(rule, matrix, steps)
                    if seg_end != end:  # the data stops at a gap: what was active ends with it
                        for f in firings:
                            f.resolved_at = seg_end if f.resolved_at is None else f.resolved_at
                    report.firings.extend(firings)
        finally:
            server.stop()
        report.firings.sort(key=lambda f: (f.firing_at if f.firing_at is not None else f.pending_at, f.alert))
        return report
    finally:
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)
