"""``spark-state-observer retire``: an operator declares a failed, crash-looping or scheduled query gone for good.

A failed query stays failed across applications (``spark_state_observer.fleet.query_statuses``) until a later run of it runs,
and a query on a schedule waits for its next run (overdue when it does not come);
one that will never run again (the job was removed, its checkpoint deleted) is retired here: the retirement is
written into the history the watchers share, and each of them stops exporting the query within ``SYNC_SECONDS``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    retire = sub.add_parser(
        "retire", help="retire a failed, crash-looping or scheduled query: its lasting status ends (recorded in the history)"
    )
    retire.add_argument("query", help="the query's id, or its name (every lasting query of that name)")
    retire.add_argument(
        "--history", required=True, metavar="URL", help="the watcher's history: a path, sqlite:///path or postgresql://user@host/db"
    )


def run(args: argparse.Namespace) -> int:
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
        retired = query_status.retire(backend, args.query)
    except HistoryError as exc:
        print(f"spark-state-observer retire: {exc}", file=sys.stderr)
        return 2
    finally:
        if backend is not None:
            backend.close()
    if not retired:
        print(
            f"spark-state-observer retire: no failed, crash-looping or scheduled query {clean_text(args.query, 200)!r} in the history",
            file=sys.stderr,
        )
        return 1
    for row in retired:
        name = clean_text(row.name or row.query_id, 200)
        print(f"retired {name} ({row.query_id}) of {clean_text(row.app, 200) or 'an unnamed application'}: it was {row.status}")
    return 0
