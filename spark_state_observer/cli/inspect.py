"""``spark-state-observer inspect``: a checkpoint's offsets, commits, state files and restore estimate, read-only."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any


def add_parser(sub: Any) -> None:
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
    ins.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
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
