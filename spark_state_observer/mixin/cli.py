"""The ``spark-state-observer mixin`` subcommands: ``export`` writes the dashboards, rules, their tests and
the deploy objects for a configuration; ``config`` prints the default configuration, documented."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(subparsers: Any) -> None:
    """Register ``mixin export`` and ``mixin config`` on the top-level command's subparsers."""
    mixin = subparsers.add_parser("mixin", help="export Grafana dashboards, Prometheus rules and deploy objects")
    sub = mixin.add_subparsers(dest="mixin_command", required=True)
    export = sub.add_parser("export", help="write dashboards, rules, promtool tests, Prometheus Operator and Grafana provisioning files")
    export.add_argument("--out", required=True, help="directory to write into (created if missing; files are overwritten)")
    export.add_argument("--config", default=None, help="YAML or JSON file overriding the defaults (see: mixin config)")
    export.add_argument(
        "--dashboard-schema",
        choices=("classic", "v2"),
        default="classic",
        help="classic dashboard JSON (default), or Grafana 13's v2 resources (dashboard.grafana.app/v2; needs the mixin extra)",
    )
    sub.add_parser("config", help="print the default configuration with every key documented (YAML)")
    mixin.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run a ``mixin`` subcommand; 2 with a message on stderr for a bad configuration or a missing extra."""
    from spark_state_observer.mixin.config import MixinConfigError, documented_defaults, load_config

    if args.mixin_command == "config":
        sys.stdout.write(documented_defaults())
        return 0
    from spark_state_observer.mixin.export import MixinExportError, artefacts, write

    try:
        config = load_config(args.config)
        files = artefacts(config, args.dashboard_schema)
    except (MixinConfigError, MixinExportError) as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    if not config.runbook_base_url:
        print(
            "spark-state-observer: warning: runbook_base_url is unset: each alert's runbook_url is relative (runbook.md#...), "
            "which Alertmanager cannot open; set it to your state browser's runbook page (https://HOST/runbook) or your copy "
            "of alerts/runbook.md",
            file=sys.stderr,
        )
    try:
        written = write(args.out, files)
    except OSError as exc:
        print(f"spark-state-observer: cannot write to {args.out}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} files under {args.out}")
    return 0
