"""Alert backtest: which of the shipped alerts would have fired on a past run, when, and for how long.

Prometheus rule unit tests run on hand-written series; this runs the real rules over real history:

1. The event logs are replayed through the observer as if it had been running then (a simulated clock,
   so time-driven signals such as stalls are derived at the ticks a live worker would have made), and
   the exposition is taken at every ``scrape_interval`` of the original timeline: the series Prometheus
   would have scraped, at their original timestamps (written as OpenMetrics).
2. ``promtool tsdb create-blocks-from openmetrics`` turns them into TSDB blocks, served by a real
   Prometheus on loopback.
3. Recording rules are backfilled first with ``promtool tsdb create-blocks-from rules``, one dependency
   level at a time (a rule that reads another recorded series waits until that series exists).
4. Every alerting rule's expression is evaluated with a range query at ``eval_interval``; an alert is
   pending from the first evaluation its expression returns a series and firing once it has been
   pending for its ``for`` (as Prometheus' rule manager does), resolved at the first evaluation without it.

Work is bounded whatever the logs' timeline: a log whose events lie far apart (two batches a year
apart) is not scraped through the idle time between them. Scraping stops ``idle_keep`` seconds after an
event (long enough for every shipped alert's window and ``for``) and resumes at the next event: the
skipped gaps are listed in the report, and no alert is evaluated inside them. At most ``max_scrapes``
scrapes are taken; the report says where the cap cut the period off.

What differs from a live server, by construction: scrapes follow the watcher's view (the endpoint is
scraped from the first to the last event of the logs, also while a job is down between runs); backfilled
series carry no staleness markers, so a series that stops is still seen for the 5-minute lookback instead
of vanishing at the next scrape (``promtool test rules`` has the same semantics for its ``_`` gaps,
which is what the tests compare against).
"""

from __future__ import annotations

from spark_state_observer.offline.backtest.formats import render
from spark_state_observer.offline.backtest.promtool_test import write_promtool_test
from spark_state_observer.offline.backtest.report import BacktestReport, Firing
from spark_state_observer.offline.backtest.rules import load_rules
from spark_state_observer.offline.backtest.run import run_backtest
from spark_state_observer.offline.backtest.settings import BacktestError
from spark_state_observer.offline.prometheus_server import PrometheusError

__all__ = ["BacktestError", "BacktestReport", "Firing", "PrometheusError", "load_rules", "render", "run_backtest", "write_promtool_test"]
