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

Hostile or unlucky stores cost bounded time and memory. A key whose name the local disk would refuse (a
``spark.app.id`` of 250 characters) is mirrored under a shortened name (its start and a hash; prefix, part
index and codec kept), counted once as ``long_name``; a log that fails on its own is that log's problem, the
others go on. Objects are streamed to a hidden file in ranged GETs of at most ``GET_CHUNK`` bytes, never held
whole in memory, and put in place when complete. An S3 listing reads at most ``LIST_PAGES`` pages per sync
and resumes after the last key it read (``StartAfter``) at the next: a prefix larger than that is listed over
several syncs, one that never ends is cut at ``MAX_KEYS`` (``listing``), and a prefix of many pages is listed
again at most once per ``LIST_COST_FACTOR`` times its listing took. A sync stops fetching at its deadline
(``deadline``; the rest comes at the next). ``spark_state_observer.fleet.store_sync`` runs each mirror's syncs
in a thread of its own, so a store that hangs never holds the local folders' polls.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
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
GET_CHUNK = 8 << 20  # bytes per ranged GET: what one object costs in memory, whatever its size
_PREFETCH_BYTES = 32 << 20  # new objects of at most GET_CHUNK fetched concurrently: at most this much held at once
LIST_PAGES = 50  # S3 LIST pages (1,000 keys each) per sync; a larger prefix is listed over several syncs
MAX_KEYS = 200_000  # keys held for one listing: one that goes on beyond is cut (an endless listing)
LIST_COST_FACTOR = 10  # a prefix of more than _PACED_PAGES pages is listed at most once per 10x its listing's time
_PACED_PAGES = 5
MAX_NAME_BYTES = 200  # a longer file name is shortened for the local disk (most refuse 255 bytes)
DEFAULT_DEADLINE = 60.0  # seconds a sync fetches before it leaves the rest to the next
_NAME_PARTS = re.compile(
    r"^(eventlog_v2_|events_[0-9]{1,18}_|appstatus_)?(.*?)((?:\.[A-Za-z0-9]{1,10})?(?:\.compact)?(?:\.inprogress)?)$", re.S
)
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
    "long_name",
    "listing",
    "deadline",
)


def local_component(name: str) -> str:
    """The local name of one key component: itself, or, when the disk would refuse it, a shortened one.

    Prefix (``eventlog_v2_``, ``events_<n>_``, ``appstatus_``) and suffixes (codec, ``.compact``,
    ``.inprogress``) are kept, so the watcher reads the log, its parts and its end as it would; the
    application part becomes its first 40 characters and a hash of the whole (the same in a folder's name and
    its parts' names, so they stay one log)."""
    if len(name.encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES:
        return name
    match = _NAME_PARTS.match(name)
    head, body, tail = match.groups() if match else ("", name, "")
    if len(tail) > 40:
        body, tail = body + tail, ""
    digest = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    short = body.encode("utf-8", "surrogatepass")[:60].decode("utf-8", "ignore")
    return f"{head}{short}-{digest}{tail}"


class StoreMirror:
    """Mirror the event logs under one object-store URL into ``local_dir``; ``sync`` once per watcher poll."""

    def __init__(
        self,
        url: str,
        local_dir: str,
        shard: tuple[int, int] | None = None,
        read_finished_at_start: bool = False,
        deadline: float = DEFAULT_DEADLINE,
    ) -> None:
        self._location = url  # what the client connects to; ``url`` is what messages show
        self.url = redact(url)
        self.local_dir = local_dir
        self.shard = shard
        self.read_finished_at_start = read_finished_at_start
        self.deadline = deadline
        self.requests: Counter[str] = Counter()  # list, get (head) requests sent
        self.problems: Counter[str] = Counter()  # StorageError kinds, and gap/shrank/overwritten/changed
        self._lock = threading.Lock()  # the request counter (the client's callbacks run in its own thread)
        self._syncing = threading.Lock()  # one sync or prune at a time (``store_sync`` runs syncs in their own thread)
        self._finished: set[str] = set()  # log names the watcher is done with, pruned at the next sync
        self._fs: Any = None
        self._path = ""
        self._counted_by_client = False
        self._s3 = False
        self._listed_etags: dict[str, str] = {}
        self._prefetched: dict[str, bytes] = {}  # whole new small objects fetched together for the logs being mirrored
        self._partial: dict[str, tuple[int, str]] = {}  # the listing being read, over one or more syncs
        self._after: str | None = None  # the last key listed: where the listing resumes (S3 StartAfter)
        self._pages = 0  # pages of the listing being read
        self._list_at = 0.0  # monotonic time before which a many-page prefix is not listed again
        self._ends_at = float("inf")  # this sync's deadline (monotonic)
        self._started_listing = 0.0
        self._full = True  # the listing being read covers the whole prefix (else: from ``_floor`` on)
        self._followed: set[str] = set()  # top-level store names of the logs still followed (the last sync's)
        self._names_seen: tuple[str, str] | None = None  # the smallest and greatest top-level names of the last full listing
        self._last_problem: str | None = None
        self._reported: set[str] = set()  # lasting problems already counted
        os.makedirs(local_dir, exist_ok=True)
        self._state_path = os.path.join(local_dir, STATE_NAME)
        # by local name (the store's, or its shortened form: ``local_component``)
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
        """One LIST (or its next pages), then GET what is new, in order. Never raises: failures are counted problems."""
        with self._syncing:
            self._ends_at = time.monotonic() + self.deadline
            self._prune_finished()
            try:
                listing = self._list()
            except StorageError as exc:
                self._problem(exc.kind, str(exc))
                return
            except Exception as exc:
                error = failure(self.url, exc)
                self._problem(error.kind, str(error))
                return
            if listing is None:
                return  # listed in part (the rest at the next sync), or not yet due
            keys, complete = listing
            try:
                self._fetch(keys, complete)
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
        self._fs, path = filesystem(self._location)
        self._path = path.rstrip("/")
        protocol = self._fs.protocol
        if "s3" in ((protocol,) if isinstance(protocol, str) else tuple(protocol)):
            client = self._fs.connect()  # s3fs: count the API calls its client really sends
            client.meta.events.register("before-call.s3", self._count_call)
            self._counted_by_client = True
            self._s3 = True

    def _count_call(self, model: Any = None, **_: Any) -> None:
        name = getattr(model, "name", "")
        with self._lock:
            self.requests[_S3_KINDS.get(name, "other")] += 1

    def _list(self) -> tuple[dict[str, tuple[int, str]], bool] | None:
        """Relative key -> (size, ETag or "") of every object under the prefix, and whether that is all of them;
        None while a listing is read over several syncs or a large prefix is not due yet."""
        self._connect()
        if not self._s3:
            if not self._counted_by_client:
                self.requests["list"] += 1
            self._fs.invalidate_cache(self._path)  # the client's listing cache would hide new parts
            found = self._fs.find(self._path, detail=True)
            base = len(self._path) + 1
            return {
                key[base:]: (int(info.get("size") or 0), str(info.get("ETag") or ""))
                for key, info in found.items()
                if info.get("type") == "file" and len(key) > base and not key.endswith("/")  # a folder marker is no object
            }, True
        bucket, _, prefix = self._path.partition("/")
        prefix = prefix + "/" if prefix else ""
        if self._after is None:  # a new listing: the whole prefix when due, else only from the first log followed on
            self._started_listing = time.monotonic()
            self._full = self._first or self._names_seen is None or time.monotonic() >= self._list_at
            if not self._full:
                floor = min(self._followed) if self._followed else self._names_seen[1]  # type: ignore[index]
                self._after = prefix + floor[:-1]  # (just before the log's own keys: "app-1" as well as "app-1.inprogress")
        for _ in range(LIST_PAGES):
            request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": 1000}
            if self._after is not None:
                request["StartAfter"] = self._after
            page = self._fs.call_s3("list_objects_v2", **request)
            self._pages += 1
            contents = page.get("Contents") or []
            last = self._after
            for item in contents:
                key = str(item.get("Key", ""))
                if last is not None and key <= last:
                    continue  # S3 lists in key order after StartAfter: anything else is not new
                last = key
                if len(key) > len(prefix) and not key.endswith("/"):  # a folder marker is no object
                    self._partial[key[len(prefix) :]] = (int(item.get("Size") or 0), str(item.get("ETag") or ""))
            cut = len(self._partial) >= MAX_KEYS
            stuck = bool(page.get("IsTruncated")) and (last is None or last == self._after)
            if cut or stuck:
                why = f"more than {MAX_KEYS} keys" if cut else "a listing page that does not advance"
                self._problem("listing", f"{self.url}: {why}; the listing is cut there and read again", once=True)
            self._after = last
            if not page.get("IsTruncated") or cut or stuck:
                keys, pages, full = self._partial, self._pages, self._full
                self._partial, self._after, self._pages = {}, None, 0
                if full:
                    names = [key.split("/", 1)[0] for key in keys]
                    self._names_seen = (min(names), max(names)) if names else None
                    # a prefix of many pages: listed whole again after ten times what this listing took; meanwhile
                    # only from the first log followed on (new logs of names that sort later: application ids with
                    # their start time in them, as standalone, local and YARN name them)
                    self._list_at = time.monotonic() + (
                        LIST_COST_FACTOR * (time.monotonic() - self._started_listing) if pages > _PACED_PAGES else 0
                    )
                return keys, full and not (cut or stuck)
            if time.monotonic() > self._ends_at:
                break
        return None  # the rest of the listing at the next sync, from where it stopped

    # --- pruning ----------------------------------------------------------------------------------------
    def prune(self, finished: set[str] | frozenset[str]) -> None:
        """Remove the mirrored copies of the logs the watcher is done with (by log name); never fetch them again.

        Never waits for a sync in progress (the watcher's poll calls it): then the next sync prunes them."""
        with self._lock:
            self._finished = set(finished)
        if self._syncing.acquire(blocking=False):
            try:
                self._prune_finished()
            finally:
                self._syncing.release()

    def _prune_finished(self) -> None:
        with self._lock:
            finished, self._finished = self._finished, set()
        if not finished:
            return
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
        self._etags = {k: v for k, v in self._etags.items() if local_component(k.split("/", 1)[0]) != name}

    def _forget_gone(self, listing: dict[str, tuple[int, str]]) -> None:
        """Logs gone from the store leave the mirror and its memory (what bounds both)."""
        present = {local_component(key.split("/", 1)[0]) for key in listing}
        self._skipped &= present
        self._pruned = {p for p in self._pruned if p in present or p + _INPROGRESS in present}
        self._etags = {k: v for k, v in self._etags.items() if k in listing}
        for name in os.listdir(self.local_dir):
            if name.startswith(".") or name in present or name.removesuffix(_INPROGRESS) in present:
                continue  # (a copy still named .inprogress whose object was renamed at its end is moved by _single)
            self._remove(name)

    # --- fetching ---------------------------------------------------------------------------------------
    def _fetch(self, listing: dict[str, tuple[int, str]], complete: bool = True) -> None:
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
        work: list[tuple[str, Callable[..., None], tuple[Any, ...], Callable[[], dict[str, int]]]] = [
            (name, self._single, (name, size), lambda name=name, size=size: self._new_single(name, size))  # type: ignore[misc]
            for name, size in singles.items()
        ]
        work += [
            (folder, self._rolling, (folder, files), lambda folder=folder, files=files: self._new_parts(folder, files))  # type: ignore[misc]
            for folder, files in rolling.items()
        ]
        chunk: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = []
        wanted: dict[str, int] = {}
        for key, fetch, args, plan in work:  # logs in chunks of at most _PREFETCH_BYTES of new objects, fetched together
            if time.monotonic() > self._ends_at:
                self._problem("deadline", f"{self.url}: a sync reached its {self.deadline:.0f} s deadline; the rest at the next")
                break
            new = self._isolated(key, plan) or {}
            if chunk and sum(wanted.values()) + sum(new.values()) > _PREFETCH_BYTES:
                self._run(chunk, wanted)
                chunk, wanted = [], {}
            chunk.append((key, fetch, args))
            wanted.update(new)
        else:
            if chunk:
                self._run(chunk, wanted)
            if complete:
                self._forget_gone(listing)
            self._followed = self._still_followed([*singles, *rolling])
            return
        if chunk:
            self._run(chunk, wanted)
        self._followed = self._still_followed([*singles, *rolling])

    def _still_followed(self, logs: list[str]) -> set[str]:
        """The top-level names of the logs this mirror follows: not finished before it came, not pruned, its shard's."""
        followed = set()
        for top in logs:
            local = local_component(top)
            if local not in self._skipped and local.removesuffix(_INPROGRESS) not in self._pruned and in_shard(log_name(local), self.shard):
                followed.add(top)
        return followed

    def _run(self, chunk: list[tuple[str, Callable[..., None], tuple[Any, ...]]], wanted: dict[str, int]) -> None:
        """GET the chunk's small new objects concurrently, then mirror its logs one by one, in order."""
        self._prefetched = self._get_many(wanted) if len(wanted) > 1 else {}
        try:
            for key, fetch, args in chunk:
                self._isolated(key, fetch, *args)
        finally:
            self._prefetched = {}

    def _get_many(self, wanted: dict[str, int]) -> dict[str, bytes]:
        """Whole small objects by relative key, fetched concurrently (one GET each, no HEAD); one that failed is
        missing (``_copy`` GETs it alone)."""
        keys = list(wanted)
        if not self._counted_by_client:
            self.requests["get"] += len(keys)
        try:
            got = self._fs.cat_ranges([f"{self._path}/{k}" for k in keys], [0] * len(keys), [wanted[k] for k in keys], on_error="return")
        except Exception:
            return {}
        return {key: bytes(data) for key, data in zip(keys, got) if isinstance(data, (bytes, bytearray))}

    def _local(self, *parts: str) -> str:
        """Where the object (or folder) of these key parts is mirrored; a log with a shortened name is counted once."""
        names = [local_component(p) for p in parts]
        if names != list(parts):
            self._problem(
                "long_name",
                f"{self.url}/{parts[0][:120]}...: names too long for the local disk; the log is mirrored as {names[0]}",
                once=True,
            )
        return os.path.join(self.local_dir, *names)

    def _new_single(self, name: str, size: int) -> dict[str, int]:
        """What ``_single`` will GET whole for this log now (for the concurrent fetch): small new objects only."""
        local = local_component(name)
        if local in self._skipped or local.removesuffix(_INPROGRESS) in self._pruned or not in_shard(log_name(local), self.shard):
            return {}
        if self._first and not self.read_finished_at_start and not name.endswith(_INPROGRESS):
            return {}
        target = os.path.join(self.local_dir, local)
        if size == 0 or size > GET_CHUNK or "\0" in name or os.path.exists(target) or os.path.exists(target + _INPROGRESS):
            return {}  # read on from where it was, or streamed: GETs of its own
        return {name: size}

    def _new_parts(self, folder: str, files: dict[str, int]) -> dict[str, int]:
        """The parts ``_rolling`` will GET whole for this log now: the next small ones in order, up to a gap."""
        local_folder = local_component(folder)
        if local_folder in self._skipped or local_folder in self._pruned or not in_shard(log_name(local_folder), self.shard):
            return {}
        finished = any(n.startswith(_APPSTATUS) and not n.endswith(_INPROGRESS) for n in files)
        if self._first and finished and not self.read_finished_at_start:
            return {}
        local = os.path.join(self.local_dir, local_folder)
        parts = {int(m.group(1)): n for n in files if (m := _EVENTS_PART.match(n))}
        try:
            have = sorted(int(m.group(1)) for n in os.listdir(local) if (m := _EVENTS_PART.match(n)))
        except FileNotFoundError:
            have = []
        index = have[-1] + 1 if have else min(parts, default=0)
        new: dict[str, int] = {}
        while index in parts:
            size = files[parts[index]]
            if size and size <= GET_CHUNK and "\0" not in parts[index]:  # a name no local file can have: _rolling reports it
                new[f"{folder}/{parts[index]}"] = size
            index += 1
        return new

    def _isolated(self, key: str, fetch: Callable[..., Any], *args: Any) -> Any:
        """One log's failure (a vanished object, a name the local disk refuses) is its problem; the others go on."""
        try:
            return fetch(*args)
        except (StorageError, OSError, ValueError) as exc:
            error = failure(f"{self.url}/{key}", exc) if not isinstance(exc, StorageError) else exc
            self._problem(error.kind, str(error), once=True)
        except Exception as exc:
            error = failure(f"{self.url}/{key}", exc)
            self._problem(error.kind, str(error), once=True)
        return None

    def _single(self, name: str, size: int) -> None:
        """A single-file log: fetched whole when it appears, its new bytes (ranged) where it grows."""
        local = local_component(name)
        if local in self._skipped or local.removesuffix(_INPROGRESS) in self._pruned or not in_shard(log_name(local), self.shard):
            return
        if self._first and not self.read_finished_at_start and not name.endswith(_INPROGRESS):
            self._skipped.add(local)  # finished before we came: the watcher does not read it either
            return
        target = self._local(name)
        written = os.path.join(self.local_dir, local_component(name + _INPROGRESS))
        if not name.endswith(_INPROGRESS) and os.path.exists(written) and not os.path.exists(target):
            os.replace(written, target)  # renamed when the application ended: the same log, read on from where it was
        self._copy(name, target, size)

    def _rolling(self, folder: str, files: dict[str, int]) -> None:
        local_folder = local_component(folder)
        if local_folder in self._skipped or local_folder in self._pruned or not in_shard(log_name(local_folder), self.shard):
            return
        markers = [n for n in files if n.startswith(_APPSTATUS)]
        finished = any(not n.endswith(_INPROGRESS) for n in markers)
        if self._first and finished and not self.read_finished_at_start:
            self._skipped.add(local_folder)
            return
        local = self._local(folder)
        os.makedirs(local, exist_ok=True)
        parts = {int(m.group(1)): n for n in files if (m := _EVENTS_PART.match(n))}
        have = sorted(int(m.group(1)) for n in os.listdir(local) if (m := _EVENTS_PART.match(n)))
        # parts already mirrored may still grow (append stores); new ones come in order, never past a gap
        for index in have:
            if index in parts:
                self._copy(f"{folder}/{parts[index]}", self._local(folder, parts[index]), files[parts[index]])
        index = have[-1] + 1 if have else min(parts, default=0)
        while index in parts:
            if time.monotonic() > self._ends_at:
                return  # the next parts at the next sync, in order
            self._copy(f"{folder}/{parts[index]}", self._local(folder, parts[index]), files[parts[index]])
            index += 1
        if any(i > index for i in parts):
            self._problem("gap", f"{self.url}/{folder}: part {index} is not listed yet but later ones are; waiting for it", once=True)
            return  # the marker waits too: the application is not finished for the watcher while a part is missing
        for name in markers:  # the status marker after the parts: the watcher sees the end only when all is there
            target = self._local(folder, name)
            if not os.path.exists(target):
                open(target, "wb").close()
        listed = {local_component(n) for n in markers}
        for name in os.listdir(local):  # appstatus_*.inprogress renamed to its final name
            if name.startswith(_APPSTATUS) and name not in listed:
                os.remove(os.path.join(local, name))

    def _copy(self, key: str, target: str, size: int) -> None:
        """Bring ``target`` up to ``size`` bytes of the object ``key``: nothing if it is there, GETs of the rest."""
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
        # the new bytes go to a hidden file first: the watcher sees a part whole, never a part of it
        staging = os.path.join(self.local_dir, ".fetch-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24])
        try:
            if not self._download(key, staging, have, size):
                self._problem("changed", f"{self.url}/{key}: changed while being read (listed as {size} bytes); read again next poll")
                return
            if have == 0 and not os.path.exists(target):
                os.replace(staging, target)
            else:
                with open(staging, "rb") as src, open(target, "ab") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        finally:
            try:
                os.remove(staging)
            except FileNotFoundError:
                pass
        if etag:
            self._etags[key] = etag

    def _download(self, key: str, staging: str, have: int, size: int) -> bool:
        """Bytes ``[have, size)`` of ``key`` into ``staging`` in GETs of at most ``GET_CHUNK``; False if the object
        gave other than the bytes listed."""
        with open(staging, "wb") as f:
            prefetched = self._prefetched.pop(key, None) if have == 0 else None
            if prefetched is not None:
                f.write(prefetched)
                return len(prefetched) == size
            for start in range(have, size, GET_CHUNK):
                end = min(size, start + GET_CHUNK)
                if not self._counted_by_client:
                    self.requests["get"] += 1
                data = self._fs.cat_file(f"{self._path}/{key}", start=start or None, end=end)
                if len(data) != end - start:
                    return False
                f.write(data)
        return True

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
