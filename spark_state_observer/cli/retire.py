"""``spark-state-observer retire``: an operator declares a failed, crash-looping or scheduled query gone for good.

A failed query stays failed across applications (``spark_state_observer.fleet.query_statuses``) until a later run of it runs,
and a query on a schedule waits for its next run (overdue when it does not come);
one that will never run again (the job was removed, its checkpoint deleted) is retired here: the retirement is
written into the history the watchers share, and each of them stops exporting the query within ``SYNC_SECONDS``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any


def add_parser(sub: Any) -> None:
    retire = sub.add_parser(
        "retire", help="retire a failed, crash-looping or scheduled query: its lasting status ends (recorded in the history)"
    )
    retire.add_argument("query", help="the query's id, or its name (every lasting query of that name)")
    retire.add_argument(
        "--history", required=True, metavar="URL", help="the watcher's history: a path, sqlite:///path or postgresql://user@host/db"
    )
    retire.set_defaults(run=run)


def run(args: argparse.Namespace, clock: Callable[[], float] = time.time) -> int:
    """Retire and say what the history now holds: a row a watcher wrote again meanwhile is not said retired (exit 1)."""
    from spark_state_observer.history import query_status
    from spark_state_observer.history.backend import HistoryError, open_backend
    from spark_state_observer.model.bounded import clean_text

    backend = None
    try:
        reader = open_backend(args.history, readonly=True)
        try:
            reader.rows("SELECT 1")  # a history that is not there is said, not created empty
        finally:
            reader.close()
        backend = open_backend(args.history)
        done = query_status.retire(backend, args.query, now=clock())
    except HistoryError as exc:
        print(f"spark-state-observer retire: {exc}", file=sys.stderr)
        return 2
    finally:
        if backend is not None:
            backend.close()
    if not done.retired and not done.overtaken:
        print(
            f"spark-state-observer retire: no failed, crash-looping or scheduled query {clean_text(args.query, 200)!r} in the history",
            file=sys.stderr,
        )
        return 1
    for row in done.retired:
        name = clean_text(row.name or row.query_id, 200)
        print(f"retired {name} ({row.query_id}) of {clean_text(row.app, 200) or 'an unnamed application'}: it was {row.status}")
    for row in done.overtaken:
        name = clean_text(row.name or row.query_id, 200)
        print(
            f"spark-state-observer retire: not retired {name} ({row.query_id}): a watcher wrote a newer state of it meanwhile; "
            "run retire again if it should still go",
            file=sys.stderr,
        )
    return 1 if done.overtaken else 0
