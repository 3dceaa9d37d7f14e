"""Model events and signals as history rows, buffered until a backend writes them.

Kept apart from the backends so that SQLite and PostgreSQL write exactly the same rows, and so the
background writer can hold, merge and drop whole buffers without knowing SQL. Every row carries the
application's identity (name, static labels as JSON, the volatile application id): many applications
share one PostgreSQL history and are told apart by it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from spark_state_observer.model.bounded import clean_label, clean_stored
from spark_state_observer.model.events import Event, QueryIdle, QueryProgress, QueryStarted, QueryTerminated
from spark_state_observer.model.identity import AppContext

FACT_TABLES = ("batches", "operators", "partitions", "events", "placements")
BATCH_TABLES = ("batches", "operators", "partitions", "placements")  # rows keyed by (query, run, batch) first
MAX_IDENTITY_CHARS = 1024  # defence in depth: the capture bounds identities tighter; this only caps what slips through
_encode = msgspec.json.Encoder().encode


class AppColumns(NamedTuple):
    """An application's identity (``spark_state_observer.model.identity.AppContext``) as a row's app columns write it: None where
    unknown (old rows are NULL too), the static labels as sorted JSON, every string cleaned as a label value is (no
    lone surrogate, NUL or escape): one application named with a bad byte must not make a whole write, and with it
    other applications' rows, fail."""

    name: str | None
    labels_json: str | None
    app_id: str | None


def app_columns(app: AppContext) -> AppColumns:
    """``app``'s identity in the columns every row carries (name, static labels as JSON, application id)."""
    pairs = {clean_label(str(k), MAX_IDENTITY_CHARS): clean_label(str(v), MAX_IDENTITY_CHARS) for k, v in app.static}
    labels = json.dumps(dict(sorted(pairs.items())), sort_keys=True, separators=(",", ":")) if pairs else None
    return AppColumns(_identity(app.name or None), labels, _identity(app.app_id or None))


def _identity(value: str | None) -> str | None:
    return None if value is None else clean_label(value, MAX_IDENTITY_CHARS)


def _cleaned(row: tuple[Any, ...] | list[Any]) -> tuple[Any, ...]:
    return tuple(clean_stored(v) if type(v) is str else v for v in row)


# the app columns each table gets (migration 2): operators and partitions are children of a batch row, so
# they carry name and id for per-application retention and filtering but not the labels
APP_COLUMNS = {
    "queries": ("app", "app_labels", "app_id"),
    "runs": ("app", "app_labels", "app_id"),
    "batches": ("app", "app_labels", "app_id"),
    "events": ("app", "app_labels", "app_id"),
    "operators": ("app", "app_id"),
    "partitions": ("app", "app_id"),
    "placements": ("app", "app_id"),
}

COLUMNS = {
    "queries": ("query_id", "name", "first_seen", "last_seen") + APP_COLUMNS["queries"],
    "runs": ("run_id", "query_id", "started", "last_seen", "ended", "outcome", "exception") + APP_COLUMNS["runs"],
    "batches": (
        "query_id",
        "run_id",
        "batch_id",
        "ts",
        "duration_ms",
        "input_rows",
        "input_rps",
        "processed_rps",
        "watermark",
        "state_rows",
        "state_memory_bytes",
        "durations",
        "progress",
    )
    + APP_COLUMNS["batches"],
    "operators": (
        "query_id",
        "run_id",
        "batch_id",
        "ts",
        "op_index",
        "op_name",
        "provider",
        "rows_total",
        "rows_updated",
        "rows_removed",
        "rows_dropped_by_watermark",
        "memory_bytes",
        "commit_ms",
        "store_instances",
        "shuffle_partitions",
    )
    + APP_COLUMNS["operators"],
    "partitions": ("query_id", "run_id", "batch_id", "ts", "op_index", "partition", "store", "snapshot_version")
    + APP_COLUMNS["partitions"],
    "events": ("query_id", "run_id", "ts", "kind", "attributes") + APP_COLUMNS["events"],
    "placements": (
        "query_id",
        "run_id",
        "batch_id",
        "ts",
        "op_index",
        "partition",
        "executor",
        "host",
        "rows_total",
        "memory_bytes",
        "load_seconds",
        "replay_seconds",
        "changelog_files",
        "moved_from",
        "cause",
        "sst_bytes",
    )
    + APP_COLUMNS["placements"],
}
_APP_INDEX = {t: (COLUMNS[t].index("app"), COLUMNS[t].index("app_id")) for t in COLUMNS}
KEYS = {
    "queries": ("query_id",),
    "runs": ("run_id",),
    "batches": ("query_id", "run_id", "batch_id"),  # primary keys
    # a batch's operator and partition rows are keyed in time order (schema migration 4), with the batch's ts
    "operators": ("query_id", "ts", "run_id", "batch_id", "op_index"),
    "partitions": ("query_id", "ts", "run_id", "batch_id", "op_index", "partition", "store"),
    "placements": ("query_id", "run_id", "batch_id", "op_index", "partition"),
}


@dataclass
class PendingRows:
    """Rows not yet written: fact rows in arrival order, query and run rows merged per key (upserts)."""

    facts: dict[str, list[tuple[Any, ...]]] = field(default_factory=lambda: {t: [] for t in FACT_TABLES})
    queries: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    runs: dict[str, list[Any]] = field(default_factory=dict)  # run_id -> [query, started, last_seen, ended, outcome, exception, *app]
    # (query, run, batch) of progress without a timestamp, stamped with its arrival: written again, its ts
    # differs, so the operator and partition rows at the earlier ts are deleted first (backend.restamp_sql)
    restamped: list[tuple[str, str, int]] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(map(len, self.facts.values())) + len(self.queries) + len(self.runs)  # asked per event: no generator

    @property
    def events(self) -> int:
        """Progress events and signals held (the unit of ``events_dropped_total{reason="history"}``)."""
        return len(self.facts["batches"]) + len(self.facts["events"])

    def __bool__(self) -> bool:
        return self.rows > 0

    def run_rows(self) -> list[tuple[Any, ...]]:
        return [(run_id, *values) for run_id, values in self.runs.items()]

    def cleaned(self) -> PendingRows:
        """A copy with every text value as a database can hold it (``bounded.clean_stored``): what a write
        refused for its data tries next, before rows are isolated."""
        return PendingRows(
            facts={t: [_cleaned(r) for r in rows] for t, rows in self.facts.items()},
            queries={clean_stored(k): _cleaned(r) for k, r in self.queries.items()},
            runs={clean_stored(k): list(_cleaned(v)) for k, v in self.runs.items()},
            restamped=[_cleaned(k) for k in self.restamped],
        )

    def split(self, by: str) -> list[PendingRows]:
        """These rows in parts to be written one by one, in order: per application (``by="app"``), per query
        row, run row, batch (its row with its operator, partition and placement rows) and query's signals
        (``"batch"``), or one row each (``"row"``). A part the database refuses then costs only its own rows."""
        parts: dict[Any, PendingRows] = {}

        def part(key: Any) -> PendingRows:
            found = parts.get(key)
            if found is None:
                found = parts[key] = PendingRows()
            return found

        def key_of(kind: str, row: tuple[Any, ...] | list[Any], n: int) -> Any:
            if by == "app":
                return tuple(row[i] for i in _APP_INDEX[kind])
            if by == "row" or kind in ("queries", "runs"):
                return (kind, n)
            return ("b", row[0], row[1], row[2]) if kind in BATCH_TABLES else ("e", row[0], row[1])

        for n, (query_id, row) in enumerate(self.queries.items()):
            part(key_of("queries", row, n)).queries[query_id] = row
        for n, (run_id, values) in enumerate(self.runs.items()):
            part(key_of("runs", [run_id, *values], n)).runs[run_id] = values
        for table, rows in self.facts.items():
            for n, row in enumerate(rows):
                part(key_of(table, row, n)).facts[table].append(row)
        for restamp in self.restamped:  # with the (first) part holding that batch's row, else alone
            holder = next((p for p in parts.values() if any(r[:3] == restamp for r in p.facts["batches"])), None)
            (holder or part(("restamp", restamp))).restamped.append(restamp)
        return list(parts.values())

    def absorb(self, newer: PendingRows, facts: bool = True) -> None:
        """Append ``newer``'s rows after this buffer's (its query and run updates win); ``facts=False``
        takes only the query and run upserts (the small, bounded part) when the facts are dropped."""
        if facts:
            for table, rows in newer.facts.items():
                self.facts[table].extend(rows)
            self.restamped.extend(newer.restamped)
        for query_id, row in newer.queries.items():
            known = self.queries.get(query_id)
            self.queries[query_id] = (
                row if known is None else (row[0], row[1] or known[1], min(known[2], row[2]), max(known[3], row[3]), *row[4:])
            )
        for run_id, values in newer.runs.items():
            known_run = self.runs.get(run_id)
            if known_run is None:
                self.runs[run_id] = list(values)
                continue
            merged = [values[0], known_run[1] if known_run[1] is not None else values[1], max(known_run[2] or 0, values[2] or 0) or None]
            merged += [values[i] if values[i] is not None else known_run[i] for i in (3, 4, 5)]
            self.runs[run_id] = merged + list(values[6:])


class RowBuilder:
    """Turns model events and signals into ``PendingRows`` stamped with one application's identity."""

    def __init__(self, app: AppContext | None = None) -> None:
        self.app = app or AppContext()
        self.pending = PendingRows()

    @property
    def app(self) -> AppContext:
        """The application the rows are stamped with (its columns are worked out once, when it is set)."""
        return self._app

    @app.setter
    def app(self, app: AppContext) -> None:
        self._app, self._columns = app, app_columns(app)

    def take(self) -> PendingRows:
        """Everything built so far; the builder starts a new buffer."""
        pending, self.pending = self.pending, PendingRows()
        return pending

    def add_event(self, event: Event, received_at: float) -> None:
        """Rows for batches, operators, partitions and runs; lifecycle events arrive as signals."""
        if isinstance(event, QueryProgress):
            self._progress(event, received_at)
        elif isinstance(event, QueryStarted):
            ts = event.timestamp or received_at
            self._query(event.query_id, event.name, ts)
            self._run(event.query_id, event.run_id, ts)[1] = ts
        elif isinstance(event, QueryIdle):
            ts = event.timestamp or received_at
            self._run(event.query_id, event.run_id, ts)[2] = ts
        elif isinstance(event, QueryTerminated):
            ts = received_at
            run = self._run(event.query_id, event.run_id, ts)
            exception = clean_stored(event.exception) if event.exception else event.exception  # a NUL in it: PostgreSQL refuses the row
            run[3], run[4], run[5] = ts, "exception" if event.exception else "clean", exception

    def add_signal(self, kind: str, query_id: str, run_id: str | None, ts: float, attributes: dict[str, Any]) -> None:
        app = self._columns
        self.pending.facts["events"].append(
            (query_id, run_id, ts, kind, json.dumps(attributes, default=str), app.name, app.labels_json, app.app_id)
        )

    def add_row(self, table: str, row: tuple[Any, ...]) -> None:
        """A fact row given in full (all of ``COLUMNS[table]``, or the columns before the app ones)."""
        width = len(COLUMNS[table])
        if len(row) < width:
            app = self._columns
            extra = {"app": app.name, "app_labels": app.labels_json, "app_id": app.app_id}
            row = tuple(row) + tuple(extra[c] for c in APP_COLUMNS[table])
        self.pending.facts[table].append(row)

    def _query(self, query_id: str, name: str | None, ts: float) -> None:
        queries = self.pending.queries
        known = queries.get(query_id)
        app = self._columns
        queries[query_id] = (
            query_id,
            name or (known[1] if known else None),
            known[2] if known else ts,
            ts,
            app.name,
            app.labels_json,
            app.app_id,
        )

    def _run(self, query_id: str, run_id: str, ts: float) -> list[Any]:
        runs = self.pending.runs
        run = runs.get(run_id)
        if run is None:
            app = self._columns
            run = runs[run_id] = [query_id, None, ts, None, None, None, app.name, app.labels_json, app.app_id]
        run[2] = max(run[2] or ts, ts)
        return run

    def _progress(self, p: QueryProgress, received_at: float) -> None:
        """A batch row, its operator and partition rows: plain tuples appended to per-table lists (no dicts
        per row), the durations encoded by msgspec (a fifth of ``json.dumps``'s time)."""
        pending = self.pending
        query_id, run_id, batch_id = p.query_id, p.run_id, p.batch_id
        ts = p.timestamp
        if ts is None:
            ts = received_at
            pending.restamped.append((query_id, run_id, batch_id))
        self._query(query_id, p.name, ts)
        run = self._run(query_id, run_id, ts)
        if run[1] is None:
            run[1] = ts
        app = self._columns
        name, app_id = app.name, app.app_id
        facts = pending.facts
        operators, partitions = facts["operators"], facts["partitions"]
        state_rows = state_memory = None
        for op in p.operators:
            index, rows_total, memory_bytes = op.index, op.rows_total, op.memory_bytes
            if rows_total is not None:
                state_rows = rows_total if state_rows is None else state_rows + rows_total
            if memory_bytes is not None:
                state_memory = memory_bytes if state_memory is None else state_memory + memory_bytes
            operators.append(
                (
                    query_id,
                    run_id,
                    batch_id,
                    ts,
                    index,
                    op.name,
                    op.provider,
                    rows_total,
                    op.rows_updated,
                    op.rows_removed,
                    op.rows_dropped_by_watermark,
                    memory_bytes,
                    op.commit_ms,
                    op.store_instances,
                    op.shuffle_partitions,
                    name,
                    app_id,
                )
            )
            for m in op.instances:
                if m.prefix == "SnapshotLastUploaded":
                    partitions.append((query_id, run_id, batch_id, ts, index, m.partition, m.store, m.value, name, app_id))
        durations = p.duration_ms
        facts["batches"].append(
            (
                query_id,
                run_id,
                batch_id,
                ts,
                p.batch_duration_ms,
                p.input_rows,
                p.input_rows_per_second,
                p.processed_rows_per_second,
                p.watermark,
                state_rows,
                state_memory,
                _encode(durations if type(durations) is dict else dict(durations)).decode(),
                p.raw_text or json.dumps(p.raw, separators=(",", ":")),
                name,
                app.labels_json,
                app_id,
            )
        )
