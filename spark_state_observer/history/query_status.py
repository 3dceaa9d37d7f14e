"""Each query's lasting lifecycle state in the history (table ``query_status``, schema migrations 5 and 6).

The watcher writes a query's state when it changes (``spark_state_observer.fleet.query_statuses``) and reads them all back
when it starts, so a query that failed in an application forgotten before the watcher's restart is still failed
after it. ``spark-state-observer retire`` records a retirement here: the state ``retired`` with the run it retired
(``retired_run``), which a running watcher reads on its next sync. One row per query id: the table's size is the
number of queries, and the rows past their retention are deleted by the watcher that keeps them (``delete_before``).
Same SQL on SQLite and PostgreSQL (``?`` placeholders, ``ON CONFLICT`` upserts); every failure is a ``HistoryError``.
"""

from __future__ import annotations

import json
import math
import time
from typing import NamedTuple

from spark_state_observer.history.backend import Backend
from spark_state_observer.model.bounded import clean_identity, loads
from spark_state_observer.model.identity import Pairs
from spark_state_observer.model.query_lifecycle import LASTING, RETIRED

COLUMNS = (
    "query_id",
    "name",
    "app",
    "app_labels",
    "app_id",
    "status",
    "since",
    "updated",
    "run_id",
    "retired_run",
    "run_start",
    "schedule_seconds",
)
_UPSERT = (
    f"INSERT INTO query_status ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)}) ON CONFLICT(query_id) DO UPDATE SET "
    + ", ".join(f"{c}=excluded.{c}" for c in COLUMNS[1:])
    # a retirement written meanwhile by `retire` (a newer row) is not overwritten by an older state
    + " WHERE excluded.updated >= query_status.updated"
)


class QueryStatusRow(NamedTuple):
    """One query's lasting state as the history keeps it."""

    query_id: str
    name: str | None
    app: str  # the application (its ``app`` label) of the run the state is about
    static: Pairs  # that application's static labels, so the series keeps its labels after the application is gone
    app_id: str
    status: str  # ``spark_state_observer.model.query_lifecycle``: a lasting state, or ``retired``
    since: float  # when the query entered this state
    updated: float  # when this row was written: the newer of two writers' rows wins
    run_id: str | None  # the run the state is about
    retired_run: str | None  # retired: the run that was retired (that run's state is not taken again)
    run_start: float | None = None  # scheduled: when its latest run started
    schedule_seconds: float | None = None  # scheduled: its usual start-to-start interval (the next run is due then)


def save(backend: Backend, rows: list[QueryStatusRow]) -> None:
    """Upsert ``rows`` in one transaction."""
    if rows:
        backend.execute([(_UPSERT, _params(row)) for row in rows])


def load(backend: Backend) -> list[QueryStatusRow]:
    """Every query's readable row, lasting and retired, oldest state first (a row whose times are not numbers,
    which SQLite lets anyone write, is left out: its query is not restored)."""
    _, rows = backend.rows(f"SELECT {', '.join(COLUMNS)} FROM query_status ORDER BY since, query_id")
    return [row for row in map(_row, rows) if row is not None]


def delete_before(backend: Backend, cutoff: float) -> None:
    """Forget the rows whose state is older than ``cutoff`` (lasting states past their retention, old retirements)."""
    backend.execute([("DELETE FROM query_status WHERE since < ?", (cutoff,))])


def bring_back(rows: list[QueryStatusRow], now: float) -> list[QueryStatusRow]:
    """``rows`` with a ``since`` ahead of ``now`` (written by a process whose clock runs fast) set to ``now``: a state
    is never younger than the reader's clock says, so it expires one retention from now instead of never."""
    return [r._replace(since=now) if r.since > now else r for r in rows]


class Retirement(NamedTuple):
    """What ``retire`` did: the rows it retired (as they were), and those a newer state overtook meanwhile."""

    retired: list[QueryStatusRow]
    overtaken: list[QueryStatusRow]


def retire(backend: Backend, query: str, now: float | None = None) -> Retirement:
    """Retire the lasting queries whose id or name is ``query`` (none found: nothing to retire), and read back which
    retirements the history holds.

    A retirement is newer than the row it retires even when that row's ``updated`` is ahead of ``now`` (a watcher
    whose clock runs fast): the upsert keeps the newer row, so an older retirement would leave the state as it was.
    A row written again between the read and the write (a watcher's newer state) stays, and is reported overtaken.
    """
    now = time.time() if now is None else now
    found = [r for r in load(backend) if r.status in LASTING and query in (r.query_id, r.name)]
    save(backend, [r._replace(status=RETIRED, since=now, updated=_after(r.updated, now), retired_run=r.run_id) for r in found])
    held = {r.query_id: (r.status, r.retired_run) for r in load(backend)} if found else {}
    done = [r for r in found if held.get(r.query_id) == (RETIRED, r.run_id)]
    return Retirement(done, [r for r in found if held.get(r.query_id) != (RETIRED, r.run_id)])


def _after(updated: float, now: float) -> float:
    """A time later than ``updated`` and not before ``now`` (``updated`` itself at the end of the float range)."""
    later = math.nextafter(updated, math.inf)
    return max(now, later if math.isfinite(later) else updated)


def _params(row: QueryStatusRow) -> tuple[object, ...]:
    return (*row[:3], json.dumps([list(p) for p in row.static]), *row[4:])


def _row(values: tuple[object, ...]) -> QueryStatusRow | None:
    query_id, name, app, labels, app_id, status, since, updated, run_id, retired_run, run_start, schedule_seconds = values
    try:
        since, updated = float(since), float(updated)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(since) and math.isfinite(updated)):
        return None
    try:
        static = tuple((str(k), str(v)) for k, v in loads(str(labels or "[]")))
    except (ValueError, TypeError, RecursionError):  # a row written by hand or damaged: the labels are lost, not the state
        static = ()
    # what the table says ends on series and in the browser: cleaned as identity is (a row written by anyone)
    return QueryStatusRow(
        clean_identity(query_id),
        None if name is None else clean_identity(name),
        clean_identity(app),
        tuple((clean_identity(k), clean_identity(v)) for k, v in static),
        clean_identity(app_id),
        clean_identity(status),
        since,
        updated,
        None if run_id is None else clean_identity(run_id),
        None if retired_run is None else clean_identity(retired_run),
        _finite(run_start),
        _finite(schedule_seconds),
    )


def _finite(value: object) -> float | None:
    """A number column as written by anyone: a finite float, or nothing."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
