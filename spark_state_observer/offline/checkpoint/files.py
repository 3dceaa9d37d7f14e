"""Reading a checkpoint's files without trusting them: regular files only, bounded reads, no whole members.

A checkpoint folder may hold anything: a FIFO where ``metadata`` should be (opening it waits forever),
a symlink that dangles or loops, a folder without read permission, a directory where a file should
be, or a 1.5 MB ``N.zip`` whose ``metadata`` member expands to 1.5 GB. Every function here either
returns a bounded result or raises ``UnreadableFile`` with a message the report shows as a problem line.

A checkpoint in an object store is laid out locally with sparse files
(``spark_state_observer.offline.checkpoint.store_layout``): their sizes are right, most of their bytes are
not there. Such a layout registers itself here (``remote``) so that a reader that needs a file's real bytes
(a changelog's head, a checksum file, a whole state file to verify) gets them from the store, never zeros.
"""

from __future__ import annotations

import os
import stat
import struct
import zipfile
from contextlib import contextmanager
from typing import BinaryIO, Iterator, Protocol

MAX_LOG_ENTRY_BYTES = 4 << 20  # an offsets/commits/metadata entry: a few KB in practice
MAX_ZIP_METADATA_BYTES = 16 << 20  # a RocksDB snapshot's file list: ~150 bytes per SST file
MAX_ZIP_DIRECTORY_BYTES = 4 << 20  # a snapshot zip lists a dozen files (metadata, OPTIONS, MANIFEST, logs)
_EOCD = b"PK\x05\x06"
CHUNK = 8 << 20  # bytes per read of a whole file (one ranged GET each from a store)


class RemoteFiles(Protocol):
    """Files of a local layout whose real bytes are in an object store (``store_layout``)."""

    def remote(self, path: str) -> bool:
        """Whether the local file at ``path`` lacks bytes that only the store has."""
        ...

    def read(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object laid out at ``path`` (``UnreadableFile`` if the store fails)."""
        ...


_REMOTES: list[RemoteFiles] = []


@contextmanager
def remote(files: RemoteFiles) -> Iterator[None]:
    """While active, reads of the files ``files`` names come from the store (see the module docstring)."""
    _REMOTES.append(files)
    try:
        yield
    finally:
        _REMOTES.remove(files)


def _remote_of(path: str) -> RemoteFiles | None:
    return next((r for r in _REMOTES if r.remote(path)), None)


class UnreadableFile(OSError):
    """A checkpoint file that cannot (or must not) be read; the message names it and says why."""


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc)


def regular_size(path: str) -> int:
    """The size of the regular file at ``path`` (symlinks followed); anything else is ``UnreadableFile``."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise UnreadableFile(f"{path}: cannot be read ({_describe(exc)}; a dangling symlink or a loop?)") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise UnreadableFile(f"{path}: {kind} where a file is expected")
    return info.st_size


def read_text(path: str, limit: int = MAX_LOG_ENTRY_BYTES) -> str:
    """At most ``limit`` bytes of a regular file as text (undecodable bytes replaced).

    Opened non-blocking and checked with ``fstat``, so a FIFO is refused rather than waited on.
    """
    source = _remote_of(path)
    if source is not None:
        data = source.read(path, 0, min(regular_size(path), limit + 1))
        if len(data) > limit:
            raise UnreadableFile(f"{path}: larger than {limit} bytes, not a checkpoint log entry")
        return data.decode("utf-8", errors="replace")
    with _open_regular(path) as f:
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise UnreadableFile(f"{path}: cannot be read ({_describe(exc)})") from None
    if len(data) > limit:
        raise UnreadableFile(f"{path}: larger than {limit} bytes, not a checkpoint log entry")
    return data.decode("utf-8", errors="replace")


@contextmanager
def _open_regular(path: str) -> Iterator[BinaryIO]:
    """A local regular file opened for reading without blocking on a FIFO; ``UnreadableFile`` for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise UnreadableFile(f"{path}: cannot be opened ({_describe(exc)})") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise UnreadableFile(f"{path}: {kind} where a file is expected")
        yield f


def read_head(path: str, limit: int) -> bytes:
    """The first ``limit`` bytes (or fewer) of a regular file, opened as ``read_text`` opens one."""
    source = _remote_of(path)
    if source is not None:
        return source.read(path, 0, min(regular_size(path), limit))
    with _open_regular(path) as f:
        try:
            return f.read(limit)
        except OSError as exc:
            raise UnreadableFile(f"{path}: cannot be read ({_describe(exc)})") from None


def chunks(path: str) -> Iterator[bytes]:
    """A regular file's bytes, ``CHUNK`` at a time: memory stays bounded whatever its size."""
    size = regular_size(path)
    source = _remote_of(path)
    if source is not None:
        for start in range(0, size, CHUNK):
            yield source.read(path, start, min(size, start + CHUNK))
        return
    with _open_regular(path) as f:
        while True:
            try:
                data = f.read(CHUNK)
            except OSError as exc:
                raise UnreadableFile(f"{path}: cannot be read ({_describe(exc)})") from None
            if not data:
                return
            yield data


def list_dir(path: str) -> list[str]:
    """The names in a folder; ``UnreadableFile`` if it cannot be listed."""
    try:
        return os.listdir(path)
    except OSError as exc:
        raise UnreadableFile(f"{path}: folder cannot be listed ({_describe(exc)})") from None


def is_dir(path: str) -> bool:
    """A folder (symlinks followed); False for anything that cannot be stat'ed."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def zip_member(path: str, member: str, limit: int = MAX_ZIP_METADATA_BYTES) -> bytes:
    """One member of a zip file, read through its streaming decompressor and never beyond ``limit`` bytes.

    The central directory is read first (a regular file only); a member that declares more than
    ``limit`` is refused before any decompression, and one that lies about its size is cut off at
    ``limit`` while it is read.
    """
    regular_size(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise UnreadableFile(f"{path}: cannot be opened ({_describe(exc)})") from None
    try:
        with os.fdopen(fd, "rb") as raw:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnreadableFile(f"{path}: not a regular file")
            _check_central_directory(raw, path)
            with zipfile.ZipFile(raw) as z:
                info = z.getinfo(member)
                if info.file_size > limit:
                    raise UnreadableFile(f"{path}: member {member!r} declares {info.file_size} bytes (more than {limit})")
                if info.flag_bits & 0x1:
                    raise UnreadableFile(f"{path}: member {member!r} is encrypted")
                with z.open(info) as f:
                    data = f.read(limit + 1)
    except UnreadableFile:
        raise
    except KeyError:
        raise UnreadableFile(f"{path}: no {member!r} member") from None
    except Exception as exc:  # BadZipFile, zlib.error, EOFError, NotImplementedError (method), RuntimeError (password), OSError
        raise UnreadableFile(f"{path}: corrupt or unsupported zip ({type(exc).__name__}: {str(exc)[:120]})") from None
    if len(data) > limit:
        raise UnreadableFile(f"{path}: member {member!r} expands beyond {limit} bytes")
    return data


def _check_central_directory(raw: BinaryIO, path: str) -> None:
    """Refuse a zip whose central directory (which ``ZipFile`` reads whole) is implausibly large.

    Reads only the end-of-central-directory record (the file's last 64 KiB at most); zip64 archives,
    which a snapshot never needs, are refused as well.
    """
    size = raw.seek(0, os.SEEK_END)
    raw.seek(max(0, size - (1 << 16) - 22))
    tail = raw.read()
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) - at < 22:
        raise UnreadableFile(f"{path}: not a zip file (no end of central directory)")
    entries, directory_bytes = struct.unpack("<HI", tail[at + 10 : at + 16])
    if entries == 0xFFFF or directory_bytes == 0xFFFFFFFF:
        raise UnreadableFile(f"{path}: a zip64 archive, which a state snapshot never is")
    if directory_bytes > MAX_ZIP_DIRECTORY_BYTES:
        raise UnreadableFile(f"{path}: zip directory of {directory_bytes} bytes ({entries} entries), too large for a state snapshot")
    raw.seek(0)
