"""``spark-state-observer size``: how much RocksDB memory and disk a state needs per executor, before running it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    size = sub.add_parser(
        "size",
        help="what-if: RocksDB state store instances, memory and disk per executor, and restore time, from a shape or a real application",
    )
    size.add_argument(
        "--partitions", type=int, default=None, help="state partitions (default: the application's, else spark.sql.shuffle.partitions)"
    )
    size.add_argument("--operators", type=int, default=None, help="stateful operators (default: the application's, else 1)")
    size.add_argument(
        "--stores-per-operator", type=int, default=None, help="stores each partition of an operator opens (a stream-stream join has 4)"
    )
    size.add_argument(
        "--executors", type=int, default=None, help="executors the instances spread over (default: the application's, else 1)"
    )
    size.add_argument("--rows", type=int, default=None, help="state rows over all partitions and operators")
    size.add_argument(
        "--bytes-per-row", type=float, default=None, help="SST bytes per state row (default: the application's SST bytes / rows)"
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


def run(args: argparse.Namespace) -> int:
    from spark_state_observer.history.store import HistoryError
    from spark_state_observer.model.capacity import PROVIDER_CONF, ROCKSDB_PROVIDER, estimate, read_conf
    from spark_state_observer.offline import sizing
    from spark_state_observer.offline.eventlog import EventLogError

    seen = None
    try:
        if args.from_log:
            seen = sizing.from_event_log(args.from_log)
        elif args.from_history:
            seen = sizing.from_history(args.from_history, args.query)
    except (EventLogError, HistoryError) as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    flags, problems = sizing.parse_conf_flags(args.conf)
    conf = {PROVIDER_CONF: ROCKSDB_PROVIDER} if seen is None else {}  # a what-if sizes RocksDB unless told otherwise
    conf.update(seen.conf if seen is not None else {})
    conf.update(flags)
    for value, name in (
        (args.partitions, "--partitions"),
        (args.operators, "--operators"),
        (args.stores_per_operator, "--stores-per-operator"),
    ):
        if value is not None and value < 0:
            print(f"spark-state-observer: {name} must be 0 or more", file=sys.stderr)
            return 2
    state = read_conf(conf)
    origin = seen if seen is not None else sizing.Observed()
    origin.problems[:0] = problems
    load = sizing.workload(
        args.partitions, args.operators, args.stores_per_operator, args.executors, args.rows, args.bytes_per_row, origin, state
    )
    est = estimate(state, load)
    restore = sizing.restore_time(est, conf, origin.rates)
    if args.json:
        print(json.dumps(sizing.to_json(est, restore, origin), indent=2))
    else:
        print(sizing.render_text(est, restore, origin))
    return 0
