"""A checkpoint in an object store, laid out on local disk for the inspector with bounded, ranged reads.

Why not a copy: a RocksDB checkpoint holds snapshot zips and SST files of hundreds of megabytes per
partition, and the inspector needs only their sizes, plus the ``metadata`` member of each snapshot zip (the
SST list it names). So one LIST of the prefix gives every object's size, and the local tree gets:

- the few small files the inspector reads (``metadata``, the newest two ``offsets`` entries, the newest
  commits, each operator's ``_metadata`` files), at most ``MAX_LOG_ENTRY_BYTES + 1`` bytes each (a larger one is then
  refused by the inspector as it would be locally);
- for each snapshot zip, a sparse file of the object's size holding only the byte ranges a zip reader
  visits: the tail (end of central directory, at most 64 KiB), the central directory (at most
  ``MAX_ZIP_DIRECTORY_BYTES``) and the ``metadata`` member's local header and data (at most
  ``MAX_ZIP_METADATA_BYTES`` of declared size);
- for every other object, a sparse file of its size (no GET at all).

The inspector reads those files exactly as it reads a local checkpoint, so its report is the same; the
disk used is the bytes read. A reader that needs other bytes (a changelog's lineage header, a checksum file,
every byte of a state file to verify) gets them from the store through ``files.remote``, ranged and bounded
as its local read is, never the layout's zeros. A key the local disk cannot hold (a name too long, ``x``
beside ``x/y``) is skipped and named in ``StageCost.skipped``, the rest laid out. Folder markers (keys ending in ``/``, as s3a writes them) become folders. An
object that changes between the LIST and its GET (overwritten, deleted) or a store failure is a
``StorageError``: a clear message, never a report built from a mix of old and new bytes.
"""

from __future__ import annotations

import os
import re
import struct
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from spark_state_observer.capture.storage import StorageError, failure, filesystem, find, is_url, local_name, redact
from spark_state_observer.offline.checkpoint import files
from spark_state_observer.offline.checkpoint.files import MAX_LOG_ENTRY_BYTES, MAX_ZIP_DIRECTORY_BYTES, MAX_ZIP_METADATA_BYTES
from spark_state_observer.offline.checkpoint.layout import MAX_COMMITS_READ

_EOCD = b"PK\x05\x06"
_TAIL = (1 << 16) + 22  # what a zip reader scans for the end of the central directory
_LOCAL_HEADER = 30
_NUMBER = re.compile(r"[0-9]{1,18}")
_OPERATOR_METADATA = re.compile(r"state/[0-9]{1,18}/_metadata/metadata")
_ZIP = re.compile(r"^[0-9]{1,18}(?:_[0-9a-f-]{36})?\.zip$")


@dataclass
class StageCost:
    """What laying out a checkpoint cost: objects listed, GETs sent, bytes read (against the bytes listed)."""

    objects: int = 0
    gets: int = 0
    bytes_read: int = 0
    bytes_listed: int = 0
    skipped: list[str] = field(default_factory=list)  # keys not laid out (the local disk refuses them), the first MAX_SKIPPED
    skipped_count: int = 0


MAX_SKIPPED = 20


class _Stage:
    def __init__(self, url: str, into: str) -> None:
        self.url = redact(url)
        self.fs, path = filesystem(url)
        self.path = path.rstrip("/")
        self.root = os.path.join(into, os.path.basename(self.path) or "root")
        self.cost = StageCost()
        self._remote: dict[str, str] = {}  # local path -> relative key, for files whose bytes are not all laid out

    def remote(self, path: str) -> bool:
        """Whether ``path`` is a laid-out file whose bytes are not all on disk (``files.RemoteFiles``)."""
        return path in self._remote

    def read(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object laid out at ``path``, from the store (``files.RemoteFiles``)."""
        relative = self._remote[path]
        if end <= start:
            return b""
        try:
            data = self.fs.cat_file(f"{self.path}/{relative}", start=start, end=end)
        except Exception as exc:
            raise files.UnreadableFile(str(failure(f"{self.url}/{relative}", exc))) from None
        self.cost.gets += 1
        self.cost.bytes_read += len(data)
        if len(data) != end - start:
            raise files.UnreadableFile(f"{self.url}/{relative}: changed while being read (listed larger); inspect again")
        return bytes(data)

    def _skip(self, relative: str, exc: OSError) -> None:
        self.cost.skipped_count += 1
        if len(self.cost.skipped) < MAX_SKIPPED:
            self.cost.skipped.append(f"{self.url}/{relative[:120]}: not read, the local disk cannot hold it ({exc.strerror or exc})")

    def build(self) -> str:
        try:
            found = find(self.fs, self.path)
        except Exception as exc:
            raise failure(self.url, exc) from None
        if not found:
            raise StorageError(f"{self.url}: not found (no such bucket, container or key)", "not_found")
        os.makedirs(self.root, exist_ok=True)
        objects: dict[str, int] = {}
        for key, info in found.items():
            relative = key[len(self.path) :]
            target = local_name(self.root, relative)
            if target is None:
                continue
            if key.endswith("/") or info.get("type") == "directory":
                try:
                    os.makedirs(target, exist_ok=True)  # a folder marker
                except OSError as exc:
                    self._skip(relative.strip("/"), exc)
                continue
            objects[relative.strip("/")] = int(info.get("size") or 0)
        whole = _read_whole(objects)
        for relative, size in objects.items():
            target = local_name(self.root, relative)
            if target is None:
                continue
            self.cost.objects += 1
            self.cost.bytes_listed += size
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "xb") as f:
                    f.truncate(size)  # sparse: the size the inspector sees, no bytes on disk
            except OSError as exc:  # a name too long, a key that is also a folder ("x" and "x/y"), a duplicate
                self._skip(relative, exc)
                continue
            if not (relative in whole and size <= MAX_LOG_ENTRY_BYTES):
                self._remote[target] = relative  # the rest of its bytes are read from the store when a reader needs them
            try:
                if relative in whole:
                    self._fill(relative, target, 0, min(size, MAX_LOG_ENTRY_BYTES + 1), size)
                elif relative.startswith("state/") and _ZIP.match(os.path.basename(relative)):
                    self._zip(relative, target, size)
            except StorageError:
                raise
            except Exception as exc:
                raise failure(f"{self.url}/{relative}", exc) from None
        return self.root

    def _fill(self, relative: str, target: str, start: int, end: int, size: int) -> bytes:
        """Bytes ``[start, end)`` of the object, written at ``start`` of ``target``; a changed object is an error."""
        if end <= start:
            return b""
        data = self.fs.cat_file(f"{self.path}/{relative}", start=start, end=end)
        self.cost.gets += 1
        self.cost.bytes_read += len(data)
        if len(data) != end - start:
            raise StorageError(f"{self.url}/{relative}: changed while being read (listed as {size} bytes); inspect again", "changed")
        with open(target, "r+b") as f:
            f.seek(start)
            f.write(data)
        return bytes(data)

    def _zip(self, relative: str, target: str, size: int) -> None:
        """The byte ranges a zip reader visits to read the ``metadata`` member, nothing else."""
        tail_start = max(0, size - _TAIL)
        tail = self._fill(relative, target, tail_start, size, size)
        at = tail.rfind(_EOCD)
        if at < 0 or len(tail) - at < 22:
            return  # not a zip: the inspector says so from the same bytes
        directory_bytes = struct.unpack("<I", tail[at + 12 : at + 16])[0]
        end_of_directory = tail_start + at
        if directory_bytes > MAX_ZIP_DIRECTORY_BYTES or directory_bytes > end_of_directory:
            return  # refused (too large) or corrupt: the inspector decides from the tail alone
        start = end_of_directory - directory_bytes
        if start < tail_start:
            self._fill(relative, target, start, tail_start, size)
        try:
            with open(target, "rb") as raw, zipfile.ZipFile(raw) as z:  # the local layout's ranges, not the store's
                info = z.getinfo("metadata")
        except Exception:
            return  # no metadata member, or a directory the inspector refuses the same way
        if info.file_size > MAX_ZIP_METADATA_BYTES or info.compress_size > MAX_ZIP_METADATA_BYTES:
            return  # refused on its declared size before any data is read
        offset = info.header_offset  # where the reader looks, bytes before the archive included
        header = self._fill(relative, target, offset, min(size, offset + _LOCAL_HEADER), size)
        if len(header) < _LOCAL_HEADER:
            return
        name_bytes, extra_bytes = struct.unpack("<HH", header[26:30])
        data_start = offset + _LOCAL_HEADER
        self._fill(relative, target, data_start, min(size, data_start + name_bytes + extra_bytes + info.compress_size), size)


def _numbered(objects: dict[str, int], folder: str) -> list[int]:
    """The numbered entries of a log folder (``offsets``, ``commits``), in order."""
    prefix = folder + "/"
    return sorted(int(name[len(prefix) :]) for name in objects if name.startswith(prefix) and _NUMBER.fullmatch(name[len(prefix) :]))


def _read_whole(objects: dict[str, int]) -> set[str]:
    """The objects the inspector reads (bounded): ``metadata``, the newest two ``offsets``, the newest
    ``MAX_COMMITS_READ`` commits (their first line is the checkpoint format, a v2 commit names each store's
    unique id), operators' ``_metadata``."""
    wanted = {"metadata", *(f"offsets/{batch}" for batch in _numbered(objects, "offsets")[-2:])}
    wanted |= {f"commits/{batch}" for batch in _numbered(objects, "commits")[-MAX_COMMITS_READ:]}
    wanted |= {name for name in objects if _OPERATOR_METADATA.fullmatch(name)}
    return wanted & set(objects)


@contextmanager
def staged_checkpoint(location: str, cost: StageCost | None = None) -> Iterator[str]:
    """A local path the inspector reads as ``location``: itself for a local path, a sparse layout for a URL.

    ``cost``, if given, is filled with what the layout cost (for tests and benchmarks).
    """
    if not is_url(location) or location.lower().startswith("file://"):
        yield location[len("file://") :] if location.lower().startswith("file://") else location
        return
    with tempfile.TemporaryDirectory(prefix="sso-checkpoint-") as tmp:
        stage = _Stage(location, tmp)
        root = stage.build()
        try:
            with files.remote(stage):
                yield root
        finally:
            if cost is not None:
                cost.__dict__.update(stage.cost.__dict__)
