"""Discovery: list the watched folders, find the logs in them (single files and rolling folders), follow the
new ones of this shard and forget those gone; symbolic links only where allowed.
"""

from __future__ import annotations

import errno
import os
import stat
import time

from spark_state_observer.fleet.app_events import StatusChange
from spark_state_observer.fleet.followed_app import FollowedApp, Listing
from spark_state_observer.fleet.log_names import APPSTATUS, INPROGRESS, ROLLING_DIR, in_shard, log_name
from spark_state_observer.fleet.watcher_core import WatcherCore


class LogListing(WatcherCore):
    """Listing and discovery of the ``EventLogWatcher``."""

    def _list(self) -> tuple[dict[str, Listing], bool]:
        """Every log in the folders, by log name; ``complete`` is False if a folder could not be listed."""
        listed: dict[str, Listing] = {}
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
                if is_dir and not entry.name.startswith(ROLLING_DIR):
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
                item = Listing("rolling" if is_dir else "single", entry.path, is_file and not entry.name.endswith(INPROGRESS), mtime, first)
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

    def _discover(self, listed: dict[str, Listing], complete: bool, now: float) -> None:
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
            app = FollowedApp(name, item, now)
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

    def _finished_on_disk(self, item: Listing) -> bool:
        if item.kind == "single":
            return item.finished
        try:
            names = os.listdir(item.path)
        except OSError:
            return False
        return any(n.startswith(APPSTATUS) and not n.endswith(INPROGRESS) for n in names)
