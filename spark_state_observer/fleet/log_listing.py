"""Listing: the logs in the watched folders (single files and rolling folders), as a pure function of the folders'
contents; symbolic links only where allowed. What to follow of them is ``spark_state_observer.fleet.discovery``'s.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from spark_state_observer.fleet.followed_app import Listing
from spark_state_observer.fleet.log_names import APPSTATUS, INPROGRESS, ROLLING_DIR, log_name


@dataclass
class Listed:
    """One listing of every watched folder."""

    logs: dict[str, Listing] = field(default_factory=dict)  # by log name
    complete: bool = True  # every folder could be listed
    folders: list[str] = field(default_factory=list)  # the folders listed
    entries: set[str] = field(default_factory=set)  # every entry looked at (its problems stay reported once)
    unusable: list[tuple[str, str, str]] = field(default_factory=list)  # (path, problem kind, message)


def list_logs(
    dirs: Iterable[str],
    *,
    listed_before: set[str],
    skip: str | None = None,
    link_inside: Callable[[str], bool] = lambda path: True,
    stat_rolling: Callable[[str], bool] = lambda name: True,
) -> Listed:
    """Every log in ``dirs``: ``listed_before``, the folders listed before (a log in a folder's first listing is
    ``first``); ``skip``, a path never taken for a log (the state file); ``link_inside``, whether a symbolic link may
    be followed; ``stat_rolling``, whether a rolling folder's modification time is wanted (one ``stat`` each)."""
    out = Listed()
    for folder in dirs:
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            out.complete = False
            out.unusable.append((folder, "unreadable", f"{folder}: cannot list the event-log folder: {exc.strerror or exc}"))
            continue
        out.folders.append(folder)
        first = folder not in listed_before
        for entry in entries:
            if entry.name.startswith(".") or (skip and entry.path == skip):
                continue
            out.entries.add(entry.path)
            try:
                is_dir = entry.is_dir()
                is_file = not is_dir and entry.is_file()
            except OSError:
                is_dir = is_file = False
            if is_dir and not entry.name.startswith(ROLLING_DIR):
                continue
            if not is_dir and not is_file:
                out.unusable.append((entry.path, "not_regular", why_unusable(entry.path)))
                continue
            if entry.is_symlink() and not link_inside(entry.path):
                out.unusable.append(
                    (
                        entry.path,
                        "symlink",
                        f"{entry.path}: a symbolic link to a target outside the watched folders; not followed (see --follow-symlinks)",
                    )
                )
                continue
            name = log_name(entry.name)
            mtime = -1
            if is_dir and stat_rolling(name):  # a rolling folder changes when files come
                try:
                    mtime = entry.stat().st_mtime_ns
                except OSError:
                    pass
            item = Listing("rolling" if is_dir else "single", entry.path, is_file and not entry.name.endswith(INPROGRESS), mtime, first)
            if name in out.logs and out.logs[name].path != entry.path:
                out.unusable.append(
                    (
                        entry.path,
                        "duplicate_log",
                        f"{entry.path}: another log of {name} is already followed ({out.logs[name].path}); this one is ignored",
                    )
                )
                continue
            out.logs[name] = item
    return out


def link_inside(path: str, roots: Iterable[str], follow_symlinks: bool) -> bool:
    """Whether a symbolic link may be followed: ``follow_symlinks``, or its target inside one of ``roots``."""
    if follow_symlinks:
        return True
    target = os.path.realpath(path)
    return any(target == root or target.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def why_unusable(path: str) -> str:
    """Why a folder entry that is neither a file nor a folder is never opened."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{path}: symbolic link loop; ignored"
        return f"{path}: cannot be read ({exc.strerror or exc}); ignored"
    kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file"
    return f"{path}: {kind}; never opened"


def finished_on_disk(item: Listing) -> bool:
    """Whether a log says its application ended: a single file without ``.inprogress``, a final ``appstatus`` marker."""
    if item.kind == "single":
        return item.finished
    try:
        names = os.listdir(item.path)
    except OSError:
        return False
    return any(n.startswith(APPSTATUS) and not n.endswith(INPROGRESS) for n in names)
