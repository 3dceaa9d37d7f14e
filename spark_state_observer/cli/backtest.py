"""``spark-state-observer backtest``: which of the alerts would have fired on past event logs, when, for how long."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

from spark_state_observer.offline.backtest.settings import (
    DEFAULT_EVAL_INTERVAL,
    DEFAULT_IDLE_KEEP,
    DEFAULT_MAX_SCRAPES,
    DEFAULT_SCRAPE_INTERVAL,
)


def add_parser(sub: Any) -> None:
    bt = sub.add_parser("backtest", help="replay event logs through the alert rules with a real Prometheus: what would have fired, when")
    bt.add_argument("paths", nargs="+", help="event log files or eventlog_v2_* folders, paths or URLs (s3://, gs://, abfs://, hdfs://)")
    bt.add_argument("--config", default=None, help="mixin configuration (YAML/JSON, see `mixin config`) the rules are generated from")
    bt.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a mixin configuration key, e.g. thresholds.restore_seconds=120 (repeatable)",
    )
    bt.add_argument("--rules", action="append", default=[], help="Prometheus rule file to use instead of the mixin's (repeatable)")
    bt.add_argument(
        "--format",
        choices=("table", "history", "json", "html"),
        default="table",
        help="history: each alert's fire, resolve and re-fire with the application the query ran in",
    )
    bt.add_argument("--out", default=None, help="write the report here instead of standard output")
    bt.add_argument("--scrape-interval", type=float, default=DEFAULT_SCRAPE_INTERVAL, help="seconds between simulated scrapes")
    bt.add_argument("--eval-interval", type=float, default=DEFAULT_EVAL_INTERVAL, help="seconds between rule evaluations")
    bt.add_argument("--tail", type=float, default=0.0, help="keep scraping this many seconds after the last event")
    bt.add_argument(
        "--idle-keep",
        type=float,
        default=DEFAULT_IDLE_KEEP,
        help="stop scraping this many seconds after an event when the next one is further away (idle gaps are compressed)",
    )
    bt.add_argument(
        "--max-scrapes",
        type=int,
        default=DEFAULT_MAX_SCRAPES,
        help="at most this many simulated scrapes (the report says where it stopped)",
    )
    bt.add_argument("--prometheus", default=None, help="prometheus binary (default: from PATH)")
    bt.add_argument("--promtool", default=None, help="promtool binary (default: from PATH)")
    bt.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from spark_state_observer.capture.storage import StorageError, staged_all
    from spark_state_observer.mixin.config import MixinConfigError, load_config
    from spark_state_observer.mixin.rules import rule_files
    from spark_state_observer.offline.backtest import BacktestError, render, run_backtest
    from spark_state_observer.offline.backtest.recording import target_labels
    from spark_state_observer.offline.eventlog import EventLogError
    from spark_state_observer.offline.prometheus_server import PrometheusError

    with tempfile.TemporaryDirectory(prefix="sso-backtest-rules-") as tmp:
        rules = list(args.rules)
        scrape_labels = None  # the rules are the caller's: scraped as job="spark_state_observer"
        if not rules:
            try:
                config = load_config(args.config, args.overrides)
                scrape_labels = target_labels(config)  # scraped as the configuration's selectors select
            except MixinConfigError as exc:
                print(f"spark-state-observer: {exc}", file=sys.stderr)
                return 2
            for name, text in rule_files(config).items():
                path = os.path.join(tmp, name)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
                rules.append(path)
        elif args.config or args.overrides:
            print("spark-state-observer: --rules replaces the mixin's rules; --config and --set would be ignored", file=sys.stderr)
            return 2
        try:
            notes: list[str] = []
            with staged_all(args.paths, notes) as (paths, original):  # URLs are read from a local copy
                for note in notes:
                    print(f"warning: {note}", file=sys.stderr)
                try:
                    report = run_backtest(
                        paths,
                        rules,
                        scrape_interval=args.scrape_interval,
                        eval_interval=args.eval_interval,
                        tail_seconds=args.tail,
                        max_scrapes=args.max_scrapes,
                        idle_keep=args.idle_keep,
                        prometheus=args.prometheus,
                        promtool_binary=args.promtool,
                        scrape_labels=scrape_labels,
                    )
                except (BacktestError, PrometheusError, EventLogError) as exc:
                    print(f"spark-state-observer: {original(str(exc))}", file=sys.stderr)
                    return 2
        except StorageError as exc:
            print(f"spark-state-observer: {exc}", file=sys.stderr)
            return 2
    text = render(report, args.format)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        print(text)
    return 0
