"""Discovery: list the folders (``spark_state_observer.fleet.log_listing``), follow the new logs of this shard, note
the ones finished before the watcher started, and forget those gone (once two listings agree).

Discovery by polling: (``poll_interval``): one ``scandir`` of each folder plus one ``stat`` of each
followed file per poll. Single-file logs (``<appId>[.<codec>][.inprogress]``) and rolling folders
(``eventlog_v2_<appId>/events_<N>_<appId>[.<codec>]`` with an ``appstatus_<appId>[.inprogress]`` marker)
are both followed; a rolling log moves to the next ``events_<N>_`` file once it exists (Spark closes a
file before it opens the next). Files are ordered by their index, never by modification time, and
every timeout runs on this process's monotonic clock: clock skew between the writers and the watcher
(NFS, containers) changes no timeout. A part listed after a later one (a listing taken while Spark
created them) is waited for: the watcher lists again before it moves past a gap in the numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from spark_state_observer.fleet.app_events import StatusChange
from spark_state_observer.fleet.followed_app import FollowedApp, FollowedApps
from spark_state_observer.fleet.log_listing import Listed, finished_on_disk, list_logs
from spark_state_observer.fleet.log_names import in_shard
from spark_state_observer.fleet.watch_problems import Problems


class Discovery:
    """Which logs the watcher follows."""

    def __init__(
        self,
        book: FollowedApps,
        problems: Problems,
        restore: Callable[[FollowedApp, dict[str, Any]], None],
        *,
        dirs: list[str],
        skip: str | None,
        link_inside: Callable[[str], bool],
        shard: tuple[int, int] | None,
        max_apps: int,
        read_finished_at_start: bool,
    ) -> None:
        """``restore``: resume an application at the position an earlier run saved
        (``spark_state_observer.fleet.watch_positions``); ``skip``: the state file, never a log."""
        self.book, self.problems, self.restore = book, problems, restore
        self.dirs, self.skip, self.link_inside = dirs, skip, link_inside
        self.shard, self.max_apps, self.read_finished_at_start = shard, max_apps, read_finished_at_start
        self.listed_dirs: set[str] = set()  # folders listed successfully at least once

    def round(self, now: float) -> None:
        """List the folders (a problem of an entry reported once while it stays) and follow what is new."""
        listed = list_logs(
            self.dirs,
            listed_before=self.listed_dirs,
            skip=self.skip,
            link_inside=self.link_inside,
            stat_rolling=lambda name: name not in self.book.done and in_shard(name, self.shard),
        )
        for folder in listed.folders:
            self.problems.cleared(folder)
        self.listed_dirs.update(listed.folders)
        for path, kind, message in listed.unusable:
            self.problems.report_once(path, kind, message)
        self.problems.keep_only(listed.entries | set(self.dirs))
        self.discover(listed, now)

    def discover(self, listed: Listed, now: float) -> None:
        """Follow the new logs of ``listed`` in this shard; forget those it lacks (when it is complete)."""
        book, counts = self.book, self.problems.counts
        other_shards = 0
        for name, item in listed.logs.items():
            if not in_shard(name, self.shard):
                other_shards += 1
                continue
            app = book.apps.get(name)
            if app is not None:
                app.listing, app.missing = item, 0
                continue
            if name in book.done:
                continue
            saved = book.saved.pop(name, None)
            if saved is None and item.first and not self.read_finished_at_start and finished_on_disk(item):
                book.done.add(name)
                book.dirty = True
                continue
            if len(book.apps) >= self.max_apps:
                self.problems.report_once(
                    item.path, "too_many_apps", f"{item.path}: already following {self.max_apps} applications; not followed"
                )
                continue
            app = FollowedApp(name, item, now)
            book.apps[name] = app
            counts.apps_discovered += 1
            if saved is not None:
                self.restore(app, saved)
            app.report().status_changes.append(StatusChange("running", f"{name}: following {item.path}", time.time()))
        counts.apps_other_shards = other_shards
        if not listed.complete:
            return
        for name in list(book.apps):
            if name not in listed.logs:
                app = book.apps[name]
                app.missing += 1
                if app.missing < 2:
                    continue  # a listing taken during a rename may miss it: believe it gone when the next one agrees
                if app.status != "finished":
                    self.problems.report(app, "vanished", f"{name}: {app.listing.path} vanished before the application finished")
                book.drop(app, "forgotten", f"{name}: its log is gone")
        book.saved = {n: v for n, v in book.saved.items() if n in listed.logs}
        kept = {n for n in listed.logs if in_shard(n, self.shard)}
        if book.done - kept:
            book.done &= kept
            book.dirty = True
