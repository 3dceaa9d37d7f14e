"""What a history database must do, whichever it is: write buffered rows, enforce retention, answer reads.

``spark_state_observer.history.sqlite`` (the embedded file) and ``spark_state_observer.history.postgres`` (a shared server)
implement it; ``open_backend`` picks one from the history location (``spark_state_observer.history.url``). The SQL
both understand lives here once (upserts, retention, the loaders' queries); each backend only supplies
its dialect's few differences and its connection handling.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Any, Iterator

from spark_state_observer.history.retention import RetentionPolicy
from spark_state_observer.history.rows import COLUMNS, FACT_TABLES, PendingRows
from spark_state_observer.history.url import HistoryTarget, parse


class HistoryError(RuntimeError):
    """The history database cannot be written (or opened); the message says why."""


class HistoryDataError(HistoryError):
    """The database refused the rows themselves (a value it cannot hold), not the connection or the disk:
    writing the same rows again fails again, so the writer isolates the rows at fault instead of retrying."""


def upsert_sql(table: str, greatest: str) -> str:
    """The insert-or-merge of one query or run row (``?`` placeholders; ``greatest`` is MAX or GREATEST)."""
    cols = COLUMNS[table]
    app = ", ".join(f"{c}=COALESCE(excluded.{c}, {table}.{c})" for c in ("app", "app_labels", "app_id"))
    head = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
    if table == "queries":
        return head + (
            f"ON CONFLICT(query_id) DO UPDATE SET name=COALESCE(excluded.name, queries.name), "
            f"last_seen={greatest}(queries.last_seen, excluded.last_seen), {app}"
        )
    return head + (
        f"ON CONFLICT(run_id) DO UPDATE SET started=COALESCE(runs.started, excluded.started), "
        f"last_seen={greatest}(COALESCE(runs.last_seen, 0), excluded.last_seen), "
        f"ended=COALESCE(excluded.ended, runs.ended), outcome=COALESCE(excluded.outcome, runs.outcome), "
        f"exception=COALESCE(excluded.exception, runs.exception), {app}"
    )


RESTAMPED_TABLES = ("operators", "partitions")  # the tables keyed by the batch's ts (schema migration 4)


def restamp_sql(table: str) -> str:
    """Delete a batch's ``table`` rows at the ts its batch row has now (parameters: query, run, batch,
    query, run, batch); run for batches about to be written with another ts (``PendingRows.restamped``)
    before the new rows go in. A seek on the (query, ts) key prefix."""
    return (
        f"DELETE FROM {table} WHERE query_id = ? AND run_id = ? AND batch_id = ? AND ts IN "
        "(SELECT ts FROM batches WHERE query_id = ? AND run_id = ? AND batch_id = ?)"
    )


def restamp_params(pending: PendingRows) -> list[tuple[Any, ...]]:
    return [(*key, *key) for key in pending.restamped]


class Backend(ABC):
    """One open history database. Not thread-safe: one writer thread (or one reader call) uses it."""

    kind: str = ""
    size_passes = 20  # rounds of "delete the oldest tenth" while over max_bytes

    def __init__(self, target: HistoryTarget) -> None:
        self.target = target

    @property
    def display(self) -> str:
        return self.target.display

    # --- writing --------------------------------------------------------------------------------------
    @abstractmethod
    def write(self, pending: PendingRows) -> None:
        """Write ``pending`` in one transaction (all or nothing). Raises ``HistoryDataError`` when a value is
        refused, ``HistoryError`` for anything else (retried later)."""

    # --- the dialect ----------------------------------------------------------------------------------
    @abstractmethod
    def json_number(self, column: str, key: str) -> str:
        """SQL for the number under ``key`` of a JSON object stored as text in ``column``."""

    @abstractmethod
    def bucket(self) -> str:
        """SQL putting ``ts`` into integer buckets given the two parameters (origin, width)."""

    @abstractmethod
    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run a read (``?`` placeholders): its column names and rows. Raises ``HistoryError``.

        Plain tuples, not DataFrames: the job's history writer and ``inspect --history`` need no pandas."""

    @abstractmethod
    def execute(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Run writes (``?`` placeholders) in one transaction. Raises ``HistoryError``."""

    @abstractmethod
    def used_bytes(self) -> float:
        """Bytes the history's rows occupy (not counting space freed for reuse)."""

    @contextmanager
    def retention_turn(self) -> Iterator[bool]:
        """Yields whether this writer may enforce retention now (PostgreSQL: one writer at a time)."""
        yield True

    @abstractmethod
    def close(self) -> None:
        """Release the connection; safe to call twice."""

    # --- retention (shared) ---------------------------------------------------------------------------
    def enforce_retention(self, policy: RetentionPolicy, max_bytes: float, now: float) -> None:
        """Delete rows older than their query's age (``policy``) before ``now``, then the oldest while over ``max_bytes``.

        ``now`` is where the window ends (``store.window_end``: the newest data written, at most the clock),
        never read from the wall clock here."""
        with self.retention_turn() as mine:
            if not mine:
                return
            self.execute(self._age_statements(policy, now))
            for _ in range(self.size_passes):
                used = self.used_bytes()
                if used <= max_bytes:
                    break
                share = min(1.0, max(0.1, (used - max_bytes) / used))
                _, oldest = self.rows(
                    f"SELECT ts FROM batches ORDER BY ts LIMIT 1 OFFSET (SELECT CAST(COUNT(*) * {share:.6f} AS INTEGER) FROM batches)"
                )
                if not oldest:
                    break
                self.execute([(f"DELETE FROM {t} WHERE ts < ?", (float(oldest[0][0]),)) for t in FACT_TABLES])

    def _age_statements(self, policy: RetentionPolicy, now: float) -> list[tuple[str, tuple[Any, ...]]]:
        default_cutoff = now - policy.default_seconds
        if policy.uniform:
            return [(f"DELETE FROM {t} WHERE ts < ?", (default_cutoff,)) for t in FACT_TABLES]
        _, known = self.rows("SELECT query_id, name, app FROM queries")
        special = policy.cutoffs(now, [(query_id, name, app) for query_id, name, app in known])
        out: list[tuple[str, tuple[Any, ...]]] = []
        excluded: list[str] = []
        for cutoff, ids in special.items():
            excluded += ids
            marks = ", ".join("?" for _ in ids)
            out += [(f"DELETE FROM {t} WHERE query_id IN ({marks}) AND ts < ?", (*ids, cutoff)) for t in FACT_TABLES]
        if excluded:
            marks = ", ".join("?" for _ in excluded)
            out += [(f"DELETE FROM {t} WHERE ts < ? AND query_id NOT IN ({marks})", (default_cutoff, *excluded)) for t in FACT_TABLES]
        else:
            out += [(f"DELETE FROM {t} WHERE ts < ?", (default_cutoff,)) for t in FACT_TABLES]
        return out


def open_backend(location: str, readonly: bool = False) -> Backend:
    """The backend for a history location (path, sqlite:/// or postgresql:// URL). Raises ``HistoryError``.

    A PostgreSQL backend connects lazily (on its first write or read), so opening one never waits on
    the network: the writer thread, not the caller, pays for an unreachable server.
    """
    from spark_state_observer.history.url import HistoryURLError

    try:
        target = parse(location)
    except HistoryURLError as exc:
        raise HistoryError(str(exc)) from None
    if target.kind == "sqlite":
        from spark_state_observer.history.sqlite import SQLiteBackend

        return SQLiteBackend(target, readonly=readonly)
    try:
        from spark_state_observer.history.postgres import PostgresBackend
    except ImportError:
        raise HistoryError(
            f"history {target.display} is a PostgreSQL URL but psycopg is not installed (pip install 'spark-state-observer[postgres]')"
        ) from None
    return PostgresBackend(target, readonly=readonly)
