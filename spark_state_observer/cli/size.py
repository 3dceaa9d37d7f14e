"""``spark-state-observer size``: how much RocksDB memory and disk a state needs per executor, before running it."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import Any, NoReturn

# the bounds of the numeric flags: Spark's own sensible counts (as ``read_conf`` takes them), a state far past
# any cluster's, and a row under Spark's 2 GiB limit; past them a figure is a typo, and the arithmetic overflows
MAX_COUNT = 1_000_000
MAX_ROWS = 10**15
MAX_BYTES_PER_ROW = float(2**31)


def _whole(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in ``low..high``, else a clear error (exit 2, never a traceback)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is outside {low:,}..{high:,}")
        return value

    return parse


def _bytes_per_row(text: str) -> float:
    """An argparse type: a finite number of bytes in ``0..MAX_BYTES_PER_ROW``."""
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    if not math.isfinite(value) or not 0 <= value <= MAX_BYTES_PER_ROW:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a finite number of bytes in 0..{MAX_BYTES_PER_ROW:,.0f}")
    return value


def _one_line_error(message: str) -> NoReturn:
    """A bad flag as one line and exit 2 (argparse would print the whole usage first)."""
    print(f"spark-state-observer size: {message}", file=sys.stderr)
    raise SystemExit(2)


def add_parser(sub: Any) -> None:
    size = sub.add_parser(
        "size",
        help="what-if: RocksDB state store instances, memory and disk per executor, and restore time, from a shape or a real application",
    )
    size.error = _one_line_error  # argparse would print its whole usage before the message
    size.add_argument(
        "--partitions",
        type=_whole(1, MAX_COUNT),
        default=None,
        help="state partitions (default: the application's, else spark.sql.shuffle.partitions)",
    )
    size.add_argument(
        "--operators", type=_whole(1, MAX_COUNT), default=None, help="stateful operators (default: the application's, else 1)"
    )
    size.add_argument(
        "--stores-per-operator",
        type=_whole(1, MAX_COUNT),
        default=None,
        help="stores each partition of an operator opens (a stream-stream join has 4)",
    )
    size.add_argument(
        "--executors",
        type=_whole(1, MAX_COUNT),
        default=None,
        help="executors the instances spread over (default: the application's, else 1)",
    )
    size.add_argument("--rows", type=_whole(0, MAX_ROWS), default=None, help="state rows over all partitions and operators")
    size.add_argument(
        "--bytes-per-row", type=_bytes_per_row, default=None, help="SST bytes per state row (default: the application's SST bytes / rows)"
    )
    size.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark configuration value, over the application's (repeatable)"
    )
    origin = size.add_mutually_exclusive_group()
    origin.add_argument(
        "--from-log", action="append", default=[], metavar="EVENTLOG", help="start from an application's event log (repeatable)"
    )
    origin.add_argument("--from-history", default=None, metavar="URL", help="start from a query in a history database (its newest batch)")
    size.add_argument("--query", default=None, help="with --from-history: the query id (default: the newest batch's query)")
    size.add_argument("--json", action="store_true", help="print the estimate as JSON")
    size.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from spark_state_observer.history.store import HistoryError
    from spark_state_observer.model.capacity import PROVIDER_CONF, ROCKSDB_PROVIDER, estimate, read_conf
    from spark_state_observer.offline import size_advice, sizing
    from spark_state_observer.offline.eventlog import EventLogError

    if args.query is not None and not args.from_history:
        return _one_line_error("--query needs --from-history")
    seen = None
    try:
        if args.from_log:
            seen = sizing.from_event_log(args.from_log)
        elif args.from_history:
            seen = sizing.from_history(args.from_history, args.query)
    except (EventLogError, HistoryError) as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    if args.from_history and seen is not None and seen.operators is None:  # an unknown --query, or no batch at all
        return _one_line_error(seen.problems[0] if seen.problems else "the history holds no state to size")
    flags, problems = sizing.parse_conf_flags(args.conf)
    if problems:
        return _one_line_error(problems[0].removesuffix("; ignored"))
    conf = {PROVIDER_CONF: ROCKSDB_PROVIDER} if seen is None else {}  # a what-if sizes RocksDB unless told otherwise
    conf.update(seen.conf if seen is not None else {})
    conf.update(flags)
    state = read_conf(conf)
    origin = seen if seen is not None else sizing.Observed()
    origin.problems[:0] = problems
    load = sizing.workload(
        args.partitions, args.operators, args.stores_per_operator, args.executors, args.rows, args.bytes_per_row, origin, state
    )
    est = estimate(state, load)
    restore = sizing.restore_time(est, conf, origin.rates)
    heap = None
    if state.provider == "hdfs":  # the state lives on the JVM heap: RocksDB's figures do not apply
        shaped = args.rows is not None or args.bytes_per_row is not None
        per_row = args.bytes_per_row if args.bytes_per_row is not None else _heap_bytes_per_row(origin)
        heap = size_advice.heap_estimate(
            conf,
            load.executors,
            load.rows if shaped else None,
            per_row if shaped else None,
            origin.version_bytes,
            origin.memory_bytes,
        )
        advice = size_advice.hdfs_advice(heap, load.executors)
    else:
        advice = size_advice.rocksdb_advice(est, state)
    if args.json:
        print(json.dumps(sizing.to_json(est, restore, origin, advice, heap), indent=2))
    elif heap is not None:
        print(sizing.render_heap(heap, est, restore, origin, advice))
    else:
        print(sizing.render_text(est, restore, origin, advice))
    return 0


def _heap_bytes_per_row(seen: Any) -> float | None:
    """JVM bytes per state row of the current version, as Spark measured it."""
    return seen.version_bytes / seen.rows if seen.version_bytes and seen.rows else None
