"""Hostile names and values through the history, on SQLite and a real PostgreSQL (issue 23).

One application named with a lone surrogate, a NUL or bytes that are not UTF-8 made whole history writes
fail: every other application's rows in the same write were lost (SQLite), or the write was retried
forever and held up everything behind it (PostgreSQL). Here 320 generated applications, each with hostile
strings in its name, id, static label, query name and ids, exception text, signal attributes and
placement fields, go through one history sink at once (as the watcher's applications share one), mixed
with rows no cleaning can save (a partition number beyond 64 bits). Every other row must be written once
and read back equal: identities and texts as given where a database can hold them, with the characters
it cannot hold replaced (lone surrogates, NUL; control characters too in identities), never dropped.

Progress comes from a recorded fixture (tests/fixtures), relabelled per case.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from recorded_progress import recorded_at

from conftest import fixture_runs, progress_lines
from spark_state_observer.history.backend import open_backend
from spark_state_observer.history.sink import HistorySink
from spark_state_observer.metrics.selfmetrics import SelfMetrics
from spark_state_observer.model.identity import AppContext
from spark_state_observer.model.parse import parse_event
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.settings import Settings

CASES = 320
# pieces of hostile strings: what a driver or a database cannot hold, what looks like SQL, markup, format
# strings or placeholders, what renders oddly, and plain text (some cases are entirely plain)
ATOMS = [
    "\ud800",
    "\udfff",
    "\udcff",  # a byte that was not UTF-8, as Python decodes a file name or a command line
    "\x00",
    "\x1b[31m",
    "\x7f",
    "\n",
    "\t",
    "'; DROP TABLE batches; --",
    '"',
    "\\",
    "%00",
    "%s",
    "?",
    "{}",
    "</script><img src=x>",
    "\u202e",
    "\u200b",
    "\U0001f600",
    "e\u0301",
    "\ufffd",
    "\xff",
    "x" * 3000,
    " ",
]
PLAIN = ["orders", "Käse-Pipeline", "ñandú", "流处理", "a b c", "app.prod-1"]
# numbers in progress fields: the model makes each a finite float or nothing; the history stores exactly that
NUMBERS = [0, -1, 1.5, 1e308, -1e308, 2**63, 2**80, 10**400, "12", None, True, [], {}, float("nan"), float("inf")]
BAD_IDENTITY = re.compile(r"[\ud800-\udfff\x00-\x08\x0b-\x1f\x7f]")  # what a label value (an identity) may not hold
BAD_TEXT = re.compile(r"[\ud800-\udfff\x00]")  # what no database text may hold
BIG = 2**70  # beyond a 64-bit integer: refused by both databases whatever the cleaning
RUN = fixture_runs("rocksdb_restart")[0]


def identity(text: str) -> str:
    """What the history stores for an identity string (bounded at 1024, bad characters replaced)."""
    return BAD_IDENTITY.sub("\ufffd", text[:1024])


def stored(text: str) -> str:
    return BAD_TEXT.sub("\ufffd", text)


def via_json(text: str) -> str:
    """``text`` as an event's JSON delivers it: a lone high and a lone low surrogate side by side are one character."""
    return json.loads(json.dumps(text))


@dataclass
class Case:
    n: int
    app: str
    app_id: str
    label: str
    query: str
    query_id: str
    run_id: str
    exception: str
    attribute: str
    executor: str
    duration: Any
    input_rows: Any
    refused: bool  # its placement row holds a number no database takes: that row alone is dropped


def hostile(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return rng.choice(PLAIN)
    return "".join(rng.choice(ATOMS + PLAIN) for _ in range(rng.randint(1, 4)))


def cases() -> list[Case]:
    rng = random.Random(23)
    out = []
    for n in range(CASES):
        out.append(
            Case(
                n=n,
                app=hostile(rng),
                app_id=f"app-{n}-{hostile(rng)}",
                label=hostile(rng),
                query=f"q{n} {hostile(rng)}"[:150],
                query_id=f"{n:05d}-{hostile(rng)}"[:150],
                run_id=f"{n:05d}-run-{hostile(rng)}"[:150],
                exception=f"boom {hostile(rng)}",
                attribute=hostile(rng),
                executor=hostile(rng)[:100],
                duration=rng.choice(NUMBERS),
                input_rows=rng.choice(NUMBERS),
                refused=n % 32 == 5,
            )
        )
    return out


def feed(sink: HistorySink, all_cases: list[Case]) -> dict[int, tuple[float | None, float | None]]:
    """Every case's query through the sink, as the watcher's applications reach its one history sink; returns
    each batch's duration and input rows as the model made them of the hostile numbers."""
    numbers = {}
    base = progress_lines(RUN)[0]
    now = recorded_at(base)  # the time a live watcher read it: rows of today next to the recording's would be weeks apart
    for case in all_cases:
        app = AppContext(case.app, (("cluster", case.label),), case.app_id, "1", f"log-{case.n}")
        started = parse_event("started", json.dumps({"id": case.query_id, "runId": case.run_id, "name": case.query, "timestamp": None}))
        sink.on_app_event(app, started, [], now)
        fields = dict(base, id=case.query_id, runId=case.run_id, name=case.query, batchId=case.n)
        fields.update(batchDuration=case.duration, numInputRows=case.input_rows)
        progress = parse_event("progress", json.dumps(fields))
        numbers[case.n] = (progress.batch_duration_ms, progress.input_rows)
        signal = SignalEvent("stall", progress.query_id, progress.name or "", progress.run_id, now, {"note": case.attribute})
        sink.on_app_event(app, progress, [signal], now)
        assert sink.store is not None
        # a placement row as the placement feed adds it (its strings come from task events)
        sink.store.add_row(
            "placements",
            (progress.query_id, progress.run_id, case.n, progress.timestamp, 0, BIG if case.refused else 3)
            + (case.executor, f"host-{case.executor}", 10.0, 20.0, None, None, None, None, None, None),
        )
        terminated = parse_event("terminated", json.dumps({"id": case.query_id, "runId": case.run_id, "exception": case.exception}))
        sink.on_app_event(app, terminated, [], now)
    sink.close()
    return numbers


def read(location: str, sql: str) -> list[tuple[Any, ...]]:
    backend = open_backend(location, readonly=True)
    try:
        return backend.rows(sql)[1]
    finally:
        backend.close()


@pytest.fixture(params=["sqlite-watcher", "sqlite-listener", "postgresql"])
def history(request, tmp_path) -> tuple[str, bool]:
    """A new history and whether it is written as the watcher writes it (a background writer)."""
    if request.param == "postgresql":
        return request.getfixturevalue("postgres").create_database(f"t_{uuid.uuid4().hex[:16]}"), True
    return str(tmp_path / "h.db"), request.param == "sqlite-watcher"


def test_hostile_names_cost_no_other_row(history: tuple[str, bool]) -> None:
    location, background = history
    all_cases = cases()
    metrics = SelfMetrics()
    sink = HistorySink(location, metrics, Settings(http_enabled=False), background=background)
    assert sink.store is not None, sink.error
    numbers = feed(sink, all_cases)
    assert {n for pair in numbers.values() for n in pair} >= {None, 1e308, float(2**80)}  # the odd ones reached the history
    refused = [c for c in all_cases if c.refused]
    assert refused and len(all_cases) - len(refused) >= 300

    # exactly the rows no database can hold are missing, and counted
    assert sink.dropped_rows == len(refused)
    assert metrics.dropped.get("history", 0) == len(refused)

    batches = {
        r[2]: r
        for r in read(
            location, "SELECT query_id, run_id, batch_id, app, app_labels, app_id, progress, duration_ms, input_rows FROM batches"
        )
    }
    queries = {r[0]: r for r in read(location, "SELECT query_id, name, app, app_id FROM queries")}
    runs = {r[0]: r for r in read(location, "SELECT run_id, query_id, outcome, exception, app_id FROM runs")}
    events = {r[0]: r for r in read(location, "SELECT query_id, kind, attributes, app FROM events")}
    placements = {r[2]: r for r in read(location, "SELECT query_id, run_id, batch_id, executor, host, app, app_id FROM placements")}
    assert sorted(batches) == list(range(CASES))  # every batch once
    assert len(queries) == len(runs) == len(events) == CASES
    assert sorted(placements) == [c.n for c in all_cases if not c.refused]

    for case in all_cases:
        # as the model delivers event strings (JSON, ids and names bounded at 200)
        query_id, run_id, query = (identity(via_json(t)[:200]) for t in (case.query_id, case.run_id, case.query))
        b = batches[case.n]
        assert (b[0], b[1]) == (query_id, run_id)
        assert (b[3], b[5]) == (identity(case.app), identity(case.app_id)), case.n
        assert json.loads(b[4]) == {"cluster": identity(case.label)}
        assert json.loads(b[6])["batchId"] == case.n
        assert (b[7], b[8]) == numbers[case.n]  # finite or NULL, as the model gave them
        q = queries[query_id]
        assert (q[1], q[2], q[3]) == (query, identity(case.app), identity(case.app_id))
        r = runs[run_id]
        assert (r[1], r[2], r[3], r[4]) == (query_id, "exception", stored(via_json(case.exception)), identity(case.app_id))
        e = events[query_id]
        assert (
            e[1] == "stall" and json.loads(e[2]) == {"note": via_json(case.attribute)} and e[3] == identity(case.app)
        )  # JSON keeps it whole
        if not case.refused:
            p = placements[case.n]
            assert (p[3], p[4]) == (stored(case.executor), stored(f"host-{case.executor}"))
            assert (p[5], p[6]) == (identity(case.app), identity(case.app_id))
        if not BAD_IDENTITY.search(case.app + case.app_id) and max(len(case.app), len(case.app_id)) <= 1024:
            assert (b[3], b[5]) == (case.app, case.app_id)  # nothing to clean: stored exactly as given

    # no text anywhere holds what a database (or a later reader) cannot take
    for table, columns in {
        "batches": "query_id, run_id, app, app_labels, app_id, durations, progress",
        "queries": "query_id, name, app, app_labels, app_id",
        "runs": "run_id, query_id, exception, app, app_labels, app_id",
        "events": "query_id, run_id, kind, attributes, app, app_labels, app_id",
        "placements": "query_id, run_id, executor, host, app, app_id",
    }.items():
        for row in read(location, f"SELECT {columns} FROM {table}"):
            assert not any(isinstance(v, str) and BAD_TEXT.search(v) for v in row), (table, row)


# --- odd bytes in the history location -------------------------------------------------------------------

ODD_LOCATIONS = [
    "sqlite:///a%00b.db",
    "/tmp/a\x00b.db",
    "sqlite:///%ff%fe.db",
    "sqlite:///\udcff.db",
    "postgresql://u:pw@h%00x/db",
    "postgresql://u:pw@h/db?sslmode=%00",
    "postgresql://u:pw@[::1/db",
    "postgresql://u:pw@h/\ud800",
    "postgres://u:pw@h/db\x00",
]


@pytest.mark.parametrize("location", ODD_LOCATIONS)
def test_odd_bytes_in_a_history_location_give_a_message(location: str, tmp_path, monkeypatch) -> None:
    """Before: ``%00`` in a history URL raised ValueError from deep in a driver."""
    from spark_state_observer.history.backend import HistoryError

    monkeypatch.chdir(tmp_path)  # a relative location that a driver creates before refusing stays out of the checkout

    with pytest.raises(HistoryError) as raised:
        open_backend(location)
    message = str(raised.value)
    assert not BAD_IDENTITY.search(message), message  # escaped: safe in a log line
    assert "pw" not in message  # never the password
    sink = HistorySink(location, SelfMetrics())  # a sink stays off, with the message, and never raises
    assert sink.store is None and sink.error == message


def test_odd_history_location_on_the_command_line_is_said_not_raised(tmp_path) -> None:
    import os
    import subprocess
    import sys

    from conftest import ROOT, eventlog_dir

    proc = subprocess.run(
        [sys.executable, "-m", "spark_state_observer.cli", "replay", eventlog_dir(RUN), "--history", "sqlite:///x%00.db"],
        capture_output=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=300,
        check=False,
    )
    err = proc.stderr.decode(errors="replace")
    assert "Traceback" not in err and "holds a NUL byte (or %00)" in err, err[-2000:]
    assert proc.returncode == 3  # the replay ran; its history could not be written, and it says so
