"""Follow every Spark application in event-log folders while it runs: the capture side of ``watch``.

Why a watcher: platform teams cannot edit every job to attach a listener, but every Spark application
already writes its listener events to ``spark.eventLog.dir`` (the folder the History Server reads). One
process following that folder observes all of them. This module only *captures*: for every application
it yields the application's identity and its raw events (``AppEvents``); the pipeline that turns them
into metrics and signals is the one replay uses.

How it stays correct and cheap:

- **Discovery by polling** (``poll_interval``): one ``scandir`` of each folder plus one ``stat`` of each
  followed file per poll. Single-file logs (``<appId>[.<codec>][.inprogress]``) and rolling folders
  (``eventlog_v2_<appId>/events_<N>_<appId>[.<codec>]`` with an ``appstatus_<appId>[.inprogress]`` marker)
  are both followed; a rolling log moves to the next ``events_<N>_`` file once it exists (Spark closes a
  file before it opens the next). Files are ordered by their index, never by modification time, and
  every timeout runs on this process's monotonic clock: clock skew between the writers and the watcher
  (NFS, containers) changes no timeout. A part listed after a later one (a listing taken while Spark
  created them) is waited for: the watcher lists again before it moves past a gap in the numbers.
- **Clock skew**: a driver's clock off from the watcher's would make its batches look old (a stall) or
  from the future. Per application, after a read that follows a read to the file's end (so the delay
  is at most a poll), the watcher's clock minus the newest event time read is a sample; the smallest of
  the last ``_SKEW_SAMPLES`` is the skew. Beyond tolerance it is counted, exported and handed on
  (``AppEvents.clock_skew``): the pipeline judges ages and stalls on the application's clock, whatever
  the skew (a driver days off, or an old log copied in now: its stalls are judged on its own times).
  Until the skew is known (``AppEvents.clock_known``: enough samples, or a log quiet for longer than a
  delivery can take, so no sample can come) nothing is judged on the clock: no stall storm at the start.
- **Incremental tailing**: each file keeps its raw offset and, while a compressed unit is incomplete,
  its decoder (``observer.fleet.codec_tail``); a poll decodes only the bytes added since the last one.
- **Cheap filtering**: lines are selected by their first bytes (``observer.fleet.line_filter``); only
  wanted event types are JSON-parsed. Task and SQL events (``STREAMING_ONLY_EVENTS``) are parsed only
  once an application has shown a streaming query, so a batch application costs the decompression and
  a substring scan, nothing more. Types in ``raw_events`` are not parsed at all: their lines (those
  ``raw_keep`` accepts) go to the consumer as bytes, which decodes the few fields it reads (``watch``
  does so for placement's task, job and SQL events).
- **Identity**: ``SparkListenerApplicationStart`` gives the application name (the stable identity the
  series are labelled by) and the volatile id and attempt; selected Spark properties can be taken from
  ``SparkListenerEnvironmentUpdate`` (``identity_properties``), parsed only when asked for. Every identity
  string (and the log's file name, on its way to a label) goes through ``bounded.clean_identity`` where
  it is taken: cut to 200 characters, lone surrogates and control characters replaced.
- **Restart safety**: ``commit()`` (called by ``run`` after each callback, and by the next ``poll``)
  writes, atomically, per application the current file, a raw offset where a fresh decoder can start,
  how many decoded bytes and lines after it were already delivered, and the last batch id per query run.
  A restarted watcher seeks there and skips what was delivered; a progress event whose (query id, run
  id, batch id) is not newer than the last delivered one is dropped as a second guard. With
  ``replay_on_resume`` the delivered events are instead read again and marked ``replayed`` so an
  in-memory pipeline can rebuild its state without counting them twice in a durable sink.
- **Lifecycle**: an application finished (final ``appstatus`` marker, a log renamed from ``.inprogress``,
  or ``SparkListenerApplicationEnd``) and read to its end is forgotten ``grace_seconds`` later; one that
  stops growing without an end is reported ``lost`` after ``lost_after_seconds`` and forgotten after a
  further grace period. Logs already finished when the watcher first starts are not read (a History
  Server folder holds thousands) unless ``read_finished_at_start``. Memory is bounded: at most
  ``max_apps`` applications, per application a bounded partial line, a bounded set of query runs and
  a bounded backlog of events held until the identity is known; each poll decodes at most
  ``max_decoded_bytes_per_poll`` in all (the rest waits for the next poll, ``backlog`` says so).
- **Sharding**: ``shard=(K, N)`` keeps the applications whose log name (the file or folder name without
  ``eventlog_v2_``, ``.inprogress`` or codec suffix, i.e. the application id and attempt) has a CRC-32
  equal to K modulo N; N watchers with K = 0..N-1 split a folder disjointly and completely.
- **Replaced logs**: a file keeps its inode, never shrinks and keeps its first bytes while Spark writes it;
  one that does not (renamed over, truncated, rewritten in place) is counted (``replaced``), its
  application forgotten, and the log read again from its start as a new one at the next listing.
- **Symbolic links** are followed only when their target stays inside a watched folder (``follow_symlinks``
  to follow them anywhere); others are counted (``symlink``) and never opened.
- **Bad input** never raises out of ``poll``: truncated or corrupt compressed data, unreadable files,
  vanished folders, symlink loops, FIFOs and other non-regular files (never opened: files are opened
  non-blocking and checked with ``fstat``), over-long lines, invalid JSON and two running applications
  with the same name each give a message and a counted problem (``WatchCounts.problems`` and per
  application ``AppEvents.problems``); the other applications go on. Lines are parsed by the bounded
  parser (``bounded.loads``: an item bomb is refused before parsing, a nesting bomb fails cleanly), each
  read decodes at most the poll's budget (a decompression bomb costs no more memory than a real log),
  and a file decoding to over a thousand times its size is called ``inflated`` and skipped. A decode failure is retried once
  from the last boundary before the file is called corrupt (a network file system can show a grown size
  before the bytes), and a log is believed gone only when two listings agree (a rename in between).
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import threading
import time
import zlib
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from observer.capture.codecs import CODECS, DEFAULT_MAX_LINE_BYTES, EventLogError
from observer.fleet.codec_tail import TailDecoder, tail_decoder
from observer.fleet.line_filter import LineFilter, line_pattern
from observer.fleet.watch_state import StateFileError, load_state, save_state
from observer.model.bounded import JsonTooLarge, clean_identity, clean_text, loads
from observer.model.capacity import relevant
from observer.model.parse import parse_timestamp
from observer.model.spark_events import (
    APP_END,
    APP_START,
    ENVIRONMENT,
    EXECUTOR_ADDED,
    EXECUTOR_REMOVED,
    JOB_START,
    LOG_START,
    QUERY_IDLE,
    QUERY_PROGRESS,
    QUERY_STARTED,
    SQL_ADAPTIVE,
    SQL_START,
    STREAMING_EVENTS,
    TASK_END,
)

log = logging.getLogger(__name__)

# what the pipeline uses today
PIPELINE_EVENTS = STREAMING_EVENTS | {APP_START, APP_END, EXECUTOR_ADDED, EXECUTOR_REMOVED}
# what a per-partition placement view needs in addition
PLACEMENT_EVENTS = frozenset({TASK_END, JOB_START, SQL_START, SQL_ADAPTIVE})
# never parsed before the application has shown a streaming query
STREAMING_ONLY_EVENTS = PLACEMENT_EVENTS
DEFAULT_WANTED_EVENTS = PIPELINE_EVENTS | PLACEMENT_EVENTS

# problem kinds (the label values of spark_state_observer_watch_problems_total)
PROBLEM_KINDS = (
    "unreadable",
    "not_regular",
    "vanished",
    "corrupt",
    "truncated",
    "line_too_long",
    "bad_json",
    "duplicate_name",
    "duplicate_log",
    "no_app_start",
    "clock_skew",
    "replaced",
    "symlink",
    "inflated",
    "too_many_apps",
    "state_file",
    "callback",
)


class RawEvent(NamedTuple):
    """One event as Spark logged it: its type (the ``Event`` field), the parsed object and where it was.

    An event of a type the watcher was asked to hand over unparsed (``raw_events``) has ``line``, the bytes as
    logged, and an empty ``data``: its consumer reads only a few fields of it and decodes those itself."""

    event_type: str
    data: dict[str, Any]
    source: str  # file:line
    replayed: bool = False  # delivered before a restart (``replay_on_resume``)
    line: bytes | None = None  # the logged line, for the types delivered unparsed


@dataclass(frozen=True)
class LoggedApp:
    """An application as its event log tells it (start event, environment, or the watcher's saved state).

    Not the pipeline's identity (``observer.model.identity.AppContext``, which ``observer.fleet.runtime.app_context``
    derives from this): it also holds what only the watcher reads, to admit and configure the application (its Spark
    version, start time, properties and the conf the RocksDB estimate reads), and none of it labels a series or a row.
    ``name`` is the stable identity, ``app_id`` and ``attempt_id`` change per run.
    """

    log_name: str  # application id and attempt, as the log is named (stable for this log)
    name: str
    app_id: str
    attempt_id: str | None = None
    spark_version: str | None = None
    start_time_ms: int | None = None
    properties: tuple[tuple[str, str], ...] = ()
    spark_conf: tuple[tuple[str, str], ...] = ()  # the entries the RocksDB capacity estimate reads (observer.model.capacity)


@dataclass(frozen=True)
class StatusChange:
    """running (first seen, or growing again after lost), finished, lost, forgotten."""

    status: str
    message: str
    at: float  # wall time the watcher noticed it


@dataclass
class AppEvents:
    """What one poll found for one application."""

    log_name: str
    identity: LoggedApp | None  # None until the application-start event has been read
    events: list[RawEvent] = field(default_factory=list)
    status_changes: list[StatusChange] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # messages of the problems found in this poll
    clock_skew: float = 0.0  # seconds the application's clock is behind the watcher's (0 unless measured beyond tolerance)
    clock_known: bool = False  # whether ``clock_skew`` is settled (see the module's docstring): ages may be judged


@dataclass(frozen=True)
class SavedPositions:
    """What the state file holds: each followed log's position, and the logs finished for good."""

    apps: dict[str, Any]
    done: list[str]


@dataclass
class WatchCounts:
    """Running totals for the self-metrics (``observer.metrics.catalog.WATCH_METRICS``)."""

    apps_discovered: int = 0
    apps_forgotten: int = 0
    apps_running: int = 0
    apps_finished: int = 0
    apps_lost: int = 0
    apps_other_shards: int = 0
    read_bytes: int = 0
    decoded_bytes: int = 0
    lines: int = 0
    events_parsed: int = 0
    events_delivered: int = 0
    events_duplicate: int = 0
    clock_skew_seconds: float = 0.0  # the followed application's skew farthest from 0 (positive: its clock behind)
    problems: Counter[str] = field(default_factory=Counter)


_ROLLING_DIR = "eventlog_v2_"
_EVENTS_FILE = re.compile(r"^events_(\d+)_(.+?)(?:\.compact)?$")
_APPSTATUS = "appstatus_"
_INPROGRESS = ".inprogress"
_SUFFIXES = tuple("." + c for c in CODECS) + (".lzf",)
_MAX_HELD_EVENTS = 10_000  # events held while the application start is not yet known
_MAX_RUNS = 1_000  # query runs remembered per application for the duplicate guard
_READ_CHUNK = 1 << 20
_FUTURE_SKEW_SECONDS = 300.0  # a file modified this far in the future means the clocks disagree
_RELIST_EVERY = 10  # polls between listings of a rolling folder whose mtime did not change
_HEAD_BYTES = 4096  # a file's first bytes, compared while it grows: another file moved or copied over it differs
# decoded bytes a file may hold per raw byte (beyond a first 64 MiB) before it is called inflated: Spark's
# logs compress 5-50 times; a few KiB of zstd that decode to gigabytes are a decompression bomb
_MAX_INFLATION = 1000
_INFLATION_ALLOWANCE = 64 << 20
# clock skew: the watcher's clock minus the newest event time read, for reads that follow a caught-up read (so
# the delivery delay is at most a poll); the smallest of the last samples is the skew, acted on beyond tolerance
_SKEW_SAMPLES = 16
_SKEW_MIN_SAMPLES = 3
_SKEW_TOLERANCE_SECONDS = 30.0


def log_name(entry_name: str) -> str:
    """The stable name of a log: application id and attempt, without folder prefix, codec or ``.inprogress``."""
    name = entry_name.removeprefix(_ROLLING_DIR).removesuffix(_INPROGRESS)
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def in_shard(name: str, shard: tuple[int, int] | None) -> bool:
    """Whether the log ``name`` belongs to shard (K, N): CRC-32 of its file-name bytes modulo N equals K.

    The bytes are the name's bytes on disk (``os.fsencode``: UTF-8, with the surrogate escapes of a name that
    is not UTF-8 turned back into its bytes), so such a name hashes like any other instead of raising.
    """
    if shard is None:
        return True
    k, n = shard
    return zlib.crc32(os.fsencode(name)) % n == k


def event_time(event_type: str, data: dict[str, Any]) -> float | None:
    """When a listener would have received an event: a progress's trigger time plus its batch duration,
    a started or idle event's own time; None when Spark logged none (terminated, other types)."""
    if event_type == QUERY_PROGRESS:
        progress = data.get("progress")
        if not isinstance(progress, dict):
            return None
        start = parse_timestamp(progress.get("timestamp"))
        duration = progress.get("batchDuration")
        if start is None:
            return None
        if isinstance(duration, (int, float)) and not isinstance(duration, bool) and 0 <= duration < 1e12:
            return start + duration / 1000.0
        return start
    if event_type in (QUERY_STARTED, QUERY_IDLE):
        return parse_timestamp(data.get("timestamp"))
    return None


def _codec(name: str) -> str | None:
    """The codec a log's name says; ``lzf`` too, which Spark has and the watcher cannot read (reported, not read as text)."""
    base = name.removesuffix(_INPROGRESS).removesuffix(".compact")
    ext = base.rsplit(".", 1)[-1] if "." in base else ""
    return ext if ext in CODECS or ext == "lzf" else None


@dataclass
class _Listing:
    """One log as found in a folder listing."""

    kind: str  # "single" or "rolling"
    path: str  # the file, or the rolling folder
    finished: bool  # single file without .inprogress (rolling: decided from the folder's appstatus marker)
    mtime_ns: int
    first: bool = False  # found in its folder's first successful listing of a watcher without saved state


class _FileTail:
    """Reading position in one event file."""

    def __init__(
        self,
        path: str,
        index: int,
        patterns: dict[bytes, str],
        max_line_bytes: int,
        raw: int = 0,
        decoded: int = 0,
        consumed: int = 0,
        lines: int = 0,
    ) -> None:
        self.path, self.index = path, index
        self.codec = _codec(os.path.basename(path))
        self.raw = raw  # raw offset read up to
        self.decoder: TailDecoder | None = None
        self.resume = (raw, decoded)  # a boundary: raw offset a fresh decoder can start at, decoded offset there
        self.candidates: list[tuple[int, int]] = []  # boundaries past the last complete line
        self.skip = consumed - decoded  # decoded bytes after the boundary that were delivered before a restart
        self.filter = LineFilter(patterns, max_line_bytes, decoded_pos=decoded, lines=lines)
        self.filter.consumed = consumed
        self.size = -1
        self.broken = False  # cannot be read further (corrupt); later files of a rolling log still can
        self.failed_at = -1  # boundary a decode failed after (it is retried once from there)
        self.inode: tuple[int, int] | None = None  # (device, inode) when first opened: another file renamed over it differs
        self.head = b""  # the file's first bytes as read (up to _HEAD_BYTES); known only when read from offset 0

    def resume_point(self) -> tuple[int, int]:
        """(raw, decoded) offsets a fresh decoder can start at, at or before the last complete line."""
        if self.codec is None:  # every offset of a plain file is a boundary
            return self.filter.consumed, self.filter.consumed
        return self.resume

    def position(self) -> dict[str, Any]:
        raw, decoded = self.resume_point()
        return {
            "file": os.path.basename(self.path),
            "index": self.index,
            "raw": raw,
            "decoded": decoded,
            "consumed": self.filter.consumed,
            "lines": self.filter.lines,
        }

    def note_boundary(self, raw: int, decoded: int) -> None:
        self.candidates.append((raw, decoded))
        valid = [c for c in self.candidates if c[1] <= self.filter.consumed]
        if valid:
            self.resume = valid[-1]
            self.candidates = [c for c in self.candidates if c[1] > self.filter.consumed]
        del self.candidates[:-64]

    def rewind(self) -> None:
        """Go back to the last boundary: decode from there again, skipping the lines already delivered."""
        self.decoder = None
        self.raw, decoded = self.resume_point()
        self.skip = self.filter.consumed - decoded
        self.filter.rewind(decoded)
        self.candidates = []

    @property
    def partial(self) -> bool:
        return (self.decoder is not None and self.decoder.partial) or self.filter.partial


class _App:
    """Everything the watcher keeps about one application; small, whatever the log's size."""

    def __init__(self, name: str, listing: _Listing, now: float) -> None:
        self.name = name
        self.listing = listing
        self.identity: LoggedApp | None = None
        self.tail: _FileTail | None = None
        self.status = "running"
        self.status_since = now
        self.last_growth = now
        self.growth_sig: tuple[Any, ...] = ()
        self.dir_mtime = -1
        self.polls_since_listing = 0
        self.files: dict[int, str] = {}  # rolling: index -> file name
        self.marker_final = False
        self.end_seen = False
        self.streaming = False
        self.properties: dict[str, str] = {}
        self.spark_conf: dict[str, str] = {}
        self.spark_version: str | None = None
        self.runs: OrderedDict[tuple[str, str], int] = OrderedDict()
        self.held: list[RawEvent] = []
        self.out: AppEvents | None = None
        self.problems: Counter[str] = Counter()
        self.active_problems: set[str] = set()
        self.replay_until: tuple[int, int] | None = None  # (file index, line) delivered before a restart
        self.missing = 0  # consecutive listings without this log
        self.newest_event: float | None = None  # newest event time read in this poll
        self.caught_up = False  # the last read reached the end of the file
        self.skew_samples: deque[float] = deque(maxlen=_SKEW_SAMPLES)
        self.clock_skew = 0.0  # acted on: 0 unless measured beyond tolerance
        self.clock_known = False  # the skew is settled: enough samples, or quiet too long for one to come
        self.quiet_since: float | None = None  # the watcher's clock when the file was last read to its end without news
        self.clock_news = False  # the clock became known in this poll without events: reported all the same
        self.dropped = False  # forgotten during this poll (a replaced log): nothing more is done with it

    def report(self) -> AppEvents:
        if self.out is None:
            self.out = AppEvents(self.name, self.identity, clock_skew=self.clock_skew, clock_known=self.clock_known)
        return self.out


class EventLogWatcher:
    """Poll event-log folders and return, per application, its identity and new events."""

    def __init__(
        self,
        dirs: Iterable[str],
        *,
        poll_interval: float = 2.0,
        wanted_events: Iterable[str] = DEFAULT_WANTED_EVENTS,
        shard: tuple[int, int] | None = None,
        state_path: str | None = None,
        grace_seconds: float = 300.0,
        lost_after_seconds: float = 600.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        identity_properties: Iterable[str] = (),
        read_finished_at_start: bool = False,
        replay_on_resume: bool = False,
        max_apps: int = 10_000,
        max_decoded_bytes_per_poll: int = 16 << 20,
        clock: Callable[[], float] = time.monotonic,
        raw_events: Iterable[str] = (),
        raw_keep: Callable[[bytes], bool] | None = None,
        follow_symlinks: bool = False,
    ) -> None:
        """``raw_events``: wanted types delivered as their line, not parsed (``RawEvent.line``); with ``raw_keep``
        only those lines it accepts (a consumer's cheap byte test: most task lines do not matter to it).

        ``follow_symlinks``: follow a symbolic link wherever it points; by default only one whose target stays
        inside a watched folder (a link planted in a shared log folder must not make the watcher read other files).
        """
        if shard is not None and not (shard[1] >= 1 and 0 <= shard[0] < shard[1]):
            raise ValueError(f"shard {shard!r}: want (K, N) with 0 <= K < N")
        self.dirs = [os.path.abspath(d) for d in dirs]
        self.follow_symlinks = follow_symlinks
        self._roots = [os.path.realpath(d) for d in self.dirs]
        self.poll_interval = poll_interval
        self.wanted = frozenset(wanted_events)
        self.raw_events = frozenset(raw_events) & self.wanted
        self.raw_keep = raw_keep
        self.shard = shard
        self.state_path = os.path.abspath(state_path) if state_path else None
        self.grace_seconds = grace_seconds
        self.lost_after_seconds = lost_after_seconds
        self.max_line_bytes = max_line_bytes
        self.identity_properties = tuple(identity_properties)
        self.read_finished_at_start = read_finished_at_start
        self.replay_on_resume = replay_on_resume
        self.max_apps = max_apps
        self.max_decoded_bytes_per_poll = max_decoded_bytes_per_poll
        self.clock = clock
        self.counts = WatchCounts()
        self.backlog = False  # the last poll left bytes unread (budget): poll again without waiting
        # the environment (one line per application) gives the identity properties and the capacity estimate's conf
        scanned = set(self.wanted) | {APP_START, APP_END, LOG_START, QUERY_STARTED, ENVIRONMENT}
        self._patterns = {line_pattern(t): t for t in sorted(scanned)}
        # until an application shows a streaming query, its task and SQL events are not even searched for
        self._patterns_batch = {p: t for p, t in self._patterns.items() if t not in STREAMING_ONLY_EVENTS}
        self._apps: dict[str, _App] = {}
        self._done: set[str] = set()  # finished or forgotten logs still in the folders: not read again
        self._reported: set[str] = set()  # folder entries already reported as unusable
        self._order = 0  # rotates which application reads first when the budget runs out
        self._listed_dirs: set[str] = set()  # folders listed successfully at least once
        self._dirty = False
        self._saved: dict[str, Any] = {}
        self._forgotten: list[_App] = []  # dropped in this poll: their last report still goes out
        if self.state_path:
            try:
                state = load_state(self.state_path)
            except StateFileError as exc:
                self._problem(None, "state_file", str(exc))
                state = None
            if state is not None:
                self._saved = {k: v for k, v in state["apps"].items() if isinstance(v, dict)}
                done = state.get("done")
                self._done = {d for d in done if isinstance(d, str)} if isinstance(done, list) else set()
                self._listed_dirs = set(self.dirs)  # a state means we watched before: every log not in it is new

    # --- public -------------------------------------------------------------------------------------

    def poll(self) -> list[AppEvents]:
        """One round: discover, read what grew, update lifecycles. Never raises."""
        try:
            self.commit()
            return self._poll()
        except Exception as exc:  # a bug must not stop the watcher: report it and go on next poll
            log.exception("event-log watcher poll failed")
            self._problem(None, "unreadable", f"poll failed: {type(exc).__name__}: {exc}")
            return []

    def finished_logs(self) -> frozenset[str]:
        """The names of the logs finished for good (not read again while they stay): a mirror may drop their copies."""
        return frozenset(self._done)

    def snapshot(self) -> SavedPositions | None:
        """The positions of everything delivered so far, to save now or later (``save``); None if nothing moved.

        A caller whose events reach a database asynchronously saves a snapshot only once what was delivered
        before it is written: a kill in between then re-reads those events instead of losing them.
        """
        if not self.state_path or not self._dirty:
            return None
        apps = {name: pos for name, app in self._apps.items() if (pos := self._position(app)) is not None}
        for name, saved in self._saved.items():  # resumable logs not seen again yet (a folder briefly unreadable)
            apps.setdefault(name, saved)
        self._dirty = False
        return SavedPositions(apps, sorted(self._done))

    def save(self, positions: SavedPositions, extra: dict[str, Any] | None = None) -> bool:
        """Persist ``positions`` (and ``extra``, kept beside them) atomically; a failure is a problem counted and False returned.

        A caller saving snapshots of its own (positions whose events are written) tries that snapshot
        again: saving newer positions instead would skip events not written yet."""
        if not self.state_path:
            return True
        try:
            save_state(self.state_path, positions.apps, positions.done, extra)
        except OSError as exc:
            self._problem(None, "state_file", f"{self.state_path}: cannot save the watcher state: {exc}")
            return False
        return True

    def commit(self) -> None:
        """Persist the positions of everything delivered so far (atomically); a no-op without a state path.
        A failure leaves them to save at the next commit."""
        positions = self.snapshot()
        if positions is not None and not self.save(positions):
            self._dirty = True

    def run(self, callback: Callable[[list[AppEvents]], None], stop_event: threading.Event) -> None:
        """Poll until ``stop_event`` is set; ``callback`` gets each non-empty poll's result, then positions are saved."""
        while not stop_event.is_set():
            started = self.clock()
            found = self.poll()
            if found:
                try:
                    callback(found)
                except Exception as exc:
                    log.exception("event-log watcher callback failed")
                    self._problem(None, "callback", f"callback failed: {type(exc).__name__}: {exc}")
            self.commit()
            if not self.backlog:
                stop_event.wait(max(0.0, self.poll_interval - (self.clock() - started)))
        self.commit()

    def app_problems(self) -> dict[str, dict[str, int]]:
        """Problems counted per followed application (log name -> kind -> count)."""
        return {name: dict(app.problems) for name, app in self._apps.items() if app.problems}

    # --- one poll -----------------------------------------------------------------------------------

    def _poll(self) -> list[AppEvents]:
        now = self.clock()
        listed, complete = self._list()
        self._discover(listed, complete, now)
        budget = self.max_decoded_bytes_per_poll
        self.backlog = False
        names = list(self._apps)
        if names:
            self._order = (self._order + 1) % len(names)
            names = names[self._order :] + names[: self._order]
        for name in names:
            app = self._apps[name]
            try:
                budget = self._follow(app, budget, now)
            except Exception as exc:  # per application: the others go on
                log.exception("event-log watcher failed on %s", clean_text(name, 300))
                self._problem(app, "unreadable", f"{name}: {type(exc).__name__}: {exc}")
            if not app.dropped:
                self._lifecycle(app, now)
        self._forget(now)
        self._update_gauges()
        out = []
        for app in list(self._apps.values()) + self._forgotten:
            if app.out is not None and (app.out.events or app.out.status_changes or app.out.problems or app.clock_news):
                out.append(app.out)
            app.out, app.clock_news = None, False
        self._forgotten = []
        return out

    def _list(self) -> tuple[dict[str, _Listing], bool]:
        """Every log in the folders, by log name; ``complete`` is False if a folder could not be listed."""
        listed: dict[str, _Listing] = {}
        complete = True
        seen_entries: set[str] = set()
        for folder in self.dirs:
            try:
                entries = list(os.scandir(folder))
            except OSError as exc:
                complete = False
                self._report_once(folder, "unreadable", f"{folder}: cannot list the event-log folder: {exc.strerror or exc}")
                continue
            self._reported.discard(folder)
            first = folder not in self._listed_dirs
            self._listed_dirs.add(folder)
            for entry in entries:
                if entry.name.startswith(".") or (self.state_path and entry.path == self.state_path):
                    continue
                seen_entries.add(entry.path)
                try:
                    is_dir = entry.is_dir()
                    is_file = not is_dir and entry.is_file()
                except OSError:
                    is_dir = is_file = False
                if is_dir and not entry.name.startswith(_ROLLING_DIR):
                    continue
                if not is_dir and not is_file:
                    self._report_once(entry.path, "not_regular", self._why_unusable(entry.path))
                    continue
                if entry.is_symlink() and not self._link_allowed(entry.path):
                    continue
                name = log_name(entry.name)
                mtime = -1
                if is_dir and name not in self._done and in_shard(name, self.shard):  # a rolling folder changes when files come
                    try:
                        mtime = entry.stat().st_mtime_ns
                    except OSError:
                        pass
                item = _Listing(
                    "rolling" if is_dir else "single", entry.path, is_file and not entry.name.endswith(_INPROGRESS), mtime, first
                )
                if name in listed and listed[name].path != entry.path:
                    self._report_once(
                        entry.path,
                        "duplicate_log",
                        f"{entry.path}: another log of {name} is already followed ({listed[name].path}); this one is ignored",
                    )
                    continue
                listed[name] = item
        self._reported &= seen_entries | set(self.dirs)
        return listed, complete

    def _link_inside(self, path: str) -> bool:
        """Whether a symbolic link may be followed: ``follow_symlinks``, or its target inside a watched folder."""
        if self.follow_symlinks:
            return True
        target = os.path.realpath(path)
        return any(target == root or target.startswith(root.rstrip(os.sep) + os.sep) for root in self._roots)

    def _link_allowed(self, path: str) -> bool:
        """``_link_inside`` for a folder entry; a link that may not be followed is reported once."""
        if self._link_inside(path):
            return True
        self._report_once(
            path, "symlink", f"{path}: a symbolic link to a target outside the watched folders; not followed (see --follow-symlinks)"
        )
        return False

    def _why_unusable(self, path: str) -> str:
        try:
            st = os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return f"{path}: symbolic link loop; ignored"
            return f"{path}: cannot be read ({exc.strerror or exc}); ignored"
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file"
        return f"{path}: {kind}; never opened"

    def _discover(self, listed: dict[str, _Listing], complete: bool, now: float) -> None:
        other_shards = 0
        for name, item in listed.items():
            if not in_shard(name, self.shard):
                other_shards += 1
                continue
            app = self._apps.get(name)
            if app is not None:
                app.listing, app.missing = item, 0
                continue
            if name in self._done:
                continue
            saved = self._saved.pop(name, None)
            if saved is None and item.first and not self.read_finished_at_start and self._finished_on_disk(item):
                self._done.add(name)
                self._dirty = True
                continue
            if len(self._apps) >= self.max_apps:
                self._report_once(item.path, "too_many_apps", f"{item.path}: already following {self.max_apps} applications; not followed")
                continue
            app = _App(name, item, now)
            self._apps[name] = app
            self.counts.apps_discovered += 1
            if saved is not None:
                self._restore(app, saved)
            app.report().status_changes.append(StatusChange("running", f"{name}: following {item.path}", time.time()))
        self.counts.apps_other_shards = other_shards
        for name in list(self._apps):
            if name not in listed and complete:
                app = self._apps[name]
                app.missing += 1
                if app.missing < 2:
                    continue  # a listing taken during a rename may miss it: believe it gone when the next one agrees
                if app.status != "finished":
                    self._problem(app, "vanished", f"{name}: {app.listing.path} vanished before the application finished")
                self._drop(app, "forgotten", f"{name}: its log is gone")
        if complete:
            self._saved = {n: v for n, v in self._saved.items() if n in listed}
            kept = {n for n in listed if in_shard(n, self.shard)}
            if self._done - kept:
                self._done &= kept
                self._dirty = True

    def _finished_on_disk(self, item: _Listing) -> bool:
        if item.kind == "single":
            return item.finished
        try:
            names = os.listdir(item.path)
        except OSError:
            return False
        return any(n.startswith(_APPSTATUS) and not n.endswith(_INPROGRESS) for n in names)

    # --- reading ------------------------------------------------------------------------------------

    def _follow(self, app: _App, budget: int, now: float) -> int:
        if app.listing.kind == "rolling":
            self._relist(app)
        elif app.tail is None:
            app.tail = self._new_tail(app, app.listing.path, 0)
        while app.tail is not None:
            tail = app.tail
            if app.listing.kind == "single":
                tail.path = app.listing.path  # renamed from .inprogress when the application ended
            if not tail.broken:
                budget = self._read(app, tail, budget)
                if app.dropped:
                    return budget
                if budget <= 0:
                    self.backlog = True
                    return budget
                if tail.size < 0 or tail.raw < tail.size:
                    break  # could not read it (reported): try again next poll
            nxt = self._next_index(app, tail.index)
            if nxt is not None and nxt != tail.index + 1:
                # parts are numbered 1, 2, 3...: a listing taken while Spark created them may show a later part
                # and not yet the one before it; list again before moving past a gap (compaction leaves real ones)
                self._relist(app, force=True)
                nxt = self._next_index(app, tail.index)
            if nxt is None:
                break
            # the next file exists, so Spark has closed this one (it closes before it opens the next)
            if not tail.broken and tail.partial:
                self._truncated(app, tail, "though the log rolled on to the next file")
            app.tail = self._new_tail(app, os.path.join(app.listing.path, app.files[nxt]), nxt)
        return budget

    def _truncated(self, app: _App, tail: _FileTail, why: str) -> None:
        unit = "line" if tail.filter.partial else f"{tail.codec} unit"
        self._problem(app, "truncated", f"{tail.path}: ends inside a {unit} {why}; the cut-off part is lost")
        tail.broken, tail.decoder = True, None

    def _relist(self, app: _App, force: bool = False) -> None:
        app.polls_since_listing += 1
        if not force and app.listing.mtime_ns == app.dir_mtime and app.polls_since_listing < _RELIST_EVERY and app.tail is not None:
            return
        try:
            names = os.listdir(app.listing.path)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return  # gone: the next listing of the parent forgets it
            self._problem(app, "unreadable", f"{app.listing.path}: cannot list: {exc.strerror or exc}", once=True)
            return
        app.dir_mtime, app.polls_since_listing = app.listing.mtime_ns, 0
        files: dict[int, str] = {}
        for n in names:
            m = _EVENTS_FILE.match(n)
            if m:
                files[int(m.group(1))] = n
            elif n.startswith(_APPSTATUS) and not n.endswith(_INPROGRESS):
                app.marker_final = True
        app.files = files
        if app.tail is None and files and min(files) > 1 and not force:
            self._relist(app, force=True)  # Spark starts at part 1: a listing may have missed it while it was created
            return
        if app.tail is None and files:
            first = min(files)
            app.tail = self._new_tail(app, os.path.join(app.listing.path, files[first]), first)

    def _next_index(self, app: _App, index: int) -> int | None:
        later = [i for i in app.files if i > index]
        return min(later) if later else None

    def _new_tail(self, app: _App, path: str, index: int, pos: dict[str, Any] | None = None) -> _FileTail:
        patterns = self._patterns if app.streaming else self._patterns_batch
        if pos is None:
            return _FileTail(path, index, patterns, self.max_line_bytes)
        return _FileTail(
            path,
            index,
            patterns,
            self.max_line_bytes,
            raw=int(pos["raw"]),
            decoded=int(pos["decoded"]),
            consumed=int(pos["consumed"]),
            lines=int(pos["lines"]),
        )

    def _read(self, app: _App, tail: _FileTail, budget: int) -> int:
        if tail.codec is not None and tail.codec not in CODECS:
            self._problem(
                app, "unreadable", f"{tail.path}: codec {tail.codec!r} is not supported (use zstd, lz4, snappy or none)", once=True
            )
            tail.broken = True
            return budget
        fd = self._open(app, tail)
        if fd is None:
            return budget
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._problem(app, "not_regular", f"{tail.path}: not a regular file; never read", once=True)
                tail.broken = True
                return budget
            app.active_problems.discard("unreadable")
            if st.st_mtime - time.time() > _FUTURE_SKEW_SECONDS:
                self._problem(
                    app,
                    "clock_skew",
                    f"{tail.path}: modified {st.st_mtime - time.time():.0f} s in the future; "
                    "the writer's clock is ahead (timeouts use this process's clock, so nothing else changes)",
                    once=True,
                )
            why = self._replaced_why(fd, st, tail)
            if why:
                self._replaced(app, tail, why)
                return budget
            tail.size = st.st_size
            if st.st_size == tail.raw:
                self._caught_up(app)
                return budget
            while tail.raw < st.st_size and budget > 0 and not tail.broken:
                at = tail.raw
                data = os.pread(fd, min(_READ_CHUNK, st.st_size - at), at)
                if not data:
                    break
                if at < _HEAD_BYTES and len(tail.head) == at:
                    tail.head += data[: _HEAD_BYTES - at]
                budget -= self._decode(app, tail, data, budget)
            if tail.raw >= st.st_size:
                self._caught_up(app)
            else:
                app.caught_up = False
        except OSError as exc:
            self._problem(app, "unreadable", f"{tail.path}: read failed: {exc.strerror or exc}", once=True)
        except EventLogError as exc:
            if tail.failed_at != tail.resume_point()[0]:
                # read once more from the last boundary: a network file system may have shown the new size
                # before the bytes (a hole of zeros); the same failure twice means the data is bad
                tail.failed_at = tail.resume_point()[0]
                tail.rewind()
            else:
                self._problem(app, "corrupt", f"{exc}; the rest of this file is skipped")
                tail.broken, tail.decoder = True, None
        finally:
            os.close(fd)
        if tail.decoder is not None and (tail.broken or not tail.decoder.partial):
            tail.decoder = None  # nothing held: recreate at the next boundary instead of keeping its buffers
        return budget

    def _open(self, app: _App, tail: _FileTail) -> int | None:
        """The file opened non-blocking (a FIFO swapped in never hangs a poll); a symbolic link only where allowed."""
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            try:
                return os.open(tail.path, flags | getattr(os, "O_NOFOLLOW", 0))
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
            # a symbolic link (or a loop): followed only when its target stays inside a watched folder
            if not self._link_inside(tail.path):
                self._problem(app, "symlink", f"{tail.path}: a symbolic link out of the watched folders; not read", once=True)
                tail.broken = True
                return None
            return os.open(tail.path, flags)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return None  # renamed or removed: the next listing says which
            why = "symbolic link loop" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
            self._problem(app, "unreadable", f"{tail.path}: cannot open: {why}", once=True)
            return None

    @staticmethod
    def _replaced_why(fd: int, st: os.stat_result, tail: _FileTail) -> str:
        """Why the file at ``tail.path`` is not the one read so far ("" when it is): smaller, other first bytes, another inode.

        Another inode with the same first bytes is the same log (some network file systems renumber inodes): kept.
        """
        if st.st_size < tail.raw:
            return f"it shrank from {tail.raw} to {st.st_size} bytes"
        inode = (st.st_dev, st.st_ino)
        moved = tail.inode is not None and inode != tail.inode
        tail.inode = inode
        if tail.head and (moved or st.st_size > tail.raw) and os.pread(fd, len(tail.head), 0) != tail.head:
            return "another file took its name" if moved else "its first bytes changed"
        if moved and not tail.head and tail.raw > 0:
            return "another file took its name"
        if not tail.head and tail.raw > 0:  # resumed from a saved position: these first bytes are the log's from now on
            tail.head = os.pread(fd, min(tail.raw, _HEAD_BYTES), 0)
        return ""

    def _replaced(self, app: _App, tail: _FileTail, why: str) -> None:
        """A log replaced or truncated under the watcher: what was read belongs to another file. The application is
        forgotten (its series go) and the log found again at the next listing, read from its start as a new one."""
        self._problem(app, "replaced", f"{tail.path}: replaced or truncated ({why}); read again from its start as a new log")
        tail.broken, tail.decoder = True, None
        self._drop(app, "forgotten", f"{app.name}: its log was replaced", done=False)

    def _caught_up(self, app: _App) -> None:
        """The file is read to its end: measure the clock skew from this poll's newest event (see ``_SKEW_SAMPLES``)."""
        newest, app.newest_event = app.newest_event, None
        if newest is not None and app.caught_up:
            app.skew_samples.append(time.time() - newest)
            if len(app.skew_samples) >= _SKEW_MIN_SAMPLES:
                skew = min(app.skew_samples)
                tolerance = _SKEW_TOLERANCE_SECONDS + self.poll_interval
                app.clock_skew = skew if tolerance < abs(skew) else 0.0
                app.clock_known = True
                if app.clock_skew:
                    self._problem(
                        app,
                        "clock_skew",
                        f"{app.name}: its event times are {skew:.0f} s {'behind' if skew > 0 else 'ahead of'} this watcher's clock; "
                        "ages and stalls are judged on the application's clock",
                        once=True,
                    )
        elif newest is None and app.caught_up and not app.clock_known:
            # nothing new since the last read to the end: a quiet log (stalled, idle) gives no sample; once it
            # has been quiet longer than any delivery takes, its times are judged on this watcher's clock
            now = self.clock()
            if app.quiet_since is None:
                app.quiet_since = now
            if now - app.quiet_since > _SKEW_TOLERANCE_SECONDS + self.poll_interval:
                app.clock_known = app.clock_news = True  # handed on in this poll, though the log says nothing new
                app.report()
        if newest is not None:
            app.quiet_since = None
        if app.out is not None:
            app.out.clock_skew, app.out.clock_known = app.clock_skew, app.clock_known
        app.caught_up = True

    def _decode(self, app: _App, tail: _FileTail, data: bytes, budget: int) -> int:
        """Decode one raw chunk and deliver its wanted lines, stopping once ``budget`` decoded bytes are spent
        (``tail.raw`` then says how far the chunk was used); returns the decoded size."""
        if tail.decoder is None:
            tail.decoder = tail_decoder(tail.path, tail.codec, tail.raw)
        decoded_total = 0
        pieces = tail.decoder.feed(data)
        try:
            for piece, boundary in pieces:
                decoded_total += len(piece)
                if tail.skip > 0:  # delivered before a restart
                    cut = min(tail.skip, len(piece))
                    tail.skip -= cut
                    tail.filter.decoded_pos += cut
                    tail.filter.consumed = tail.filter.decoded_pos
                    piece = piece[cut:]
                before = tail.filter.lines
                tail.filter.feed(piece, lambda line_no, event_type, line: self._line(app, tail, line_no, event_type, line))
                self.counts.lines += tail.filter.lines - before
                for line_no in tail.filter.too_long:
                    self._problem(
                        app, "line_too_long", f"{tail.path}:{line_no}: a wanted event line longer than {self.max_line_bytes} bytes; skipped"
                    )
                tail.filter.too_long.clear()
                if boundary is not None:
                    tail.note_boundary(boundary, tail.filter.decoded_pos)
                if decoded_total >= budget or self._inflated(app, tail):
                    break
        finally:
            pieces.close()  # the decoder notes how much of ``data`` it used
        self.counts.read_bytes += max(0, tail.decoder.raw_pos - tail.raw)
        tail.raw = tail.decoder.raw_pos
        self.counts.decoded_bytes += decoded_total
        if decoded_total:
            self._dirty = True
        return decoded_total

    def _inflated(self, app: _App, tail: _FileTail) -> bool:
        """True (counted once per file, the rest of it skipped) when the file decodes to far more than any log does."""
        raw = tail.decoder.raw_pos if tail.decoder is not None else tail.raw
        if tail.codec is None or tail.filter.decoded_pos <= _MAX_INFLATION * raw + _INFLATION_ALLOWANCE:
            return False
        self._problem(
            app,
            "inflated",
            f"{tail.path}: {raw} compressed bytes decode to over {tail.filter.decoded_pos} (a decompression bomb?); "
            "the rest of this file is skipped",
        )
        tail.broken = True
        return True

    def _line(self, app: _App, tail: _FileTail, line_no: int, event_type: str, line: bytes) -> bool:
        """Parse and deliver one wanted line; True when the application turned out to be streaming (scan for more types)."""
        if event_type == ENVIRONMENT and app.identity is not None:
            return False
        turned_streaming = event_type in STREAMING_EVENTS and not app.streaming
        if turned_streaming:
            app.streaming = True
            tail.filter.set_patterns(self._patterns)
        if event_type in self.raw_events:
            if self.raw_keep is None or self.raw_keep(line):
                replayed = app.replay_until is not None and (tail.index, line_no) <= app.replay_until
                self._deliver(app, RawEvent(event_type, {}, f"{tail.path}:{line_no}", replayed, line))
            return turned_streaming
        source = f"{tail.path}:{line_no}"
        try:
            obj = loads(line)  # bounded: a short line of ``[{},{},...]`` would expand a hundredfold in memory
        except JsonTooLarge as exc:
            self._problem(app, "line_too_long", f"{source}: {exc}; skipped")
            return turned_streaming
        except (ValueError, RecursionError) as exc:
            why = "nested too deep" if isinstance(exc, RecursionError) else str(exc)[:80]
            self._problem(app, "bad_json", f"{source}: not valid JSON ({why}); skipped")
            return turned_streaming
        self.counts.events_parsed += 1
        if not isinstance(obj, dict):
            self._problem(app, "bad_json", f"{source}: not a JSON object; skipped")
            return turned_streaming
        replayed = app.replay_until is not None and (tail.index, line_no) <= app.replay_until
        if event_type in STREAMING_EVENTS:
            at = event_time(event_type, obj)
            if at is not None and (app.newest_event is None or at > app.newest_event):
                app.newest_event = at
        if event_type == LOG_START:
            app.spark_version = clean_identity(obj.get("Spark Version")) or None
        elif event_type == ENVIRONMENT:
            props = obj.get("Spark Properties")
            if isinstance(props, list):  # older logs: a list of [key, value] pairs
                props = {p[0]: p[1] for p in props if isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)}
            if isinstance(props, dict):
                app.properties = {k: clean_identity(props[k]) for k in self.identity_properties if k in props}
                app.spark_conf = relevant(props)
        elif event_type == APP_START:
            self._identify(app, obj)
        elif event_type == APP_END:
            app.end_seen = True
        elif event_type == QUERY_PROGRESS and not self._new_batch(app, obj, replayed):
            return turned_streaming
        if event_type in self.wanted:
            self._deliver(app, RawEvent(event_type, obj, source, replayed))
        return turned_streaming

    def _new_batch(self, app: _App, obj: dict[str, Any], replayed: bool) -> bool:
        progress = obj.get("progress")
        if not isinstance(progress, dict):
            return True
        run = (clean_identity(progress.get("id")), clean_identity(progress.get("runId")))
        batch = progress.get("batchId")
        if type(batch) is not int:
            return True
        last = app.runs.get(run)
        if last is not None and batch <= last and not replayed:
            self.counts.events_duplicate += 1
            return False
        app.runs[run] = batch if last is None else max(batch, last)
        app.runs.move_to_end(run)
        while len(app.runs) > _MAX_RUNS:
            app.runs.popitem(last=False)
        return True

    def _identify(self, app: _App, obj: dict[str, Any]) -> None:
        # every identity string is cut and cleaned here, where it is taken (``clean_identity``): it ends on labels
        fallback = clean_identity(app.name)
        ts = obj.get("Timestamp")
        app.identity = LoggedApp(
            app.name,
            clean_identity(obj.get("App Name")) or fallback,
            clean_identity(obj.get("App ID")) or fallback,
            clean_identity(obj.get("App Attempt ID")) or None,
            app.spark_version,
            ts if type(ts) is int and 0 <= ts < 1 << 53 else None,
            tuple(sorted(app.properties.items())),
            tuple(sorted(app.spark_conf.items())),
        )
        self._check_duplicate_name(app)
        self._release_held(app)

    def _check_duplicate_name(self, app: _App) -> None:
        assert app.identity is not None
        for other in self._apps.values():
            if other is app or other.identity is None or other.status != "running" or other.identity.name != app.identity.name:
                continue
            message = (
                f"two running applications are named {app.identity.name!r} ({other.identity.app_id} in {other.listing.path}, "
                f"{app.identity.app_id} in {app.listing.path}); their series are told apart only by app id and query id"
            )
            self._problem(app, "duplicate_name", message, once=True)
            self._problem(other, "duplicate_name", message, once=True)

    def _deliver(self, app: _App, event: RawEvent) -> None:
        if app.identity is None:
            app.held.append(event)
            if len(app.held) >= _MAX_HELD_EVENTS:
                self._fallback_identity(app, f"no application-start event in the first {_MAX_HELD_EVENTS} wanted events")
            return
        app.report().events.append(event)
        self.counts.events_delivered += 1

    def _fallback_identity(self, app: _App, why: str) -> None:
        self._problem(app, "no_app_start", f"{app.name}: {why}; named after its log")
        name = clean_identity(app.name)
        app.identity = LoggedApp(app.name, name, name, None, app.spark_version, None, tuple(sorted(app.properties.items())))
        self._release_held(app)

    def _release_held(self, app: _App) -> None:
        held, app.held = app.held, []
        report = app.report()
        report.identity = app.identity
        report.events.extend(held)
        self.counts.events_delivered += len(held)

    # --- lifecycle ----------------------------------------------------------------------------------

    def _lifecycle(self, app: _App, now: float) -> None:
        tail = app.tail
        sig = (
            app.listing.path,
            app.listing.mtime_ns,
            tuple(sorted(app.files)),
            tail.index if tail else None,
            tail.size if tail else None,
            app.marker_final,
        )
        if sig != app.growth_sig:
            app.growth_sig, app.last_growth = sig, now
        ended = app.marker_final or app.end_seen or (app.listing.kind == "single" and app.listing.finished)
        read_all = tail is None or tail.broken or (tail.size >= 0 and tail.raw >= tail.size)
        if (
            ended
            and read_all
            and tail is not None
            and not tail.broken
            and tail.partial
            and app.status == "running"
            and (app.marker_final or app.listing.finished)
        ):
            self._truncated(app, tail, "though the application ended")
        drained = read_all and (tail is None or tail.broken or not tail.partial)
        if app.status in ("running", "lost") and ended and drained and self._next_index(app, tail.index if tail else -1) is None:
            if app.identity is None:
                self._fallback_identity(app, "the log ended without an application-start event")
            how = "end marker" if app.marker_final or app.listing.finished else "application-end event"
            self._set_status(app, "finished", f"{app.name}: finished ({how}), read to its end", now)
        elif app.status == "running" and now - app.last_growth > self.lost_after_seconds:
            if app.identity is None and app.held:
                self._fallback_identity(app, "the log stopped growing before an application-start event")
            self._set_status(
                app,
                "lost",
                f"{app.name}: no growth for {now - app.last_growth:.0f} s and no end marker (a killed driver leaves its log like this)",
                now,
            )
        elif app.status == "lost" and app.last_growth >= app.status_since:
            self._set_status(app, "running", f"{app.name}: growing again", now)

    def _set_status(self, app: _App, status: str, message: str, now: float) -> None:
        message = clean_text(message, 2000)
        app.status, app.status_since = status, now
        app.report().status_changes.append(StatusChange(status, message, time.time()))
        self._dirty = True
        if status != "running":
            log.info("%s", message)

    def _forget(self, now: float) -> None:
        for app in list(self._apps.values()):
            if app.status in ("finished", "lost") and now - app.status_since >= self.grace_seconds:
                self._drop(app, "forgotten", f"{app.name}: forgotten {self.grace_seconds:.0f} s after it was {app.status}")

    def _drop(self, app: _App, status: str, message: str, done: bool = True) -> None:
        """Forget ``app``; ``done``: its log, if still there, is not read again (``False``: found again as a new log)."""
        report = app.report()
        report.identity = app.identity
        report.status_changes.append(StatusChange(status, message, time.time()))
        self._apps.pop(app.name, None)
        app.dropped = True
        if done and app.listing.path and os.path.lexists(app.listing.path):
            self._done.add(app.name)
        self.counts.apps_forgotten += 1
        self._forgotten.append(app)
        self._dirty = True

    def _update_gauges(self) -> None:
        self.counts.clock_skew_seconds = max((app.clock_skew for app in self._apps.values()), key=abs, default=0.0)
        statuses = Counter(app.status for app in self._apps.values())
        self.counts.apps_running, self.counts.apps_finished, self.counts.apps_lost = (
            statuses["running"],
            statuses["finished"],
            statuses["lost"],
        )

    # --- problems and state -------------------------------------------------------------------------

    def _problem(self, app: _App | None, kind: str, message: str, once: bool = False) -> None:
        """Count and report a problem; ``once`` reports it once per episode (until it clears)."""
        if app is not None and once:
            if kind in app.active_problems:
                return
            app.active_problems.add(kind)
        message = clean_text(message, 2000)  # names from the data: a lone surrogate must not break a log handler
        self.counts.problems[kind] += 1
        log.warning("%s", message)
        if app is not None:
            app.problems[kind] += 1
            app.report().problems.append(message)

    def _report_once(self, path: str, kind: str, message: str) -> None:
        if path in self._reported:
            return
        self._reported.add(path)
        self._problem(None, kind, message)

    def _position(self, app: _App) -> dict[str, Any] | None:
        if app.identity is None or app.tail is None:
            return None  # nothing delivered yet: a restart reads it from the start
        ident = app.identity
        return {
            "tail": app.tail.position(),
            "identity": {
                "name": ident.name,
                "app_id": ident.app_id,
                "attempt_id": ident.attempt_id,
                "spark_version": ident.spark_version,
                "start_time_ms": ident.start_time_ms,
                "properties": dict(ident.properties),
            },
            "streaming": app.streaming,
            "end_seen": app.end_seen,
            "status": app.status,
            "runs": [[q, r, b] for (q, r), b in app.runs.items()],
        }

    def _restore(self, app: _App, saved: dict[str, Any]) -> None:
        try:
            pos = saved["tail"]
            ident = saved["identity"]
            if app.listing.kind == "rolling":
                # a state file is input too: only a part's own name, never a path out of the log's folder
                if not isinstance(pos["file"], str) or not _EVENTS_FILE.match(pos["file"]):
                    raise ValueError(f"{clean_text(repr(pos['file']), 80)} is not an event-log part's name")
                path = os.path.join(app.listing.path, pos["file"])
            else:
                path = app.listing.path
            if not all(type(pos[k]) is int and 0 <= pos[k] < 1 << 62 for k in ("raw", "decoded", "consumed", "lines", "index")):
                raise ValueError("offsets are not non-negative integers")
            start = ident.get("start_time_ms")
            properties = ident.get("properties") or {}
            app.identity = LoggedApp(
                app.name,
                clean_identity(ident["name"]) or clean_identity(app.name),
                clean_identity(ident["app_id"]) or clean_identity(app.name),
                clean_identity(ident.get("attempt_id")) or None,
                clean_identity(ident.get("spark_version")) or None,
                start if type(start) is int else None,
                tuple(sorted((clean_identity(k), clean_identity(v)) for k, v in list(properties.items())[:100])),
            )
            app.streaming = bool(saved.get("streaming")) and not self.replay_on_resume  # a replay reads as the first pass did
            app.end_seen = bool(saved.get("end_seen"))
            for q, r, b in list(saved.get("runs", []))[-_MAX_RUNS:]:
                app.runs[(clean_identity(q), clean_identity(r))] = int(b)  # keyed as ``_new_batch`` keys them
            if self.replay_on_resume:
                app.replay_until = (int(pos["index"]), int(pos["lines"]))
                if app.listing.kind == "single":
                    app.tail = self._new_tail(app, path, 0)
                return  # a rolling log starts again from its first file at the next listing
            app.tail = self._new_tail(app, path, int(pos["index"]), pos)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            self._problem(app, "state_file", f"{app.name}: saved position unusable ({str(exc)[:200]}); reading its log from the start")
            app.identity, app.tail, app.replay_until = None, None, None
            app.runs.clear()
