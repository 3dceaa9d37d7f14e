"""Follow event logs in an object store: keep a local mirror of a prefix, part by part, for the folder watcher.

Why a mirror: the event-log watcher (``spark_state_observer.fleet.eventlog_watch``) follows local folders with
offsets, codecs, restarts and lifecycles already right. An object store differs only in how files are
seen: s3a writes an object when Spark closes it, so a rolling log appears part by part
(``eventlog_v2_<app>/events_<n>_<app>[.codec]``, ``appstatus_<app>[.inprogress]``) and a part never
changes once visible. Each ``sync`` therefore costs one LIST of the prefix (paginated) and one GET per
new part (a ranged GET of the new bytes where a store lets an object grow, as HDFS and ADLS appends do),
and the watcher reads the mirror as if Spark wrote there. New parts are fetched concurrently, in chunks of
at most ``_PREFETCH_BYTES``, and written in order.

Guarantees: parts of a rolling log are fetched in index order and never past a gap (a part not yet
listed is waited for, so the watcher never skips an index); a part is written in one piece before the
next one is created; what is mirrored is the mirror's position, kept on disk (object and part, by their
sizes), so a restart GETs nothing again. Logs already finished at the first sync are not fetched unless
asked for (a History Server bucket holds thousands), and other shards' logs are never fetched. Store
failures never raise: each is a counted problem by kind (``StorageError.kind``) and the next sync retries.
Requests are counted by kind (``list``, ``get``, as the store's client sent them where it tells: S3).

Disk stays bounded however many applications come and go: a log the watcher is done with (``prune``) is
removed from the mirror and remembered by name, never fetched again; a log gone from the store is removed
from the mirror and forgotten. An object that changes under the mirror is never mixed into what was read:
a part overwritten in place (a new ETag where the store gives one) or shorter than what was read is a
counted problem, and a GET that returns other than the bytes listed is not written. A bucket that vanishes
or answers errors is a counted problem each sync, and the mirror keeps what it has.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
from collections import Counter
from typing import Any, Callable

from spark_state_observer.capture.storage import StorageError, failure, filesystem, redact
from spark_state_observer.fleet.log_names import in_shard, log_name
from spark_state_observer.model.bounded import loads

log = logging.getLogger(__name__)

_ROLLING_DIR = "eventlog_v2_"
_EVENTS_PART = re.compile(r"^events_(\d+)_")
_APPSTATUS = "appstatus_"
_INPROGRESS = ".inprogress"
_MAX_REPORTED = 10_000
_PREFETCH_BYTES = 32 << 20  # new objects fetched concurrently: at most this much held at once (one larger part alone)
STATE_NAME = ".store-mirror.json"  # a dot name: the watcher never follows it
MAX_STATE_BYTES = 256 << 20  # the saved state: a few names and ETags per log (a cut file fails to parse)
# S3 API operations by request kind (what the endpoint counts)
_S3_KINDS = {"ListObjectsV2": "list", "ListObjects": "list", "GetObject": "get", "HeadObject": "head"}
REQUEST_KINDS = ("list", "get", "head", "other")
PROBLEM_KINDS = (
    "not_found",
    "denied",
    "credentials",
    "unreachable",
    "throttled",
    "missing_extra",
    "unsupported",
    "error",
    "gap",
    "shrank",
    "overwritten",
    "changed",
    "state_file",
)


class StoreMirror:
    """Mirror the event logs under one object-store URL into ``local_dir``; ``sync`` once per watcher poll."""

    def __init__(self, url: str, local_dir: str, shard: tuple[int, int] | None = None, read_finished_at_start: bool = False) -> None:
        self.url = redact(url)
        self.local_dir = local_dir
        self.shard = shard
        self.read_finished_at_start = read_finished_at_start
        self.requests: Counter[str] = Counter()  # list, get (head) requests sent
        self.problems: Counter[str] = Counter()  # StorageError kinds, and gap/shrank/overwritten/changed
        self._lock = threading.Lock()
        self._fs: Any = None
        self._path = ""
        self._counted_by_client = False
        self._listed_etags: dict[str, str] = {}
        self._prefetched: dict[str, bytes] = {}  # whole new objects fetched together for the logs being mirrored
        self._last_problem: str | None = None
        self._reported: set[str] = set()  # lasting problems already counted
        os.makedirs(local_dir, exist_ok=True)
        self._state_path = os.path.join(local_dir, STATE_NAME)
        self._skipped: set[str] = set()  # logs finished before the first sync: never fetched
        self._pruned: set[str] = set()  # logs the watcher was done with, removed from the mirror: never fetched again
        self._etags: dict[str, str] = {}  # relative key -> the ETag of what was read (stores that give one)
        self._first = True
        try:
            with open(self._state_path, encoding="utf-8") as f:
                state = loads(f.read(MAX_STATE_BYTES + 1))  # bounded: the mirror's own file, but on a shared disk
            if not isinstance(state, dict):
                raise ValueError("not a JSON object")
            self._skipped = {s for s in state.get("skipped", []) if isinstance(s, str)}
            self._pruned = {s for s in state.get("pruned", []) if isinstance(s, str)}
            etags = state.get("etags", {})
            self._etags = {k: v for k, v in etags.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(etags, dict) else {}
            self._first = False
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, AttributeError, RecursionError) as exc:  # not JSON, or not the shape saved
            self._skipped, self._pruned, self._etags = set(), set(), {}
            self._problem("state_file", f"{self._state_path}: unreadable mirror state ({exc}); starting afresh")

    def sync(self) -> None:
        """One LIST, then GET what is new, in order. Never raises: failures are counted problems."""
        try:
            listing = self._list()
        except StorageError as exc:
            self._problem(exc.kind, str(exc))
            return
        except Exception as exc:
            error = failure(self.url, exc)
            self._problem(error.kind, str(error))
            return
        try:
            self._fetch(listing)
            self._save_state()
        except StorageError as exc:
            self._problem(exc.kind, str(exc))
        except Exception as exc:
            error = failure(self.url, exc)
            self._problem(error.kind, str(error))
        self._first = False

    # --- listing ----------------------------------------------------------------------------------------
    def _connect(self) -> None:
        if self._fs is not None:
            return
        self._fs, path = filesystem(self.url)
        self._path = path.rstrip("/")
        protocol = self._fs.protocol
        if "s3" in ((protocol,) if isinstance(protocol, str) else tuple(protocol)):
            client = self._fs.connect()  # s3fs: count the API calls its client really sends
            client.meta.events.register("before-call.s3", self._count_call)
            self._counted_by_client = True

    def _count_call(self, model: Any = None, **_: Any) -> None:
        name = getattr(model, "name", "")
        with self._lock:
            self.requests[_S3_KINDS.get(name, "other")] += 1

    def _list(self) -> dict[str, tuple[int, str]]:
        """Relative key -> (size, ETag or "") of every object under the prefix (one paginated LIST)."""
        self._connect()
        self._fs.invalidate_cache(self._path)  # the client's listing cache would hide new parts
        if not self._counted_by_client:
            self.requests["list"] += 1
        found = self._fs.find(self._path, detail=True)
        base = len(self._path) + 1
        return {
            key[base:]: (int(info.get("size") or 0), str(info.get("ETag") or ""))
            for key, info in found.items()
            if info.get("type") == "file" and len(key) > base and not key.endswith("/")  # a folder marker is no object
        }

    # --- pruning ----------------------------------------------------------------------------------------
    def prune(self, finished: set[str] | frozenset[str]) -> None:
        """Remove the mirrored copies of the logs the watcher is done with (by log name); never fetch them again."""
        try:
            names = os.listdir(self.local_dir)
        except OSError:
            return
        pruned = [name for name in names if not name.startswith(".") and log_name(name) in finished]
        for name in pruned:
            self._remove(name)
            self._pruned.add(name.removesuffix(_INPROGRESS))
        if pruned:
            try:
                self._save_state()  # at once: a restart must not fetch a pruned log again
            except OSError as exc:
                self._problem("state_file", f"{self._state_path}: cannot save the mirror state ({exc})")

    def _remove(self, name: str) -> None:
        path = os.path.join(self.local_dir, name)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
        prefix = name + "/"
        self._etags = {k: v for k, v in self._etags.items() if k != name and not k.startswith(prefix)}

    def _forget_gone(self, listing: dict[str, tuple[int, str]]) -> None:
        """Logs gone from the store leave the mirror and its memory (what bounds both)."""
        present = {key.split("/", 1)[0] for key in listing}
        self._skipped &= present
        self._pruned = {p for p in self._pruned if p in present or p + _INPROGRESS in present}
        self._etags = {k: v for k, v in self._etags.items() if k in listing}
        for name in os.listdir(self.local_dir):
            if name.startswith(".") or name in present or name.removesuffix(_INPROGRESS) in present:
                continue  # (a copy still named .inprogress whose object was renamed at its end is moved by _single)
            self._remove(name)

    # --- fetching ---------------------------------------------------------------------------------------
    def _fetch(self, listing: dict[str, tuple[int, str]]) -> None:
        rolling: dict[str, dict[str, int]] = {}
        singles: dict[str, int] = {}
        self._listed_etags = {key: etag for key, (_, etag) in listing.items() if etag}
        for key, (size, _) in listing.items():
            parts = key.split("/")
            if len(parts) == 1 and not parts[0].startswith((".", _ROLLING_DIR)):
                singles[key] = size
            elif len(parts) == 2 and parts[0].startswith(_ROLLING_DIR) and parts[1] and not parts[1].startswith("."):
                rolling.setdefault(parts[0], {})[parts[1]] = size
            # anything else under the prefix is not an event log: not fetched
        work: list[tuple[str, Callable[..., None], tuple[Any, ...], dict[str, int]]] = [
            (name, self._single, (name, size), self._new_single(name, size)) for name, size in singles.items()
        ]
        work += [(folder, self._rolling, (folder, files), self._new_parts(folder, files)) for folder, files in rolling.items()]
        chunk: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = []
        wanted: dict[str, int] = {}
        for key, fetch, args, new in work:  # logs in chunks of at most _PREFETCH_BYTES of new objects, fetched together
            if chunk and sum(wanted.values()) + sum(new.values()) > _PREFETCH_BYTES:
                self._run(chunk, wanted)
                chunk, wanted = [], {}
            chunk.append((key, fetch, args))
            wanted.update(new)
        if chunk:
            self._run(chunk, wanted)
        self._forget_gone(listing)

    def _run(self, chunk: list[tuple[str, Callable[..., None], tuple[Any, ...]]], wanted: dict[str, int]) -> None:
        """GET the chunk's new objects concurrently, then mirror its logs one by one, in order, from what came."""
        self._prefetched = self._get_many(list(wanted)) if len(wanted) > 1 else {}
        try:
            for key, fetch, args in chunk:
                self._isolated(key, fetch, *args)
        finally:
            self._prefetched = {}

    def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        """Whole objects by relative key, fetched concurrently; one that failed is missing (``_copy`` GETs it alone)."""
        paths = {f"{self._path}/{key}": key for key in keys}
        if not self._counted_by_client:
            self.requests["get"] += len(paths)
        try:
            got = self._fs.cat(list(paths), on_error="return")
        except Exception:
            return {}
        by_key = {paths.get(p) or paths.get(p.lstrip("/")) or paths.get("/" + p): data for p, data in got.items()}
        return {key: bytes(data) for key, data in by_key.items() if key is not None and isinstance(data, (bytes, bytearray))}

    def _new_single(self, name: str, size: int) -> dict[str, int]:
        """What ``_single`` will GET whole for this log now (for the concurrent fetch)."""
        if name in self._skipped or name.removesuffix(_INPROGRESS) in self._pruned or not in_shard(log_name(name), self.shard):
            return {}
        if self._first and not self.read_finished_at_start and not name.endswith(_INPROGRESS):
            return {}
        target = os.path.join(self.local_dir, name)
        if size == 0 or "\0" in name or os.path.exists(target) or os.path.exists(target + _INPROGRESS):
            return {}  # read on from where it was: a ranged GET of its own
        return {name: size}

    def _new_parts(self, folder: str, files: dict[str, int]) -> dict[str, int]:
        """The parts ``_rolling`` will GET whole for this log now: the next ones in order, up to a gap."""
        if folder in self._skipped or folder in self._pruned or not in_shard(log_name(folder), self.shard):
            return {}
        finished = any(n.startswith(_APPSTATUS) and not n.endswith(_INPROGRESS) for n in files)
        if self._first and finished and not self.read_finished_at_start:
            return {}
        local = os.path.join(self.local_dir, folder)
        parts = {int(m.group(1)): n for n in files if (m := _EVENTS_PART.match(n))}
        try:
            have = sorted(int(m.group(1)) for n in os.listdir(local) if (m := _EVENTS_PART.match(n)))
        except FileNotFoundError:
            have = []
        index = have[-1] + 1 if have else min(parts, default=0)
        new: dict[str, int] = {}
        while index in parts:
            if files[parts[index]] and "\0" not in parts[index]:  # a name no local file can have: _rolling reports it
                new[f"{folder}/{parts[index]}"] = files[parts[index]]
            index += 1
        return new

    def _isolated(self, key: str, fetch: Callable[..., None], *args: Any) -> None:
        """One log's failure (a vanished object, a name the local disk refuses) is its problem; the others go on."""
        try:
            fetch(*args)
        except (StorageError, OSError, ValueError) as exc:
            error = failure(f"{self.url}/{key}", exc) if not isinstance(exc, StorageError) else exc
            self._problem(error.kind, str(error), once=True)
        except Exception as exc:
            error = failure(f"{self.url}/{key}", exc)
            self._problem(error.kind, str(error), once=True)

    def _single(self, name: str, size: int) -> None:
        """A single-file log: fetched whole when it appears, its new bytes (ranged) where it grows."""
        if name in self._skipped or name.removesuffix(_INPROGRESS) in self._pruned or not in_shard(log_name(name), self.shard):
            return
        if self._first and not self.read_finished_at_start and not name.endswith(_INPROGRESS):
            self._skipped.add(name)  # finished before we came: the watcher does not read it either
            return
        target = os.path.join(self.local_dir, name)
        written = target + _INPROGRESS
        if not name.endswith(_INPROGRESS) and os.path.exists(written) and not os.path.exists(target):
            os.replace(written, target)  # renamed when the application ended: the same log, read on from where it was
        self._copy(name, target, size)

    def _rolling(self, folder: str, files: dict[str, int]) -> None:
        if folder in self._skipped or folder in self._pruned or not in_shard(log_name(folder), self.shard):
            return
        markers = [n for n in files if n.startswith(_APPSTATUS)]
        finished = any(not n.endswith(_INPROGRESS) for n in markers)
        if self._first and finished and not self.read_finished_at_start:
            self._skipped.add(folder)
            return
        local = os.path.join(self.local_dir, folder)
        os.makedirs(local, exist_ok=True)
        parts = {int(m.group(1)): n for n in files if (m := _EVENTS_PART.match(n))}
        have = sorted(int(m.group(1)) for n in os.listdir(local) if (m := _EVENTS_PART.match(n)))
        # parts already mirrored may still grow (append stores); new ones come in order, never past a gap
        for index in have:
            if index in parts:
                self._copy(f"{folder}/{parts[index]}", os.path.join(local, parts[index]), files[parts[index]])
        index = have[-1] + 1 if have else min(parts, default=0)
        while index in parts:
            self._copy(f"{folder}/{parts[index]}", os.path.join(local, parts[index]), files[parts[index]])
            index += 1
        if any(i > index for i in parts):
            self._problem("gap", f"{self.url}/{folder}: part {index} is not listed yet but later ones are; waiting for it", once=True)
            return  # the marker waits too: the application is not finished for the watcher while a part is missing
        for name in markers:  # the status marker after the parts: the watcher sees the end only when all is there
            target = os.path.join(local, name)
            if not os.path.exists(target):
                open(target, "wb").close()
        for name in os.listdir(local):  # appstatus_*.inprogress renamed to its final name
            if name.startswith(_APPSTATUS) and name not in files:
                os.remove(os.path.join(local, name))

    def _copy(self, key: str, target: str, size: int) -> None:
        """Bring ``target`` up to ``size`` bytes of the object ``key``: nothing if it is there, one GET of the rest."""
        try:
            have = os.path.getsize(target)
        except FileNotFoundError:
            have = 0
        etag, read = self._listed_etags.get(key, ""), self._etags.get(key)
        if etag and read and etag != read:
            self._problem("overwritten", f"{self.url}/{key}: overwritten after it was read; the new content is not read", once=True)
            return
        if size == have and os.path.exists(target):
            if etag and read is None and size:
                self._etags[key] = etag  # read before ETags were kept
            return
        if size < have:
            self._problem(
                "shrank", f"{self.url}/{key}: smaller than what was read ({size} < {have} bytes); rewritten, not read again", once=True
            )
            return
        data = b""
        if size > have:
            prefetched = self._prefetched.pop(key, None) if have == 0 else None
            if prefetched is not None:
                data = prefetched
            else:
                if not self._counted_by_client:
                    self.requests["get"] += 1
                data = self._fs.cat_file(f"{self._path}/{key}", start=have or None, end=size)
            if len(data) != size - have:
                self._problem("changed", f"{self.url}/{key}: changed while being read (listed as {size} bytes); read again next poll")
                return
        with open(target, "ab") as f:  # one write: the watcher sees the part whole before the next exists
            f.write(data)
        if etag:
            self._etags[key] = etag

    # --- state and problems -----------------------------------------------------------------------------
    def _save_state(self) -> None:
        tmp = self._state_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"url": self.url, "skipped": sorted(self._skipped), "pruned": sorted(self._pruned), "etags": self._etags}, f)
        os.replace(tmp, self._state_path)

    def _problem(self, kind: str, message: str, once: bool = False) -> None:
        """Count a problem and log it; ``once``: a lasting condition (a gap, a refused name) is counted when first seen."""
        if once:
            if message in self._reported:
                return
            if len(self._reported) >= _MAX_REPORTED:
                self._reported.clear()
            self._reported.add(message)
        self.problems[kind] += 1
        if message != self._last_problem:
            log.warning("spark-state-observer: %s", redact(message))
        self._last_problem = message
