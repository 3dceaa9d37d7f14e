"""One hostile corpus through every entry point that reads data (issue 47): a registry of entry points x cases.

The other hostile files attack one reader each with what is inside a file (values, lines, names, bombs:
``test_hostile.py``, ``test_hostile_watch.py``, ``test_hostile_history.py``). This one attacks what a file is:
every codec (plain, zstd, lz4, snappy) truncated, corrupt, lying about its codec (a ``.zstd`` that is not
zstd), empty, a directory where a file should be, unreadable, inside rolling ``eventlog_v2_*`` folders; and
histories and checkpoints that are not what they say. Each case goes through every entry point that reads
its kind of input:

- the commands, each in its own process as a user runs it (``python -m spark_state_observer.cli``), without
  root's right to read anything (``unprivileged``) and under a 1 GiB address-space limit (a bomb that got
  through would end in a MemoryError traceback): ``replay``, ``backtest``, ``size --from-log``, ``watch``
  (one watcher over the whole corpus, scraped, then SIGTERM), ``inspect``, ``inspect --history``,
  ``size --from-history``, ``retire``;
- the library readers in one unprivileged process of their own: the offline event-log readers (the pre-passes
  included: ``log_identity``, placement, the backtest's ordering and runs), the history readers
  (``spark_state_observer.history.loaders``, ``browse``, ``query_status``) and the browser's loaders
  (``spark_state_observer.browser.data``).

A command ends with one of its documented exit codes (the table in docs/replay.md), never a traceback,
and says what it could not read, naming the file; a library reader returns or raises its documented error.
And ``test_every_entry_point_that_reads_data_is_in_the_corpus`` fails when a command or a public loader is added
without joining the registry below (or the commented list of those that read no data).
"""

from __future__ import annotations

import ast
import concurrent.futures
import glob
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zstandard

from bench.eventlog_writer import StreamEncoder, recorded_lines, renamed
from conftest import FIXTURES, ROOT, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
MEMORY_LIMIT = 1 << 30  # address space of each command run (the interpreter, pandas and the readers take ~500 MiB)
LYING = b"this is not zstd at all\n" * 200
CODECS: tuple[str | None, ...] = (None, "zstd", "lz4", "snappy")


# --- the event-log corpus ---------------------------------------------------------------------------------


def _recorded() -> list[bytes]:
    path = glob.glob(os.path.join(FIXTURES, "rocksdb_restart", "run1", "eventlog", "*", "events_*"))[0]
    return recorded_lines(path)


def encode(lines: list[bytes], codec: str | None) -> bytes:
    """The lines as Spark writes them with ``codec`` (a unit per line, the stream closed)."""
    enc = StreamEncoder(codec)
    return b"".join(enc.flush([line]) for line in lines) + enc.close()


def ext(codec: str | None) -> str:
    return "." + codec if codec else ""


def tag(codec: str | None) -> str:
    return codec or "plain"


def corrupted(data: bytes) -> bytes:
    """``data`` with 64 bytes in its middle overwritten: headers intact, the content behind them broken."""
    middle = len(data) // 2
    return data[:middle] + bytes((b ^ 0xA5) for b in data[middle : middle + 64]) + data[middle + 64 :]


def corrupt_log(lines: list[bytes], codec: str | None) -> bytes:
    """The log with its content broken in the middle: the compressed bytes of a codec; for plain text, the middle
    of a line the readers parse (a progress event; task lines are skipped unparsed, their damage unseen)."""
    if codec is not None:
        return corrupted(encode(lines, codec))
    wanted = [i for i, line in enumerate(lines) if b"QueryProgressEvent" in line[:120]] or [len(lines) // 2]
    at = wanted[len(wanted) // 2]
    return encode([*lines[:at], corrupted(lines[at][:-1]) + b"\n", *lines[at + 1 :]], None)


@dataclass(frozen=True)
class Case:
    """One hostile input: ``build`` makes it under a folder and returns the path an entry point is given;
    ``names`` is the file a clear message names (None: nothing is wrong enough to name, e.g. an empty log)."""

    name: str
    build: Callable[[Path], Path]
    names: str | None
    events_before: bool = False  # valid events come before the damage: they are read


def _app(name: str) -> str:
    return f"app-{name}"


def _single(name: str, codec: str | None, data: Callable[[list[bytes]], bytes], mode: int | None = None) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        path = root / f"{_app(name)}{ext(codec)}"
        path.write_bytes(data(renamed(LINES, name, _app(name))))
        if mode is not None:
            path.chmod(mode)
        return path

    return build


def _directory(name: str, codec: str | None) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        path = root / f"{_app(name)}{ext(codec)}"
        path.mkdir()
        return path

    return build


def _rolling(name: str, codec: str | None, bad: str) -> Callable[[Path], Path]:
    """``eventlog_v2_<app>``: three parts, the second ``bad`` (corrupt, truncated, lying, empty, a directory, unreadable)."""

    def build(root: Path) -> Path:
        app = _app(name)
        folder = root / f"eventlog_v2_{app}"
        folder.mkdir()
        lines = renamed(LINES, name, app)
        third = len(lines) // 3
        pieces = [lines[:third], lines[third : 2 * third], lines[2 * third :]]
        for n, part in enumerate(pieces, 1):
            path = folder / f"events_{n}_{app}{ext(codec)}"
            data = encode(part, codec)
            if n != 2:
                path.write_bytes(data)
            elif bad == "directory":
                path.mkdir()
            else:
                path.write_bytes(
                    {
                        "corrupt": corrupt_log(part, codec),
                        "truncated": data[: len(data) * 2 // 3],
                        "lying": LYING,
                        "empty": b"",
                        "unreadable": data,
                    }[bad]
                )
                if bad == "unreadable":
                    path.chmod(0)
        (folder / f"appstatus_{app}").write_bytes(b"")
        return folder

    return build


def _odd(kind: str) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        app = _app(kind)
        if kind == "missing":
            return root / f"{app}.zstd"
        if kind == "fifo":
            path = root / f"{app}.zstd"
            os.mkfifo(path)
        elif kind == "dangling-link":
            path = root / f"{app}.zstd"
            os.symlink(root / "nowhere.zstd", path)
        elif kind == "unsupported-codec":
            path = root / f"{app}.lzf"
            path.write_bytes(LYING)
        elif kind == "nul-bytes":
            path = root / app
            path.write_bytes(b"\0" * (1 << 20))
        elif kind == "rolling-empty-folder":
            path = root / f"eventlog_v2_{app}"
            path.mkdir()
        elif kind == "rolling-unreadable-folder":
            path = root / f"eventlog_v2_{app}"
            path.mkdir()
            (path / f"events_1_{app}.zstd").write_bytes(encode(renamed(LINES, kind, app), "zstd"))
            path.chmod(0)
        else:
            raise AssertionError(kind)
        return path

    return build


def _inprogress(root: Path) -> Path:
    """A log still being written: ``.inprogress``, its last zstd frame cut short."""
    path = root / f"{_app('inprogress-cut')}.zstd.inprogress"
    data = encode(renamed(LINES, "inprogress-cut", _app("inprogress-cut")), "zstd")
    path.write_bytes(data[: len(data) - 100])
    return path


def _deep_lines(root: Path) -> Path:
    """A log whose environment, plan and task lines (each read by a tap of its own) are nested 100,000 deep."""
    app = _app("deep-lines")
    deep = "[" * 100_000 + "]" * 100_000
    taps = (b"SparkListenerEnvironmentUpdate", b"SparkListenerLogStart", b"SparkListenerSQLExecutionStart", b"SparkListenerTaskEnd")
    lines = []
    for line in renamed(LINES, "deep-lines", app):
        event = line[10 : line.index(b'"', 10)]
        lines.append(b'{"Event":"%s","x":%s}\n' % (event, deep.encode()) if event.endswith(taps) else line)
    path = root / app
    path.write_bytes(encode(lines, None))
    return path


LINES = _recorded()


def event_log_cases() -> list[Case]:
    cases = []
    for codec in CODECS:
        t = tag(codec)
        cases += [
            Case(
                f"{t}-truncated",
                _single(f"{t}-truncated", codec, lambda ls, c=codec: (d := encode(ls, c))[: len(d) * 2 // 3]),
                "truncated",
                True,
            ),
            Case(f"{t}-corrupt", _single(f"{t}-corrupt", codec, lambda ls, c=codec: corrupt_log(ls, c)), "corrupt", True),
            Case(
                f"{t}-lying",
                # plain: a zstd log without its extension; a codec: text named as that codec
                _single(f"{t}-lying", codec, lambda ls, c=codec: encode(ls, "zstd") if c is None else LYING),
                "lying",
            ),
            Case(
                f"{t}-other-codec",  # a real log of another codec under this one's name
                _single(f"{t}-other-codec", codec, lambda ls, c=codec: encode(ls, CODECS[CODECS.index(c) - 1])),
                "other-codec",
            ),
            Case(f"{t}-empty", _single(f"{t}-empty", codec, lambda ls: b""), None),
            Case(f"{t}-directory", _directory(f"{t}-directory", codec), None),
            Case(f"{t}-unreadable", _single(f"{t}-unreadable", codec, lambda ls, c=codec: encode(ls, c), mode=0), "unreadable"),
            Case(f"{t}-rolling-corrupt-part", _rolling(f"{t}-rolling-corrupt-part", codec, "corrupt"), "events_2_", True),
        ]
    for bad in ("truncated", "lying", "empty", "directory", "unreadable"):  # the default codec of rolling logs, every way a part can be bad
        cases.append(
            Case(
                f"zstd-rolling-{bad}-part", _rolling(f"zstd-rolling-{bad}-part", "zstd", bad), None if bad == "empty" else "events_2_", True
            )
        )
    cases.append(Case("zstd-inprogress-cut", _inprogress, "inprogress-cut", True))
    cases.append(Case("plain-deep-lines", _deep_lines, None, True))
    for kind in ("missing", "fifo", "dangling-link", "unsupported-codec", "nul-bytes", "rolling-empty-folder", "rolling-unreadable-folder"):
        cases.append(Case(kind, _odd(kind), None if kind == "rolling-empty-folder" else _app(kind)))
    return cases


EVENT_LOG_CASES = {c.name: c for c in event_log_cases()}


# --- the command runs ---------------------------------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    seconds: float = 0.0

    @property
    def text(self) -> str:
        return self.out + self.err


def unprivileged(args: list[str]) -> list[str]:
    """``args`` without root's right to read anything (a user namespace drops it), under the memory limit."""
    from test_hostile import unprivileged as drop

    capped = ["prlimit", f"--as={MEMORY_LIMIT}", *args] if shutil.which("prlimit") else args
    return drop(capped)


def command(args: list[str], cwd: str, timeout: float = 240) -> Outcome:
    started = time.monotonic()
    proc = subprocess.run(
        unprivileged([sys.executable, "-m", "spark_state_observer.cli", *args]),
        capture_output=True,
        stdin=subprocess.DEVNULL,  # a server on standard input (mcp) ends at its end
        text=True,
        errors="replace",
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    return Outcome(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


@dataclass(frozen=True)
class Command:
    """A command of the registry: its arguments for one input, its documented exit codes, and whether its
    output names what it could not read (``backtest`` says it in its report, which needs Prometheus)."""

    corpus: str  # event_log, history, checkpoint
    args: Callable[[str, Fixtures], list[str]]
    codes: frozenset[int]
    names_problems: bool = True


@dataclass
class Fixtures:
    """What the commands need besides the hostile input: a good history and checkpoint, a scratch folder."""

    root: Path
    history: str
    checkpoint: str
    query_id: str


COMMANDS: dict[str, Command] = {
    "replay": Command("event_log", lambda p, f: ["replay", p], frozenset({0, 1, 2})),
    # backtest replays the logs (log identity, ordering, the recording) before it needs Prometheus; a promtool
    # that is not there ends it right after, the same on every machine, and keeps Prometheus out of the corpus' cost
    "backtest": Command(
        "event_log", lambda p, f: ["backtest", p, "--promtool", str(f.root / "no-promtool")], frozenset({0, 2}), names_problems=False
    ),
    "size --from-log": Command("event_log", lambda p, f: ["size", "--from-log", p], frozenset({0, 2})),
    "inspect": Command("checkpoint", lambda p, f: ["inspect", p], frozenset({0, 2})),
    "inspect --history": Command("history", lambda p, f: ["inspect", f.checkpoint, "--history", p], frozenset({0, 2})),
    "size --from-history": Command("history", lambda p, f: ["size", "--from-history", p], frozenset({0, 2})),
    "retire": Command("history", lambda p, f: ["retire", f.query_id, "--history", p], frozenset({1, 2})),
    # the MCP server checks its history at start; with standard input closed it then ends (its answers read through
    # the history loaders of the library corpus below, and test_mcp.py sends it hostile arguments)
    "mcp": Command("history", lambda p, f: ["mcp", "--history", p], frozenset({0, 2})),
}
# ``watch`` reads the whole event-log corpus in one process: test_watch_follows_the_good_and_counts_the_hostile
WATCH = "watch"
# commands that read no data, and where the data the others read is covered instead
NO_DATA_COMMANDS = {
    "demo": "runs its own pipeline on data it generates (its --checkpoint is written, not read)",
    "run": "execs the user's command with the boot folder on PYTHONPATH; reads nothing",
    "metrics": "prints the metric reference from the catalog",
    "settings": "prints the settings reference",
    "mixin": "reads a configuration, not data: its hostile configurations are test_hostile_offline.py's",
    "ui": "execs Streamlit over the browser's loaders, which are in the library corpus below (BROWSER_LOADERS)",
}


# --- fixtures -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fixtures, dict[str, Path], dict[str, Path], dict[str, Path]]]:
    root = tmp_path_factory.mktemp("hostile-entry-points")
    root.chmod(0o755)  # the unprivileged runs pass through it
    fixtures = good_fixtures(root)
    logs = root / "logs"
    logs.mkdir()
    event_logs = {name: case.build(logs) for name, case in EVENT_LOG_CASES.items()}
    histories = build_histories(root / "histories", fixtures.history)
    checkpoints = build_checkpoints(root / "checkpoints")
    yield fixtures, event_logs, histories, checkpoints
    for path in root.rglob("*"):  # let pytest remove what was made unreadable
        if not path.is_symlink():
            path.chmod(0o755)


def good_fixtures(root: Path) -> Fixtures:
    from test_hostile import base_checkpoint

    from conftest import eventlog_dir, fixture_runs
    from spark_state_observer.offline.replay import replay

    history = str(root / "good.db")
    run = fixture_runs("rocksdb_restart")[0]
    replay([eventlog_dir(run)], history=history)
    from spark_state_observer.history.loaders import load_queries

    query_id = str(load_queries(history).query_id.iloc[0])
    checkpoint = base_checkpoint(root / "ck")
    return Fixtures(root, history, str(checkpoint), query_id)


@pytest.fixture(scope="module")
def runs(corpus: Any) -> Callable[[str], dict[str, Outcome]]:
    """Each command over its whole corpus, three runs at a time, once per module."""
    fixtures, event_logs, histories, checkpoints = corpus
    inputs = {"event_log": event_logs, "history": histories, "checkpoint": checkpoints}
    done: dict[str, dict[str, Outcome]] = {}

    def outcomes(name: str) -> dict[str, Outcome]:
        if name not in done:
            spec = COMMANDS[name]
            cases = inputs[spec.corpus]
            with concurrent.futures.ThreadPoolExecutor(3) as pool:
                futures = {case: pool.submit(command, spec.args(str(path), fixtures), str(fixtures.root)) for case, path in cases.items()}
                done[name] = {case: f.result() for case, f in futures.items()}
        return done[name]

    return outcomes


def command_cases() -> list[tuple[str, str]]:
    corpora = {"event_log": list(EVENT_LOG_CASES), "history": list(HISTORY_CASES), "checkpoint": checkpoint_case_names()}
    return [(name, case) for name, spec in COMMANDS.items() for case in corpora[spec.corpus]]


def check_command(name: str, case: str, outcome: Outcome, names: str | None) -> None:
    spec = COMMANDS[name]
    shown = (
        f"{name} on {case}: exit {outcome.code} after {outcome.seconds:.1f} s\nstdout: {outcome.out[-1500:]}\nstderr: {outcome.err[-3000:]}"
    )
    assert "Traceback" not in outcome.err, shown
    assert outcome.code in spec.codes, shown
    if outcome.code != 0:
        assert outcome.err.strip(), shown  # an error exit says why
    if names and spec.names_problems:
        assert names in outcome.text, shown


# --- the history corpus -------------------------------------------------------------------------------------

HISTORY_CASES: dict[str, str | None] = {  # case -> what a clear message names (None: an empty history is no error)
    "missing": "missing",
    "empty-file": None,
    "text": "text",
    "zstd-of-a-history": "zstd-of-a-history",
    "lying-zstd": "lying-zstd",
    "truncated": "truncated",
    "corrupt-pages": "corrupt-pages",
    "directory": "directory",
    "unreadable": "unreadable",
    "foreign-sqlite": "foreign-sqlite",
    "hostile-rows": None,  # the right tables holding values of the wrong kinds: read as far as they go
    "newer-schema": None,  # written by a later observer: read as far as its tables go; retire says to upgrade
}


def build_histories(folder: Path, good: str) -> dict[str, Path]:
    folder.mkdir()
    with sqlite3.connect(good) as conn:  # one file: the write-ahead log folded in
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = Path(good).read_bytes()
    out: dict[str, Path] = {}
    for case in HISTORY_CASES:
        path = folder / f"{case}.db"
        out[case] = path
        if case == "missing":
            continue
        if case == "directory":
            path.mkdir()
            continue
        payload = {
            "empty-file": b"",
            "text": b"this is not a history at all\n" * 100,
            "zstd-of-a-history": zstandard.ZstdCompressor().compress(data),
            "lying-zstd": LYING,
            "truncated": data[: len(data) // 3],
            "corrupt-pages": corrupt_pages(data),
            "unreadable": data,
            "foreign-sqlite": b"",
            "hostile-rows": data,
            "newer-schema": data,
        }[case]
        path.write_bytes(payload)
        if case == "unreadable":
            path.chmod(0)
        elif case == "foreign-sqlite":
            with sqlite3.connect(path) as conn:
                conn.execute("CREATE TABLE batches (x BLOB)")
                conn.execute("INSERT INTO batches VALUES (x'00ff')")
        elif case == "hostile-rows":
            hostile_rows(path)
        elif case == "newer-schema":
            with sqlite3.connect(path) as conn:
                conn.execute("PRAGMA user_version = 999")
    return out


def corrupt_pages(data: bytes, page: int = 32768) -> bytes:
    """A SQLite file whose first page (the header and schema) is intact and every other page's b-tree header broken."""
    out = bytearray(data)
    for at in range(page, len(out), page):
        out[at : at + 64] = bytes(b ^ 0xA5 for b in out[at : at + 64])
    return bytes(out)


def hostile_rows(path: Path) -> None:
    """Every text column a reader parses holds what no writer wrote: broken JSON, markup, deep nesting;
    numbers hold text (SQLite keeps a value of any type in any column)."""
    with sqlite3.connect(path) as conn:
        for table, column in (("batches", "progress"), ("events", "attributes"), ("queries", "app_labels")):
            conn.execute(f"UPDATE {table} SET {column} = ?", ("{{{" + "[" * 50_000,))
        conn.execute("UPDATE batches SET ts = 'yesterday' WHERE rowid % 2 = 0")
        conn.execute("UPDATE events SET ts = 'x', kind = '<b>' WHERE rowid % 3 = 0")
        conn.execute("UPDATE runs SET started = 'soon'")


# --- the checkpoint corpus --------------------------------------------------------------------------------------


def checkpoint_case_names() -> list[str]:
    from test_hostile import CHECKPOINT_MUTATIONS

    return [*CHECKPOINT_FILE_CASES, *(f"mutation: {n}" for n, _ in CHECKPOINT_MUTATIONS if "bomb" not in n)]


CHECKPOINT_FILE_CASES: dict[str, str | None] = {
    "missing": "missing",
    "a file": "a-file",
    "a lying zstd file": "lying.zstd",
    "empty folder": "empty-folder",
    "unreadable folder": "unreadable-folder",
    "fifo": "fifo",
}


def build_checkpoints(folder: Path) -> dict[str, Path]:
    """Checkpoints that are not one, then the inspector's mutations (``test_hostile.CHECKPOINT_MUTATIONS``,
    its bombs left to its memory test) through the command."""
    from test_hostile import CHECKPOINT_MUTATIONS, base_checkpoint

    folder.mkdir()
    out = {
        "missing": folder / "missing",
        "a file": folder / "a-file",
        "a lying zstd file": folder / "lying.zstd",
        "empty folder": folder / "empty-folder",
        "unreadable folder": folder / "unreadable-folder",
        "fifo": folder / "fifo",
    }
    out["a file"].write_bytes(encode(LINES[:20], "zstd"))
    out["a lying zstd file"].write_bytes(LYING)
    out["empty folder"].mkdir()
    base_checkpoint(out["unreadable folder"]).chmod(0)
    os.mkfifo(out["fifo"])
    for n, (name, mutate) in enumerate((n, f) for n, f in CHECKPOINT_MUTATIONS if "bomb" not in n):
        ck = base_checkpoint(folder / f"mutation{n}")
        mutate(ck)
        out[f"mutation: {name}"] = ck
    return out


# --- the library readers ------------------------------------------------------------------------------------


def _event_log_readers() -> dict[str, Callable[[str], Any]]:
    from spark_state_observer.offline import sizing, task_events
    from spark_state_observer.offline.backtest.history import query_runs
    from spark_state_observer.offline.backtest.run import in_time_order
    from spark_state_observer.offline.eventlog import read_records
    from spark_state_observer.offline.log_identity import application_of
    from spark_state_observer.offline.replay import replay
    from spark_state_observer.settings import Settings

    return {
        "eventlog.read_records": lambda p: list(read_records([p])),
        "log_identity.application_of": lambda p: application_of([p]),
        "task_events.replay_placement": lambda p: task_events.replay_placement([p]),
        "task_events.read_events": lambda p: list(task_events.read_events([p])),
        "backtest.history.query_runs": lambda p: query_runs([p]),
        "backtest.run.in_time_order": lambda p: in_time_order([p]),
        "sizing.from_event_log": lambda p: sizing.from_event_log([p]),
        "replay.replay": lambda p: replay([p], settings=Settings(http_enabled=False)),
    }


def _quiet_streamlit() -> None:
    """Streamlit warns, once per cached loader, that it runs without its server: true here, and noise."""
    import streamlit.logger

    streamlit.logger.set_log_level("error")


def _history_readers(query_id: str, checkpoint: str) -> dict[str, Callable[[str], Any]]:
    from contextlib import closing

    _quiet_streamlit()
    from spark_state_observer.browser import data
    from spark_state_observer.history import browse, loaders, query_status
    from spark_state_observer.history.backend import open_backend
    from spark_state_observer.offline.checkpoint.restore import rates_from_history
    from spark_state_observer.offline.sizing import from_history

    q = query_id

    def status(fn: Callable[..., Any], *args: Any, readonly: bool = True) -> Callable[[str], Any]:
        def call(p: str) -> Any:
            with closing(open_backend(p, readonly=readonly)) as backend:
                return fn(backend, *args)

        return call

    def browser(fn: Callable[..., Any], *args: Any) -> Callable[[str], Any]:
        return lambda p: fn(p, data.token(p), *args)

    return {
        "loaders.load_queries": lambda p: loaders.load_queries(p),
        "loaders.load_runs": lambda p: loaders.load_runs(p, q),
        "loaders.load_batches": lambda p: loaders.load_batches(p, q),
        "loaders.load_batch": lambda p: loaders.load_batch(p, q, "r", 1),
        "loaders.load_operators": lambda p: loaders.load_operators(p, q),
        "loaders.load_partitions": lambda p: loaders.load_partitions(p, q),
        "loaders.load_placements": lambda p: loaders.load_placements(p, q),
        "loaders.load_events": lambda p: loaders.load_events(p, q),
        "loaders.load_span": lambda p: loaders.load_span(p, q),
        "loaders.load_recent_batches": lambda p: loaders.load_recent_batches(p, q),
        "loaders.load_batch_series": lambda p: loaders.load_batch_series(p, q, None, None),
        "loaders.load_operator_series": lambda p: loaders.load_operator_series(p, q, None, None),
        "loaders.load_partition_lag": lambda p: loaders.load_partition_lag(p, q, None, None),
        "loaders.load_progress_tail": lambda p: loaders.load_progress_tail(p, q),
        "loaders.load_recent_runs": lambda p: loaders.load_recent_runs(p, q),
        "browse.columns": lambda p: browse.columns(p, "queries"),
        "browse.load_query_apps": lambda p: browse.load_query_apps(p),
        "browse.load_lasting_states": lambda p: browse.load_lasting_states(p),
        "browse.load_recent_events": lambda p: browse.load_recent_events(p, q),
        "browse.load_run_stats": lambda p: browse.load_run_stats(p, q),
        "browse.load_events_of": lambda p: browse.load_events_of(p, q, ("restore", "query_terminated")),
        "browse.load_run_progress": lambda p: browse.load_run_progress(p, q, "r"),
        "query_status.load": status(query_status.load),
        "query_status.retire": status(query_status.retire, q, readonly=False),
        "data.token": lambda p: data.token(p),
        "data.queries": browser(data.queries),
        "data.lasting_states": browser(data.lasting_states),
        "data.retire": lambda p: data.retire(p, q),
        "data.runs": browser(data.runs, q),
        "data.span": browser(data.span, q),
        "data.recent_batches": browser(data.recent_batches, q),
        "data.batch_series": browser(data.batch_series, q, None, None),
        "data.operator_series": browser(data.operator_series, q, None, None),
        "data.partition_lag": browser(data.partition_lag, q, None, None),
        "data.placements": browser(data.placements, q, None, None),
        "data.events": browser(data.events, q, None, None),
        "data.progress_tail": browser(data.progress_tail, q, None),
        "data.batch": lambda p: data.batch(p, q, "r", 1),
        "data.query_apps": browser(data.query_apps),
        "data.run_stats": browser(data.run_stats, q),
        "data.recent_events": browser(data.recent_events, q),
        "data.events_of": browser(data.events_of, q, ("restore",)),
        "data.newest_kafka_lag": browser(data.newest_kafka_lag, q),
        "data.kafka_restart_of": browser(data.kafka_restart_of, q, "r"),
        "data.facts": browser(data.facts, q, 2e9),
        "data.query_verdicts": browser(data.query_verdicts, q, 2e9),
        "data.checkpoint_report[history]": lambda p: data.checkpoint_report(checkpoint, 0.0, p, data.token(p)),
        "restore.rates_from_history": lambda p: rates_from_history(p, q),
        "sizing.from_history": lambda p: from_history(p),
    }


def _checkpoint_readers(good_history: str) -> dict[str, Callable[[str], Any]]:
    _quiet_streamlit()
    from spark_state_observer.browser import data

    return {
        "data.checkpoints_under": lambda p: data.checkpoints_under((p,)),
        "data.checkpoint_version": lambda p: data.checkpoint_version(p),
        "data.checkpoint_report": lambda p: data.checkpoint_report(p, 0.0, good_history, data.token(good_history)),
    }


# the errors each kind of library reader documents; anything else raised is a defect
def _allowed() -> dict[str, tuple[type[BaseException], ...]]:
    from spark_state_observer.browser.data import HistoryUnavailable
    from spark_state_observer.history.backend import HistoryError
    from spark_state_observer.offline.checkpoint.report import CheckpointError
    from spark_state_observer.offline.eventlog import EventLogError

    return {"event_log": (EventLogError,), "history": (HistoryError, HistoryUnavailable), "checkpoint": (CheckpointError,)}


def library_main(spec_path: str, out_path: str) -> None:
    """Run in its own unprivileged process: every library reader over every case of its corpus; one line each."""
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    with open(spec_path) as f:
        spec = json.load(f)
    readers = {
        "event_log": _event_log_readers(),
        "history": _history_readers(spec["query_id"], spec["checkpoint"]),
        "checkpoint": _checkpoint_readers(spec["history"]),
    }
    allowed = _allowed()
    with open(out_path, "w") as out:
        for corpus, cases in spec["inputs"].items():
            for reader, fn in readers[corpus].items():
                for case, path in cases.items():
                    try:
                        fn(path)
                        result = "ok"
                    except allowed[corpus] as exc:
                        result = f"error: {type(exc).__name__}: {exc}"
                    except BaseException:
                        result = "raised: " + traceback.format_exc(limit=8)
                    out.write(json.dumps({"corpus": corpus, "reader": reader, "case": case, "result": result}) + "\n")
                    out.flush()


@pytest.fixture(scope="module")
def library(corpus: Any) -> dict[tuple[str, str, str], str]:
    fixtures, event_logs, histories, checkpoints = corpus
    spec = fixtures.root / "library.json"
    out = fixtures.root / "library.out"
    inputs = {
        "event_log": {k: str(v) for k, v in event_logs.items()},
        "history": {k: str(v) for k, v in histories.items()},
        "checkpoint": {k: str(v) for k, v in checkpoints.items() if k != "fifo"},  # the inspector's FIFO cases are the command's
    }
    spec.write_text(
        json.dumps({"inputs": inputs, "query_id": fixtures.query_id, "checkpoint": fixtures.checkpoint, "history": fixtures.history})
    )
    out.touch()
    out.chmod(0o666)
    paths = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "support"), ROOT]
    script = f"import sys; sys.path[:0] = {paths!r}; import test_hostile_entry_points as t; t.library_main(sys.argv[1], sys.argv[2])"
    proc = subprocess.run(
        unprivileged([sys.executable, "-c", script, str(spec), str(out)]),
        capture_output=True,
        text=True,
        errors="replace",
        timeout=400,
        cwd=str(fixtures.root),
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    results = {}
    for line in out.read_text().splitlines():
        row = json.loads(line)
        results[(row["corpus"], row["reader"], row["case"])] = row["result"]
    return results


LIBRARY_READERS = {
    "event_log": list(_event_log_readers()),
    "history": list(_history_readers("q", "ck")),
    "checkpoint": list(_checkpoint_readers("h")),
}


def library_cases() -> list[tuple[str, str]]:
    return [(corpus, reader) for corpus, readers in LIBRARY_READERS.items() for reader in readers]


# --- the tests ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,case", command_cases(), ids=[f"{n}[{c}]" for n, c in command_cases()])
def test_a_command_says_what_it_cannot_read(name: str, case: str, runs: Callable[[str], dict[str, Outcome]]) -> None:
    outcome = runs(name)[case]
    spec = COMMANDS[name]
    if spec.corpus == "event_log":
        names = EVENT_LOG_CASES[case].names
    elif spec.corpus == "history":
        names = HISTORY_CASES[case]
    else:
        names = CHECKPOINT_FILE_CASES.get(case)
    check_command(name, case, outcome, names)
    if name == "replay" and EVENT_LOG_CASES[case].events_before:  # what came before the damage is read
        assert outcome.code == 0 and not outcome.out.startswith("0 events"), outcome.out


@pytest.mark.parametrize("corpus_name,reader", library_cases(), ids=[f"{c}:{r}" for c, r in library_cases()])
def test_a_library_reader_returns_or_raises_its_own_error(corpus_name: str, reader: str, library: dict[tuple[str, str, str], str]) -> None:
    results = {case: r for (c, rd, case), r in library.items() if c == corpus_name and rd == reader}
    assert results, (corpus_name, reader)
    raised = {case: r for case, r in results.items() if r.startswith("raised")}
    assert not raised, "\n".join(f"--- {case}\n{r}" for case, r in raised.items())
    if corpus_name == "event_log":  # only a path that does not exist is an error for a whole read
        errors = {case for case, r in results.items() if r.startswith("error")}
        assert errors <= {"missing"}, {case: results[case] for case in errors}


def test_watch_follows_the_good_and_counts_the_hostile(corpus: Any) -> None:
    """One watcher over the whole corpus (and folders that are a file, unreadable or missing) beside a good
    application: it serves the good one's batches, counts the problems, stops on SIGTERM, no traceback."""
    fixtures, _, _, _ = corpus
    good = fixtures.root / "watch-good"
    good.mkdir()
    (good / "app-good.zstd").write_bytes(encode(renamed(LINES, "good", "app-good"), "zstd"))
    a_file = fixtures.root / "watch-a-file"
    a_file.write_bytes(LYING)
    locked = fixtures.root / "watch-locked"
    locked.mkdir()
    locked.chmod(0)
    dirs = [str(fixtures.root / "logs"), str(good), str(a_file), str(locked), str(fixtures.root / "watch-missing")]
    port = free_port()
    err_path = fixtures.root / "watch.err"
    cmd = unprivileged(
        [sys.executable, "-m", "spark_state_observer.cli", "watch", *dirs, "--port", str(port), "--poll-interval", "0.3", "--read-finished"]
    )
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=str(fixtures.root), env={**os.environ, "PYTHONPATH": ROOT})
    expected = sum(1 for line in LINES if b"QueryProgressEvent" in line[:120])
    try:
        series = scrape_until(port, proc, err_path, lambda s: s.get(("spark_streaming_batches_total", (("app", "good"),)), 0) >= expected)
        time.sleep(1.0)  # a few more polls over the same corpus
        series = scrape_until(port, proc, err_path, lambda s: True)
        problems = {dict(labels)["kind"]: v for (name, labels), v in series.items() if name == "spark_state_observer_watch_problems_total"}
        assert sum(problems.values()) >= 10 and {"corrupt", "unreadable"} <= set(problems), problems
        with open(f"/proc/{proc.pid}/status") as f:  # the watcher itself: unshare and prlimit exec into it
            peak = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmHWM:"))
        print(f"\nwatch over the corpus: problems {problems}, peak RSS {peak / (1 << 20):.0f} MiB")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    stderr = err_path.read_text(errors="replace")
    assert code == 0 and "Traceback" not in stderr, stderr[-4000:]
    assert "not a folder" in stderr  # the file and the missing folder given as folders are said at once
    # every bad file is named (to a watcher, a log that is not there is nothing, and an in-progress log cut
    # inside a frame is one still being written: it waits for the rest)
    quiet = {"missing", "zstd-inprogress-cut"}
    unnamed = [c.name for c in EVENT_LOG_CASES.values() if c.names and c.name not in quiet and _app(c.name) not in stderr]
    assert not unnamed, (unnamed, stderr[-4000:])


def scrape_until(
    port: int, proc: subprocess.Popen[bytes], err_path: Path, check: Callable[[dict[tuple[str, tuple[tuple[str, str], ...]], float]], bool]
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    deadline = time.monotonic() + 120
    series: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    while time.monotonic() < deadline:
        assert proc.poll() is None, err_path.read_text(errors="replace")[-4000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                text = r.read().decode()
            series = {}
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    keep = tuple(sorted((k, v) for k, v in s.labels.items() if k in ("app", "kind")))
                    series[(s.name, keep)] = series.get((s.name, keep), 0) + s.value
            if check(series):
                return series
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail(f"timed out; watcher log:\n{err_path.read_text(errors='replace')[-3000:]}")


# --- every entry point joins --------------------------------------------------------------------------------

# the public functions of the browser's data module and the history readers that read no data, and why
NO_DATA_LOADERS = {
    "spark_state_observer.browser.data": {
        # the state contents, read through Spark's own state reader in a local session (tens of seconds to start):
        # what Spark's reader makes of a hostile checkpoint is Spark's; the browser shows its error
        "spark_session": "starts (or reuses) a Spark session; reads nothing",
        "state_operators": "Spark's state metadata reader",
        "state_schema": "Spark's state reader",
        "state_rows": "Spark's state reader",
        "state_sample": "Spark's state reader",
        "restarted_run": "a pure function over events already read (the newest restart's run); reads nothing",
    },
    "spark_state_observer.history.query_status": {
        "save": "writes the lasting statuses (the writer's own tests)",
        "delete_before": "writes: deletes expired statuses",
        "bring_back": "a pure function over rows already read (a since ahead of the clock becomes now); reads nothing",
    },
    "spark_state_observer.history.loaders": {"frame_of": "makes a frame of rows it is given; reads nothing itself"},
    "spark_state_observer.history.browse": {},
}


def public_functions(module: str) -> set[str]:
    """The top-level public ``def``s of a module, read from its source (Streamlit's cache wraps the loaders)."""
    path = os.path.join(ROOT, *module.split(".")) + ".py"
    with open(path) as f:
        tree = ast.parse(f.read())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}


def subcommands() -> set[str]:
    from spark_state_observer.cli.main import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return set(sub.choices)  # type: ignore[attr-defined]


def test_every_entry_point_that_reads_data_is_in_the_corpus() -> None:
    """A new command or a new public loader fails here until it joins the registry (or says it reads no data)."""
    joined = {name.split()[0] for name in COMMANDS} | {WATCH}
    missing = subcommands() - joined - set(NO_DATA_COMMANDS)
    assert not missing, f"commands neither in COMMANDS nor in NO_DATA_COMMANDS: {sorted(missing)}"
    assert not (joined & set(NO_DATA_COMMANDS)) and set(NO_DATA_COMMANDS) <= subcommands()
    readers = {r for rs in LIBRARY_READERS.values() for r in rs}
    for module, exempt in NO_DATA_LOADERS.items():
        short = module.rsplit(".", 1)[1]
        missing = {f for f in public_functions(module) if f"{short}.{f}" not in readers and f not in exempt}
        assert not missing, f"public loaders of {module} neither in LIBRARY_READERS nor in NO_DATA_LOADERS: {sorted(missing)}"
        assert set(exempt) <= public_functions(module), f"{module}: NO_DATA_LOADERS names functions that are gone"


def test_corpus_size_per_entry_point(capsys: pytest.CaptureFixture[str]) -> None:
    """The corpus' size per entry point (printed with ``-s``): every codec and every bad-file kind is in it."""
    sizes = {name: len([c for n, c in command_cases() if n == name]) for name in COMMANDS}
    sizes[WATCH] = len(EVENT_LOG_CASES) + 3  # and three folders that are not (a file, unreadable, missing)
    for corpus_name, readers in LIBRARY_READERS.items():
        n = {"event_log": len(EVENT_LOG_CASES), "history": len(HISTORY_CASES), "checkpoint": len(checkpoint_case_names()) - 1}[corpus_name]
        for reader in readers:
            sizes[reader] = n
    with capsys.disabled():
        print("\nhostile corpus per entry point: " + ", ".join(f"{k} {v}" for k, v in sizes.items()) + f"; total {sum(sizes.values())}")
    for codec in CODECS:
        kinds = ("truncated", "corrupt", "lying", "other-codec", "empty", "directory", "unreadable", "rolling-corrupt-part")
        assert {f"{tag(codec)}-{k}" for k in kinds} <= set(EVENT_LOG_CASES)
