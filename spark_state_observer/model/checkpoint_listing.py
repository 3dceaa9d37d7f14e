"""Which snapshot each store instance of a checkpoint has, by listing its state folders only.

Spark's progress names the snapshot state of the few most lagging store instances (``SnapshotLastUploaded``,
top 5 by default); the checkpoint's listing names it for every instance. This reads no file, only folder
listings (nothing trusted, everything bounded: a folder that cannot be listed is a problem line), so the live
observer can afford it on its worker now and then: per operator, partition and store, the newest snapshot
version (``N.zip`` / ``N.snapshot``, either checkpoint format), the last version, and the changelog or delta
files a restore would replay after that snapshot. Standard library only, so the signal rules
(``spark_state_observer.signals.snapshots``) use it below the composition roots that know where a checkpoint is.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from urllib.parse import urlparse

MAX_INSTANCES = 20_000  # store instances listed per checkpoint: 4 stores x 5,000 partitions, as the progress parser keeps
_STATE_FILE = re.compile(r"^(?P<version>[0-9]{1,18})(?:_[0-9a-f-]{36})?\.(?P<kind>delta|snapshot|zip|changelog)$")
_NUMBER = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True)
class InstanceSnapshots:
    """One store instance as its folder shows it."""

    newest_snapshot: int | None  # None: no snapshot was ever uploaded
    last_version: int
    replay_files: int  # changelog/delta files after the newest snapshot

    @property
    def lag(self) -> int:
        """Versions since the newest snapshot; since the first version when there is none."""
        return self.last_version - (self.newest_snapshot or 0)


Listing = dict[tuple[int, int, str], InstanceSnapshots]
"""(operator id, partition, store) -> what its folder holds."""


def local_root(location: str) -> str | None:
    """The local folder of a checkpoint location (a path or a ``file:`` URL); None for remote ones."""
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        return None
    return parsed.path if parsed.scheme else location


def last_commit_before(location: str, before: float) -> float | None:
    """When the checkpoint at ``location`` last committed a batch before ``before`` (epoch seconds): the newest
    modification time of its ``commits/`` files earlier than that (the new run may have committed already).
    A restarted query's downtime when its previous run was not seen; None for a remote checkpoint, or when
    nothing earlier is there (a copied checkpoint has new times)."""
    root = local_root(location)
    if root is None:
        return None
    commits = os.path.join(root, "commits")
    try:
        names = [n for n in list_dir(commits) if n.isdigit()]
    except UnreadableFolder:
        return None
    times = []
    for name in names:
        try:
            times.append(os.path.getmtime(os.path.join(commits, name)))
        except OSError:  # removed by Spark's cleanup meanwhile
            continue
    earlier = [t for t in times if t < before]
    return max(earlier) if earlier else None


def list_snapshots(root: str) -> tuple[Listing, list[str]]:
    """Every store instance under ``root/state`` with its snapshot state, and the problems met on the way."""
    listing: Listing = {}
    problems: list[str] = []
    state = os.path.join(root, "state")
    if not is_dir(state):
        return listing, problems
    for op in _numbers(state, problems):
        for part in _numbers(os.path.join(state, str(op)), problems):
            folder = os.path.join(state, str(op), str(part))
            try:
                names = list_dir(folder)
            except UnreadableFolder as exc:
                problems.append(str(exc))
                continue
            stores = [n for n in names if not n.startswith("_") and n != "SSTs" and "." not in n and is_dir(os.path.join(folder, n))]
            for store, store_names in _stores(folder, stores, names, problems):
                instance = _instance(store_names)
                if instance is not None:
                    listing[(op, part, store)] = instance
                if len(listing) >= MAX_INSTANCES:
                    problems.append(f"{state}: more than {MAX_INSTANCES} store instances; the rest is not listed")
                    return listing, problems
    return listing, problems


class UnreadableFolder(OSError):
    """A folder that cannot be listed; the message names it."""


def list_dir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError as exc:
        raise UnreadableFolder(f"{path}: folder cannot be listed ({exc.strerror or exc})") from None


def is_dir(path: str) -> bool:
    """A folder (symlinks followed); False for anything that cannot be stat'ed."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _numbers(folder: str, problems: list[str]) -> list[int]:
    try:
        return sorted(int(n) for n in list_dir(folder) if _NUMBER.fullmatch(n))
    except UnreadableFolder as exc:
        problems.append(str(exc))
        return []


def _stores(folder: str, stores: list[str], names: list[str], problems: list[str]) -> list[tuple[str, list[str]]]:
    """Multi-store operators (stream-stream join) keep one folder per store; the others their files directly."""
    if not stores:
        return [("default", names)]
    out = []
    for store in sorted(stores):
        try:
            out.append((store[:100], list_dir(os.path.join(folder, store))))
        except UnreadableFolder as exc:
            problems.append(str(exc))
    return out


def _instance(names: list[str]) -> InstanceSnapshots | None:
    versions: dict[str, set[int]] = {"snapshot": set(), "replay": set()}
    for name in names:
        m = _STATE_FILE.match(name)
        if m:
            versions["snapshot" if m["kind"] in ("zip", "snapshot") else "replay"].add(int(m["version"]))
    every = versions["snapshot"] | versions["replay"]
    if not every:
        return None
    newest = max(versions["snapshot"], default=None)
    replay = sum(1 for v in versions["replay"] if v > (newest or 0))
    return InstanceSnapshots(newest, max(every), replay)
