"""Follow every Spark application in event-log folders while it runs: the capture side of ``watch``.

Why a watcher: platform teams cannot edit every job to attach a listener, but every Spark application
already writes its listener events to ``spark.eventLog.dir`` (the folder the History Server reads). One
process following that folder observes all of them. This module only *captures*: for every application
it yields the application's identity and its raw events (``AppEvents``); the pipeline that turns them
into metrics and signals is the one replay uses.

This module holds the coordinator (``EventLogWatcher``: its settings, one round, the run loop). The state of each
application is data (``FollowedApp``, all of them in ``FollowedApps``: ``followed_app``); each job of the round is a
small object of its own, given what it needs when it is built: the listing is a pure function (``log_listing``),
what to follow of it ``discovery``, reading ``Tailer`` (``log_tailing``), line parsing and the duplicate guard
``EventReader`` (``event_lines``), identity ``IdentityResolver`` (``identification``), clock skew ``SkewEstimator``
(``clock_skew``), lifecycle ``LifecycleJudge`` (``app_lifecycle``), restart positions ``PositionStore``
(``watch_positions``), problems ``Problems`` (``watch_problems``); what it hands over is in ``app_events``, log
names and shards in ``log_names``.

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
  the last ``SKEW_SAMPLES`` (``spark_state_observer.fleet.followed_app``) is the skew. Beyond tolerance it is counted, exported and handed on
  (``AppEvents.clock_skew``): the pipeline judges ages and stalls on the application's clock, whatever
  the skew (a driver days off, or an old log copied in now: its stalls are judged on its own times).
  Until the skew is known (``AppEvents.clock_known``: enough samples, or a log quiet for longer than a
  delivery can take, so no sample can come) nothing is judged on the clock: no stall storm at the start.
- **Incremental tailing**: each file keeps its raw offset and, while a compressed unit is incomplete,
  its decoder (``spark_state_observer.fleet.codec_tail``); a poll decodes only the bytes added since the last one.
- **Cheap filtering**: lines are selected by their first bytes (``spark_state_observer.fleet.line_filter``); only
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
  stops growing without an end is reported ``lost`` after ``lost_after_seconds`` (counted from its last sign of
  life: a log found long dead is lost at once) and forgotten after a further grace period. Logs already finished when the watcher first starts are not read (a History
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

import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from spark_state_observer.capture.codecs import DEFAULT_MAX_LINE_BYTES
from spark_state_observer.fleet.app_events import DEFAULT_WANTED_EVENTS, STREAMING_ONLY_EVENTS, AppEvents, WatchCounts
from spark_state_observer.fleet.app_lifecycle import LifecycleJudge
from spark_state_observer.fleet.clock_skew import SkewEstimator
from spark_state_observer.fleet.discovery import Discovery
from spark_state_observer.fleet.event_lines import EventReader
from spark_state_observer.fleet.followed_app import FollowedApps
from spark_state_observer.fleet.identification import IdentityResolver
from spark_state_observer.fleet.line_filter import line_pattern
from spark_state_observer.fleet.log_listing import link_inside
from spark_state_observer.fleet.log_tailing import Tailer
from spark_state_observer.fleet.watch_positions import PositionStore, SavedPositions
from spark_state_observer.fleet.watch_problems import Problems, log
from spark_state_observer.model.bounded import clean_text
from spark_state_observer.model.spark_events import APP_END, APP_START, ENVIRONMENT, LOG_START, QUERY_STARTED


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
        wall_clock: Callable[[], float] = time.time,
        raw_events: Iterable[str] = (),
        raw_keep: Callable[[bytes], bool] | None = None,
        follow_symlinks: bool = False,
        progress_as_bytes: bool = False,
    ) -> None:
        """``raw_events``: wanted types delivered as their line, not parsed (``RawEvent.line``); with ``raw_keep``
        only those lines it accepts (a consumer's cheap byte test: most task lines do not matter to it).

        ``progress_as_bytes``: progress events come as their line and their ``progress`` object's JSON
        (``RawEvent.progress``, for ``spark_state_observer.model.decode``'s fast path, as replay hands them) with their time in
        ``RawEvent.logged_at``, not parsed into a dict: the watcher reads only the few fields its guard needs
        (``spark_state_observer.fleet.event_lines``). A line that path declines is parsed and delivered as before.

        ``follow_symlinks``: follow a symbolic link wherever it points; by default only one whose target stays
        inside a watched folder (a link planted in a shared log folder must not make the watcher read other files).
        """
        if shard is not None and not (shard[1] >= 1 and 0 <= shard[0] < shard[1]):
            raise ValueError(f"shard {shard!r}: want (K, N) with 0 <= K < N")
        self.dirs = [os.path.abspath(d) for d in dirs]
        self.poll_interval, self.shard, self.clock = poll_interval, shard, clock
        self.max_decoded_bytes_per_poll = max_decoded_bytes_per_poll
        self.counts = WatchCounts()
        self.problems = Problems(self.counts)
        self.book = FollowedApps(self.counts)
        wanted = frozenset(wanted_events)
        # the environment (one line per application) gives the identity properties and the capacity estimate's conf
        patterns = {line_pattern(t): t for t in sorted(set(wanted) | {APP_START, APP_END, LOG_START, QUERY_STARTED, ENVIRONMENT})}
        roots = [os.path.realpath(d) for d in self.dirs]
        self._link_inside: Callable[[str], bool] = lambda path: link_inside(path, roots, follow_symlinks)
        self.identity = IdentityResolver(self.book, self.problems)
        self.skew = SkewEstimator(self.problems, clock=clock, wall_clock=wall_clock, poll_interval=poll_interval)
        self.reader = EventReader(
            self.problems,
            self.identity,
            wanted=wanted,
            raw_events=frozenset(raw_events) & wanted,
            raw_keep=raw_keep,
            progress_as_bytes=progress_as_bytes,
            identity_properties=tuple(identity_properties),
            patterns=patterns,
        )
        self.tailer = Tailer(
            self.book,
            self.problems,
            patterns=patterns,
            # until an application shows a streaming query, its task and SQL events are not even searched for
            patterns_batch={p: t for p, t in patterns.items() if t not in STREAMING_ONLY_EVENTS},
            max_line_bytes=max_line_bytes,
            link_inside=self._link_inside,
            on_line=self.reader.line,
            on_caught_up=self.skew.caught_up,
        )
        self.lifecycle = LifecycleJudge(
            self.book,
            self.problems,
            self.tailer,
            self.identity,
            grace_seconds=grace_seconds,
            lost_after_seconds=lost_after_seconds,
            wall_clock=wall_clock,
            poll_interval=poll_interval,
        )
        self.positions = PositionStore(self.book, self.problems, self.tailer, state_path=state_path, replay_on_resume=replay_on_resume)
        self.discovery = Discovery(
            self.book,
            self.problems,
            self.positions.restore,
            dirs=self.dirs,
            skip=self.positions.state_path,
            link_inside=self._link_inside,
            shard=shard,
            max_apps=max_apps,
            read_finished_at_start=read_finished_at_start,
        )
        if self.positions.load():  # a state means we watched before: every log not in it is new, not found at the start
            self.discovery.listed_dirs = set(self.dirs)
        self._order = 0  # rotates which application reads first when the budget runs out

    # --- public -------------------------------------------------------------------------------------

    def poll(self) -> list[AppEvents]:
        """One round: discover, read what grew, update lifecycles. Never raises."""
        try:
            self.commit()
            return self._poll()
        except Exception as exc:  # a bug must not stop the watcher: report it and go on next poll
            log.exception("event-log watcher poll failed")
            self.problems.report(None, "unreadable", f"poll failed: {type(exc).__name__}: {exc}")
            return []

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
                    self.problems.report(None, "callback", f"callback failed: {type(exc).__name__}: {exc}")
            self.commit()
            if not self.backlog:
                stop_event.wait(max(0.0, self.poll_interval - (self.clock() - started)))
        self.commit()

    def snapshot(self) -> SavedPositions | None:
        """The positions of everything delivered so far (``PositionStore.snapshot``); None if nothing moved."""
        return self.positions.snapshot()

    def save(self, positions: SavedPositions, extra: dict[str, Any] | None = None) -> bool:
        """Persist ``positions`` (and ``extra``) atomically (``PositionStore.save``); False on a failure, counted."""
        return self.positions.save(positions, extra)

    def commit(self) -> None:
        """Persist the positions of everything delivered so far; a no-op without a state path."""
        self.positions.commit()

    def finished_logs(self) -> frozenset[str]:
        """The names of the logs finished for good (not read again while they stay): a mirror may drop their copies."""
        return frozenset(self.book.done)

    def silence(self, log_name: str) -> float | None:
        """Seconds (on ``clock``) since ``log_name``'s log last showed life, while it is followed without an end: how
        long its driver has said nothing (None: not followed, or ended). Measured on this watcher's clock from the
        growth it saw; a log first read long after its last event and modification time counts from the newer of
        them (``LifecycleJudge.silent_before``), so a driver dead for weeks is not taken for one that died now."""
        app = self.book.apps.get(log_name)
        if app is None or app.status == "finished" or app.end_seen or app.marker_final:
            return None
        return self.clock() - app.last_growth

    def last_life(self, log_name: str) -> float | None:
        """When (on ``clock``) ``log_name``'s log last showed life: its last growth this watcher saw, or for a log not
        grown since it was first read, the newer of its last event's time and its modification time (a loss is dated
        then, so a driver dead for weeks does not read as one that died now). None: not followed."""
        app = self.book.apps.get(log_name)
        return None if app is None else app.last_growth - app.dead_for

    def app_problems(self) -> dict[str, dict[str, int]]:
        """Problems counted per followed application (log name -> kind -> count)."""
        return {name: dict(app.problems) for name, app in self.book.apps.items() if app.problems}

    # what callers and tests read or change after construction, kept by the part that acts on it
    backlog = property(lambda self: self.tailer.backlog, doc="The last poll left bytes unread (budget): poll again without waiting.")
    state_path = property(lambda self: self.positions.state_path)
    _apps = property(lambda self: self.book.apps)
    _done = property(lambda self: self.book.done)
    lost_after_seconds = property(
        lambda self: self.lifecycle.lost_after_seconds, lambda self, value: setattr(self.lifecycle, "lost_after_seconds", value)
    )
    grace_seconds = property(lambda self: self.lifecycle.grace_seconds, lambda self, value: setattr(self.lifecycle, "grace_seconds", value))

    # --- one poll -----------------------------------------------------------------------------------

    def _poll(self) -> list[AppEvents]:
        now = self.clock()
        self.discovery.round(now)
        budget = self.max_decoded_bytes_per_poll
        self.tailer.backlog = False
        names = list(self.book.apps)
        if names:
            self._order = (self._order + 1) % len(names)
            names = names[self._order :] + names[: self._order]
        for name in names:
            app = self.book.apps[name]
            try:
                budget = self.tailer.follow(app, budget)
            except Exception as exc:  # per application: the others go on
                log.exception("event-log watcher failed on %s", clean_text(name, 300))
                self.problems.report(app, "unreadable", f"{name}: {type(exc).__name__}: {exc}")
            if not app.dropped:
                self.lifecycle.judge(app, now)
        self.lifecycle.forget(now)
        self.lifecycle.update_gauges()
        out = []
        for app in list(self.book.apps.values()) + self.book.forgotten:
            if app.out is not None and (app.out.events or app.out.status_changes or app.out.problems or app.clock_news):
                out.append(app.out)
            app.out, app.clock_news = None, False
        self.book.forgotten = []
        return out
