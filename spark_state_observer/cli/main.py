"""The ``spark-state-observer`` command: demo, replay, inspect, watch, run (zero-code attach), state browser, metrics reference."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import signal
import sys
from typing import Any

from spark_state_observer.mixin import cli as mixin_cli
from spark_state_observer.offline.eventlog import DEFAULT_MAX_LINE_BYTES

# commands that serve clients until stopped: they keep Python's SIGPIPE handling (ignored, so a client that
# hangs up mid-response is an error on that connection), where a short command dies quietly of a closed pipe
SERVING_COMMANDS = frozenset({"watch", "demo", "ui", "mcp"})


def build_parser() -> argparse.ArgumentParser:
    """The command line: every subcommand and its options (the hostile corpus enumerates the subcommands from it)."""
    parser = argparse.ArgumentParser(prog="spark-state-observer", description="Observe the state of Spark Structured Streaming jobs.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run a local stateful pipeline with the observer attached")
    demo.add_argument("--provider", choices=("rocksdb", "hdfs"), default="rocksdb")
    demo.add_argument(
        "--source",
        choices=("rate", "kafka"),
        default="rate",
        help="rate: Spark's rate source; kafka: a local Kafka broker and producer (needs `bash scripts/fetch_kafka.sh`)",
    )
    demo.add_argument("--rows-per-second", type=int, default=50)
    demo.add_argument("--duration", type=float, default=None, help="seconds to run (default: until Ctrl-C)")
    demo.add_argument("--port", type=int, default=None, help="metrics port (default: setting http_port, 9108)")
    demo.add_argument("--host", default=None, help="metrics bind address (default: 127.0.0.1)")
    demo.add_argument("--checkpoint", default=None, help="checkpoint folder (default: a new temporary one)")
    demo.add_argument(
        "--ui",
        nargs="?",
        type=int,
        const=8501,
        default=None,
        metavar="PORT",
        help="also serve the state browser over the demo's history (default port 8501)",
    )
    demo.add_argument("--otlp-endpoint", default=None, help="also export over OTLP to this collector, e.g. http://127.0.0.1:4318")
    demo.add_argument("--otlp-protocol", choices=("http/protobuf", "grpc"), default=None, help="OTLP protocol (default: http/protobuf)")

    rep = sub.add_parser("replay", help="replay Spark event logs or progress JSON lines through the observer")
    rep.add_argument(
        "paths", nargs="+", help="event log files, eventlog_v2_* folders, or .jsonl files: paths or URLs (s3://, gs://, abfs://, hdfs://)"
    )
    rep.add_argument(
        "--format",
        choices=("summary", "prometheus", "signals", "events"),
        default="summary",
        help="summary; prometheus (the exposition at the end); signals (one line each, for people); "
        "events (one JSON object per signal and line, for tools)",
    )
    rep.add_argument("--max-line-bytes", type=int, default=DEFAULT_MAX_LINE_BYTES)
    rep.add_argument("--history", default=None, help="also write the events and signals to this history database")

    ins = sub.add_parser("inspect", help="inspect a checkpoint: offsets, commits, state files, restore estimate")
    ins.add_argument("checkpoint", help="checkpoint folder: a path or a URL (s3://, s3a://, gs://, abfs://, hdfs://), read-only")
    ins.add_argument("--json", action="store_true", help="print the report as JSON")
    ins.add_argument(
        "--verify-checksums",
        action="store_true",
        help="verify the checksum files Spark writes beside state files (4.1+, checkpoint format v2); reads every state file; exit 1 on a mismatch or when a file could not be verified",
    )
    ins.add_argument(
        "--history", default=None, help="history database to take observed restore rates, per-partition sizes and Kafka read rates from"
    )
    ins.add_argument(
        "--restore-target",
        type=float,
        default=60.0,
        help="with --history: restore time (seconds) the partition advice aims at (default 60)",
    )
    ins.add_argument(
        "--spark-version",
        default=None,
        help="with --history: the job's Spark version, for what the advice can offer (4.2+ repartitions state)",
    )
    ins.add_argument(
        "--kafka-bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="read the Kafka backlog of the checkpoint's sources from this broker (read-only) and forecast the catch-up",
    )
    ins.add_argument(
        "--disk-budget",
        default=None,
        metavar="SIZE",
        help="with --history: forecast when the state's footprint reaches this size (bytes, or 50g, 512m) at its recorded growth",
    )
    ins.add_argument("--rate", type=float, default=None, help="records per second the query reads while behind (default: from --history)")
    ins.add_argument(
        "--kafka-sample-seconds", type=float, default=5.0, help="seconds between two reads of the latest offsets (the produce rate)"
    )
    ins.add_argument(
        "--kafka-timeout", type=float, default=15.0, help="seconds to wait for the broker's answer before giving up (0.1 to 600)"
    )

    ui = sub.add_parser("ui", help="serve the state browser (Streamlit) over a history and checkpoints")
    ui.add_argument("--history", default=None, help="history database (default: setting history_path)")
    ui.add_argument("--checkpoint-root", action="append", default=[], help="folder whose checkpoints may be opened (repeatable)")
    ui.add_argument(
        "--runbook-url", default=None, help="base URL of alerts/runbook.md for the verdicts' links (default: the one this browser serves)"
    )
    ui.add_argument("--port", type=int, default=8501)
    ui.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")

    demo.add_argument(
        "--watch", action="store_true", help="run two small applications writing event logs and the event-log watcher following both"
    )

    from spark_state_observer.cli import backtest, mcp, retire, run, size, watch

    backtest.add_parser(sub)
    size.add_parser(sub)
    watch.add_parser(sub)
    run.add_parser(sub)
    retire.add_parser(sub)
    mcp.add_parser(sub)

    sub.add_parser("metrics", help="print the metric reference (Markdown)")
    sub.add_parser("settings", help="print the settings reference (Markdown)")
    mixin_cli.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from spark_state_observer.cli import backtest, mcp, retire, run, size, watch

    args = build_parser().parse_args(argv)
    if hasattr(signal, "SIGPIPE") and argv is None and args.command not in SERVING_COMMANDS:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `replay ... | head` ends quietly, as other command-line tools do
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if args.command == "demo" and args.watch:
        from spark_state_observer.cli import demo_watch

        return demo_watch.run(args)
    if args.command == "demo":
        return _demo(args)
    if args.command == "watch":
        return watch.run(args)
    if args.command == "run":
        return run.run(args)
    if args.command == "replay":
        return _replay(args)
    if args.command == "inspect":
        return _inspect(args)
    if args.command == "ui":
        return _ui(args)
    if args.command == "backtest":
        return backtest.run(args)
    if args.command == "size":
        return size.run(args)
    if args.command == "retire":
        return retire.run(args)
    if args.command == "mcp":
        return mcp.run(args)
    if args.command == "mixin":
        return mixin_cli.run(args)
    if args.command == "metrics":
        from spark_state_observer.metrics.catalog import reference_table

        print(reference_table())
        return 0
    from spark_state_observer.settings import settings_table

    print(settings_table())
    return 0


def _demo(args: argparse.Namespace) -> int:
    from spark_state_observer.cli.demo import run_demo
    from spark_state_observer.exporters.http import ExporterError

    options = (
        ("http_port", args.port),
        ("http_host", args.host),
        ("otlp_endpoint", args.otlp_endpoint),
        ("otlp_protocol", args.otlp_protocol),
    )
    overrides = {k: v for k, v in options if v is not None}
    try:
        if args.source == "kafka":
            from spark_state_observer.cli.kafka_demo import missing_parts, run_kafka_demo

            missing = missing_parts()
            if missing is not None:
                print(f"spark-state-observer: the Kafka demo needs a local broker and Spark's Kafka connector: {missing}", file=sys.stderr)
                return 2
            run_kafka_demo(args.rows_per_second, args.duration, args.checkpoint, **overrides)
        else:
            run_demo(args.provider, args.rows_per_second, args.duration, args.checkpoint, ui_port=args.ui, **overrides)
    except ExporterError as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    return 0


def _replay(args: argparse.Namespace) -> int:
    from spark_state_observer.capture.storage import StorageError, staged_all
    from spark_state_observer.model.signal_kinds import QUERY_IDLE, QUERY_STARTED, SignalEvent
    from spark_state_observer.offline.eventlog import EventLogError
    from spark_state_observer.offline.replay import replay, terminal_progress

    def print_event(event: SignalEvent) -> None:
        print(json.dumps(event.to_json(), default=str), flush=False)

    on_signal = print_event if args.format == "events" else None
    notes: list[str] = []
    try:
        with staged_all(args.paths, notes) as (paths, original):  # URLs are read from a local copy; messages name the URLs
            for note in notes:
                print(f"warning: {note}", file=sys.stderr)
            try:
                result = replay(
                    paths, max_line_bytes=args.max_line_bytes, progress=terminal_progress(), history=args.history, on_signal=on_signal
                )
            except EventLogError as exc:
                print(f"spark-state-observer: {original(str(exc))}", file=sys.stderr)
                return 2
            result.errors = [original(e) for e in result.errors]
    except StorageError as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    for error in result.errors[:20]:
        print(f"warning: {error}", file=sys.stderr)
    lost = result.observer.self_metrics.dropped.get("history", 0)
    if lost:
        print(f"warning: {lost} events were not written to the history (see the messages above)", file=sys.stderr)
    if len(result.errors) > 20:
        print(f"warning: ... and {len(result.errors) - 20} more problems", file=sys.stderr)
    if args.format == "events":
        pass  # printed as they were derived
    elif args.format == "prometheus":
        sys.stdout.write(result.exposition())
    elif args.format == "signals":
        for event in result.observer.signals.recent:
            print(event.describe())
    else:
        records = result.observer.tracker.snapshot()
        print(f"{result.events} events, {len(records)} queries, {len(result.errors)} problems")
        for r in records:
            p = r.last_progress
            ops = ", ".join(f"{o.name}={o.rows_total:.0f} rows" for o in p.operators if o.rows_total is not None) if p else ""
            print(f"  {r.label}: status {r.status}, runs {max(r.starts, 1)}, last batch {p.batch_id if p else '-'}; {ops}")
        for event in result.observer.signals.recent:
            if event.kind not in (QUERY_STARTED, QUERY_IDLE):
                print(f"  signal: {event.describe()}")
    if result.history_rows_dropped:
        print(f"spark-state-observer: the history is incomplete: {result.history_rows_dropped} rows were not written", file=sys.stderr)
        return 3
    return 1 if result.events == 0 and result.errors else 0


def _ui(args: argparse.Namespace) -> int:
    """Become ``streamlit run`` on the browser app (exec: the pid stays the same, so stopping it stops the server)."""
    import importlib.util
    import os

    from spark_state_observer.settings import Settings

    if importlib.util.find_spec("streamlit") is None:
        print("spark-state-observer: the state browser is not installed (pip install 'spark-state-observer[ui]')", file=sys.stderr)
        return 2
    from spark_state_observer.browser import APP_PATH
    from spark_state_observer.history.url import secrets_of

    history = args.history or Settings.from_env().history_path
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        APP_PATH,
        "--server.headless",
        "true",
        "--server.address",
        args.host,
        "--server.port",
        str(args.port),
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "viewer",
        "--server.enableStaticServing",  # the runbook file at /app/static/runbook.md, for links written before /runbook
        "true",
        "--",
    ]
    if secrets_of(history):  # a password in the URL goes through the environment, not the process list
        os.environ["SPARK_STATE_OBSERVER_UI_HISTORY"] = history
    else:
        command += ["--history", history]
    for root in args.checkpoint_root:
        command += ["--checkpoint-root", root]
    if args.runbook_url:
        command += ["--runbook-url", args.runbook_url]
    sys.stdout.flush()
    os.execv(sys.executable, command)


def _inspect(args: argparse.Namespace) -> int:
    from spark_state_observer.capture.storage import StorageError, redact
    from spark_state_observer.history.store import HistoryError
    from spark_state_observer.offline.checkpoint import inspect_checkpoint, verify_checksums
    from spark_state_observer.offline.checkpoint.advice import placement_advice, render_advice
    from spark_state_observer.offline.checkpoint.render import printable, render_text
    from spark_state_observer.offline.checkpoint.report import CheckpointError
    from spark_state_observer.offline.checkpoint.restore import rates_from_history
    from spark_state_observer.offline.checkpoint.store_layout import StageCost, staged_checkpoint

    advice = None
    cost = StageCost()
    try:
        with staged_checkpoint(args.checkpoint, cost) as local:  # in an object store: sizes listed, few bytes read
            report = inspect_checkpoint(local)
            rates = None
            if args.history and report.query_id:
                rates = rates_from_history(args.history, report.query_id)
                if rates:
                    report = inspect_checkpoint(local, rates)
            if args.verify_checksums:
                report.checksums = verify_checksums(local)
            if local != args.checkpoint:
                shown = redact(args.checkpoint)
                report = dataclasses.replace(report, path=shown, problems=[p.replace(local, shown) for p in report.problems])
                if report.checksums is not None:
                    for found in (report.checksums.mismatches, report.checksums.unreadable):
                        found[:] = [p.replace(local, shown) for p in found]
        if args.history:
            advice = placement_advice(report, args.history, args.restore_target, args.spark_version, rates)
        kafka = _kafka_catch_up(args, report) if args.kafka_bootstrap else None
        disk = _disk_forecast(args, report) if args.disk_budget else None
    except (CheckpointError, HistoryError, StorageError) as exc:
        print(f"spark-state-observer: {printable(str(exc))}", file=sys.stderr)
        return 2
    except Exception as exc:  # the scan reports what it cannot read as problems; this is its own bug, said in one line
        print(
            f"spark-state-observer: cannot inspect {printable(redact(args.checkpoint))}: {type(exc).__name__}: {printable(str(exc))}",
            file=sys.stderr,
        )
        return 2
    finally:
        for note in cost.skipped:
            print(f"warning: {printable(note)}", file=sys.stderr)
        if cost.skipped_count > len(cost.skipped):
            print(f"warning: ... and {cost.skipped_count - len(cost.skipped)} more objects not read", file=sys.stderr)
    if args.json:
        document = json.loads(report.to_json())
        if advice is not None:
            document["placement_advice"] = [dataclasses.asdict(a) for a in advice]
        if kafka is not None:
            document["kafka"] = kafka.to_dict()
        if disk is not None:
            document["disk_forecast"] = dataclasses.asdict(disk)
        print(json.dumps(document, indent=2, default=str))
    else:
        print(render_text(report) + ("\n" + render_advice(advice) if advice is not None else ""))
        if kafka is not None:
            from spark_state_observer.offline.checkpoint import kafka as kafka_backlog

            print(kafka_backlog.render_text(kafka))
        if disk is not None:
            growth = f"{disk.growth_bytes_per_hour:.0f} B/h" if disk.growth_bytes_per_hour is not None else "unknown"
            print(
                f"disk: footprint {disk.footprint_bytes} B of a {disk.budget_bytes} B budget, growth {growth} ({disk.batches} batches): {disk.message}"
            )
    if report.checksums is not None and not report.checksums.mismatches and not report.checksums.complete:
        print(f"spark-state-observer: {report.checksums.unreadable_count} checksum file(s) could not be verified", file=sys.stderr)
    return 1 if report.checksums is not None and (report.checksums.mismatches or not report.checksums.complete) else 0


def _disk_forecast(args: argparse.Namespace, report: Any) -> Any:
    """When the footprint reaches ``--disk-budget`` (``spark_state_observer.offline.checkpoint.footprint``); needs ``--history``."""
    from spark_state_observer.model.capacity import parse_size
    from spark_state_observer.offline.checkpoint.footprint import disk_forecast
    from spark_state_observer.offline.checkpoint.report import CheckpointError

    budget = parse_size(args.disk_budget, 1)
    if budget is None or budget <= 0:
        raise CheckpointError(f"--disk-budget {args.disk_budget!r} is not a size (bytes, or 50g, 512m)")
    if not args.history:
        raise CheckpointError("--disk-budget needs --history: the growth comes from the batches it recorded")
    return disk_forecast(report, args.history, budget)


def _kafka_catch_up(args: argparse.Namespace, report: Any) -> Any:
    """The inspector's Kafka section (``spark_state_observer.offline.checkpoint.kafka``), read rate from --rate or the history."""
    from spark_state_observer.offline.checkpoint import kafka as kafka_backlog
    from spark_state_observer.offline.checkpoint.report import CheckpointError

    rate, basis = args.rate, "--rate"
    if rate is None and args.history and report.query_id:
        rate, basis = kafka_backlog.read_rate_from_history(args.history, report.query_id)
    if not 0.1 <= args.kafka_timeout <= 600:  # also false for NaN
        raise CheckpointError(f"--kafka-timeout must be between 0.1 and 600 seconds, got {args.kafka_timeout}")
    return kafka_backlog.forecast(
        report, args.kafka_bootstrap, rate, basis, sample_seconds=args.kafka_sample_seconds, timeout=args.kafka_timeout
    )


if __name__ == "__main__":
    sys.exit(main())
