"""``spark-state-observer backtest``: which shipped alerts would have fired on past event logs."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from observer.offline.backtest import DEFAULT_EVAL_INTERVAL, DEFAULT_SCRAPE_INTERVAL


def default_rule_files() -> list[str]:
    """The rules the project ships: the repository's ``alerts/`` next to the package, if present."""
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "alerts")
    return [p for p in (os.path.join(root, "recording.yml"), os.path.join(root, "rules.yml")) if os.path.exists(p)]


def add_parser(sub: Any) -> None:
    bt = sub.add_parser("backtest", help="replay event logs through the alert rules with a real Prometheus: what would have fired, when")
    bt.add_argument("paths", nargs="+", help="event log files or eventlog_v2_* folders")
    bt.add_argument("--rules", action="append", default=[], help="Prometheus rule file (repeatable; default: the shipped rules)")
    bt.add_argument("--format", choices=("table", "json", "html"), default="table")
    bt.add_argument("--out", default=None, help="write the report here instead of standard output")
    bt.add_argument("--scrape-interval", type=float, default=DEFAULT_SCRAPE_INTERVAL, help="seconds between simulated scrapes")
    bt.add_argument("--eval-interval", type=float, default=DEFAULT_EVAL_INTERVAL, help="seconds between rule evaluations")
    bt.add_argument("--tail", type=float, default=0.0, help="keep scraping this many seconds after the last event")
    bt.add_argument("--prometheus", default=None, help="prometheus binary (default: from PATH)")
    bt.add_argument("--promtool", default=None, help="promtool binary (default: from PATH)")


def run(args: argparse.Namespace) -> int:
    from observer.offline.backtest import BacktestError, render, run_backtest
    from observer.offline.eventlog import EventLogError
    from observer.offline.prometheus_server import PrometheusError

    rules = args.rules or default_rule_files()
    if not rules:
        print("spark-state-observer: no rule files: pass --rules FILE", file=sys.stderr)
        return 2
    try:
        report = run_backtest(args.paths, rules, scrape_interval=args.scrape_interval, eval_interval=args.eval_interval,
                              tail_seconds=args.tail, prometheus=args.prometheus, promtool_binary=args.promtool)
    except (BacktestError, PrometheusError, EventLogError) as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    text = render(report, args.format)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        print(text)
    return 0
