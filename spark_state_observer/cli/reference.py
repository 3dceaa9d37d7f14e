"""``spark-state-observer metrics`` and ``settings``: the two references, printed as Markdown."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    sub.add_parser("metrics", help="print the metric reference (Markdown)").set_defaults(run=metrics)
    sub.add_parser("settings", help="print the settings reference (Markdown)").set_defaults(run=settings)


def metrics(args: argparse.Namespace) -> int:
    from spark_state_observer.metrics.catalog import reference_table

    print(reference_table())
    return 0


def settings(args: argparse.Namespace) -> int:
    from spark_state_observer.settings import settings_table

    print(settings_table())
    return 0
