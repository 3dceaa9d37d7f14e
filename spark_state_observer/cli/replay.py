"""``spark-state-observer replay``: Spark event logs or progress JSON lines through the observer, offline."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from spark_state_observer.offline.eventlog import DEFAULT_MAX_LINE_BYTES


def add_parser(sub: Any) -> None:
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
    rep.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
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
