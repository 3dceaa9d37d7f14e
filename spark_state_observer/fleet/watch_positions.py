"""Positions: what the state file holds (per application the current file, a raw offset a fresh decoder can start
at, what was delivered after it, the last batch per query run), saved atomically and restored after a restart.

Restart safety: ``commit()`` (called by ``run`` after each callback, and by the next ``poll``)
writes, atomically, per application the current file, a raw offset where a fresh decoder can start,
how many decoded bytes and lines after it were already delivered, and the last batch id per query run.
A restarted watcher seeks there and skips what was delivered; a progress event whose (query id, run
id, batch id) is not newer than the last delivered one is dropped as a second guard. With
``replay_on_resume`` the delivered events are instead read again and marked ``replayed`` so an
in-memory pipeline can rebuild its state without counting them twice in a durable sink.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from spark_state_observer.fleet.app_events import LoggedApp
from spark_state_observer.fleet.event_lines import MAX_RUNS
from spark_state_observer.fleet.followed_app import FollowedApp, FollowedApps
from spark_state_observer.fleet.log_names import EVENTS_FILE
from spark_state_observer.fleet.log_tailing import Tailer
from spark_state_observer.fleet.watch_problems import Problems
from spark_state_observer.fleet.watch_state import StateFileError, load_state, save_state
from spark_state_observer.model.bounded import clean_identity, clean_text


@dataclass(frozen=True)
class SavedPositions:
    """What the state file holds: each followed log's position, and the logs finished for good."""

    apps: dict[str, Any]
    done: list[str]


class PositionStore:
    """The state file: positions loaded at the start, saved after each delivery, restored per application."""

    def __init__(self, book: FollowedApps, problems: Problems, tailer: Tailer, *, state_path: str | None, replay_on_resume: bool) -> None:
        self.book, self.problems, self.tailer = book, problems, tailer
        self.state_path = os.path.abspath(state_path) if state_path else None
        self.replay_on_resume = replay_on_resume

    def load(self) -> bool:
        """Take the positions and finished logs an earlier run saved into the book; whether there were any."""
        if not self.state_path:
            return False
        try:
            state = load_state(self.state_path)
        except StateFileError as exc:
            self.problems.report(None, "state_file", str(exc))
            return False
        if state is None:
            return False
        self.book.saved = {k: v for k, v in state["apps"].items() if isinstance(v, dict)}
        done = state.get("done")
        self.book.done = {d for d in done if isinstance(d, str)} if isinstance(done, list) else set()
        return True

    def snapshot(self) -> SavedPositions | None:
        """The positions of everything delivered so far, to save now or later (``save``); None if nothing moved.

        A caller whose events reach a database asynchronously saves a snapshot only once what was delivered
        before it is written: a kill in between then re-reads those events instead of losing them.
        """
        if not self.state_path or not self.book.dirty:
            return None
        apps = {name: pos for name, app in self.book.apps.items() if (pos := self._position(app)) is not None}
        for name, saved in self.book.saved.items():  # resumable logs not seen again yet (a folder briefly unreadable)
            apps.setdefault(name, saved)
        self.book.dirty = False
        return SavedPositions(apps, sorted(self.book.done))

    def save(self, positions: SavedPositions, extra: dict[str, Any] | None = None) -> bool:
        """Persist ``positions`` (and ``extra``, kept beside them) atomically; a failure is a problem counted and False returned.

        A caller saving snapshots of its own (positions whose events are written) tries that snapshot
        again: saving newer positions instead would skip events not written yet."""
        if not self.state_path:
            return True
        try:
            save_state(self.state_path, positions.apps, positions.done, extra)
        except OSError as exc:
            self.problems.report(None, "state_file", f"{self.state_path}: cannot save the watcher state: {exc}")
            return False
        return True

    def commit(self) -> None:
        """Persist the positions of everything delivered so far (atomically); a no-op without a state path.
        A failure leaves them to save at the next commit."""
        positions = self.snapshot()
        if positions is not None and not self.save(positions):
            self.book.dirty = True

    def _position(self, app: FollowedApp) -> dict[str, Any] | None:
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

    def restore(self, app: FollowedApp, saved: dict[str, Any]) -> None:
        try:
            pos = saved["tail"]
            ident = saved["identity"]
            if app.listing.kind == "rolling":
                # a state file is input too: only a part's own name, never a path out of the log's folder
                if not isinstance(pos["file"], str) or not EVENTS_FILE.match(pos["file"]):
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
            for q, r, b in list(saved.get("runs", []))[-MAX_RUNS:]:
                app.runs[(clean_identity(q), clean_identity(r))] = int(b)  # keyed as ``_new_batch`` keys them
            if self.replay_on_resume:
                app.replay_until = (int(pos["index"]), int(pos["lines"]))
                if app.listing.kind == "single":
                    app.tail = self.tailer.new_tail(app, path, 0)
                return  # a rolling log starts again from its first file at the next listing
            app.tail = self.tailer.new_tail(app, path, int(pos["index"]), pos)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            self.problems.report(
                app, "state_file", f"{app.name}: saved position unusable ({str(exc)[:200]}); reading its log from the start"
            )
            app.identity, app.tail, app.replay_until = None, None, None
            app.runs.clear()
