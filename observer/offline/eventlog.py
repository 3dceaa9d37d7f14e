"""Read recorded listener events: Spark event logs and JSON-lines files of progress objects.

Spark writes event logs as JSON lines, whole-file compressed with the codec named in the file's
extension (``.zstd``, ``.lz4``, ``.snappy``; none for plain) and, by default since 4.0, rolled into
``eventlog_v2_<appId>/events_<n>_<appId>[.codec]`` folders. Everything is streamed: memory stays bounded
by ``max_line_bytes`` however large (or hostile) the file, and a truncated or corrupt file yields the
events before the damage and then one ``EventLogError`` that says where it broke.
"""

from __future__ import annotations

import io
import json
import os
import re
import struct
from collections import deque
from dataclasses import dataclass, replace
from typing import IO, Any, Iterable, Iterator

from observer.model import decode, kinds
from observer.model.parse import parse_timestamp

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
_STREAMING = "org.apache.spark.sql.streaming.StreamingQueryListener$"
_KINDS = {_STREAMING + "QueryStartedEvent": kinds.STARTED, _STREAMING + "QueryProgressEvent": kinds.PROGRESS,
          _STREAMING + "QueryIdleEvent": kinds.IDLE, _STREAMING + "QueryTerminatedEvent": kinds.TERMINATED}
# executor changes, replayed as the executor list a live observer polls
EXECUTOR_PREFIX = "executor_"
EXECUTOR_ADDED = EXECUTOR_PREFIX + "added"
EXECUTOR_REMOVED = EXECUTOR_PREFIX + "removed"
_ROLLING_FILE = re.compile(r"^events_(\d+)_")
CODECS = ("zstd", "lz4", "snappy")


class EventLogError(ValueError):
    """A recorded file cannot be read (further); the message names the file and what is wrong."""


@dataclass(frozen=True)
class Record:
    """One replayable item: a listener event (kind + payload) or an executor change."""

    kind: str  # started, progress, idle, terminated, executor_added, executor_removed
    payload: Any
    source: str  # file:line, for error messages
    timestamp: float | None = None


def expand(paths: list[str]) -> list[str]:
    """Files to read, in order: rolling folders by their index, other folders by name."""
    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            names = [n for n in os.listdir(path) if not n.startswith(".") and not n.startswith("appstatus")]
            rolling = sorted((int(m.group(1)), n) for n in names if (m := _ROLLING_FILE.match(n)))
            if rolling:
                files.extend(os.path.join(path, n) for _, n in rolling)
            else:
                files.extend(expand([os.path.join(path, n) for n in sorted(names)]))
        elif os.path.exists(path):
            files.append(path)
        else:
            raise EventLogError(f"{path}: no such file or directory")
    return files


def codec_of(path: str) -> str | None:
    name = os.path.basename(path)
    if name.endswith(".inprogress"):
        name = name[: -len(".inprogress")]
    ext = name.rsplit(".", 1)[-1] if "." in name else ""
    if ext in CODECS:
        return ext
    if ext in ("lzf",):
        raise EventLogError(f"{path}: codec {ext!r} is not supported (use zstd, lz4, snappy or none)")
    return None


def open_decompressed(path: str) -> io.RawIOBase | IO[bytes]:
    """A binary stream of the file's decompressed content, read lazily."""
    codec = codec_of(path)
    raw = open(path, "rb")
    if codec is None:
        return raw
    if codec == "zstd":
        return _GeneratorReader(_zstd_chunks(raw, path), raw)
    if codec == "lz4":
        return _GeneratorReader(_lz4_blocks(raw, path), raw)
    return _GeneratorReader(_snappy_chunks(raw, path), raw)


def read_records(paths: list[str], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                 progress_as_bytes: bool = False) -> Iterator[Record | EventLogError]:
    """Yield the replayable records of every file in order; problems come as ``EventLogError`` items.

    With ``progress_as_bytes`` a progress event's payload is its ``progress`` object's JSON text (bytes),
    cut out of the line without building dicts, for ``observer.model.decode``'s fast path; else a dict.

    A bad line is reported and skipped; a file that cannot be decompressed further is reported and the
    next file is read. Nothing read before a problem is lost.
    """
    for path in expand(paths):
        try:
            stream = open_decompressed(path)
        except (OSError, EventLogError) as exc:
            yield exc if isinstance(exc, EventLogError) else EventLogError(f"{path}: cannot open: {exc}")
            continue
        with stream:
            line_no = 0
            before: deque[bytes] = deque(maxlen=_LINES_FOR_TIME)  # the lines just read, kept by reference only
            try:
                for line_no, line in _lines(stream, max_line_bytes, path):
                    item = _record(line, f"{path}:{line_no}", progress_as_bytes)
                    if item is not None:
                        if isinstance(item, Record) and item.kind == kinds.TERMINATED and item.timestamp is None:
                            item = replace(item, timestamp=time_before(before))
                        yield item
                    before.append(line)
            except EventLogError as exc:
                yield exc
            except Exception as exc:  # decompression errors of every codec library
                yield EventLogError(f"{path}: unreadable after line {line_no}: {type(exc).__name__}: {exc}")


# Spark's QueryTerminatedEvent carries no time. The events written just before it (the failed task and
# job, the last progress) do, and it cannot have happened before them: its time is the latest of theirs.
_LINES_FOR_TIME = 16
_EPOCH_MS = re.compile(rb'"(?:Timestamp|Completion Time|Finish Time|Submission Time|Launch Time|time)":(1\d{12})\b')
_PROGRESS_TIME = re.compile(rb'"timestamp":"([0-9T:.+-]+Z?)"')
_BATCH_MS = re.compile(rb'"batchDuration":(\d{1,12})\b')


def time_before(lines: Iterable[bytes]) -> float | None:
    """The latest time (epoch seconds) any of ``lines`` carries: Spark's millisecond fields, or a
    progress's trigger time plus its batch duration; ``None`` when none carries one."""
    latest: float | None = None
    for line in lines:
        found = [int(m) / 1000.0 for m in _EPOCH_MS.findall(line)]
        stamp = _PROGRESS_TIME.search(line)
        if stamp is not None:
            start = parse_timestamp(stamp.group(1).decode("ascii", "replace"))
            if start is not None:
                duration = _BATCH_MS.search(line)
                found.append(start + (int(duration.group(1)) / 1000.0 if duration else 0.0))
        for t in found:
            latest = t if latest is None else max(latest, t)
    return latest


def _lines(stream: io.RawIOBase | IO[bytes], max_line_bytes: int, path: str) -> Iterator[tuple[int, bytes]]:
    buffered = stream if isinstance(stream, io.BufferedReader) else io.BufferedReader(stream, 1 << 16)  # type: ignore[type-var]  # any readinto() stream
    line_no = 0
    while True:
        line = buffered.readline(max_line_bytes + 1)
        if not line:
            return
        line_no += 1
        if len(line) > max_line_bytes and not line.endswith(b"\n"):
            # skip the rest of this monster line without holding it
            while True:
                rest = buffered.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            raise EventLogError(f"{path}:{line_no}: line longer than {max_line_bytes} bytes; stopped reading this file")
        if not line.isspace():  # blank lines are skipped; isspace() does not copy the (long) line as strip() would
            yield line_no, line


_PROGRESS_PREFIX = b'{"Event":"' + (_STREAMING + "QueryProgressEvent").encode() + b'"'
_WANTED_PREFIXES = (b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$',
                    b'{"Event":"SparkListenerExecutorAdded"', b'{"Event":"SparkListenerExecutorRemoved"')


def _record(line: bytes, where: str, progress_as_bytes: bool = False) -> Record | EventLogError | None:
    # Spark writes "Event" first: skip the (large, numerous) task, stage and SQL events without parsing
    # them; a last line without its newline is parsed anyway, so a truncated log is reported
    if line.startswith(b'{"Event":"') and not line.startswith(_WANTED_PREFIXES) and line.endswith(b"\n"):
        return None
    if progress_as_bytes and line.startswith(_PROGRESS_PREFIX):
        progress = decode.event_progress(line)
        if progress is not None:
            return Record(kinds.PROGRESS, progress, where)
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return EventLogError(f"{where}: not valid JSON ({str(exc)[:80]}); a truncated last line means the log was still being written")
    if not isinstance(obj, dict):
        return EventLogError(f"{where}: a JSON {type(obj).__name__}, not an event object")
    event = obj.get("Event")
    if event is None:
        if "progress" in obj and isinstance(obj["progress"], dict):
            return Record(kinds.PROGRESS, obj["progress"], where)
        if "batchId" in obj and "id" in obj:  # a progress object, as dumped from query.recentProgress
            return Record(kinds.PROGRESS, obj, where)
        return EventLogError(f"{where}: neither a Spark event nor a progress object")
    kind = _KINDS.get(event)
    if kind == kinds.PROGRESS:
        return Record(kind, obj.get("progress"), where)
    if kind is not None:
        return Record(kind, obj, where)
    if event in ("SparkListenerExecutorAdded", "SparkListenerExecutorRemoved"):
        change = EXECUTOR_ADDED if event.endswith("Added") else EXECUTOR_REMOVED
        ts = obj.get("Timestamp")
        return Record(change, str(obj.get("Executor ID")), where, ts / 1000.0 if isinstance(ts, (int, float)) else None)
    return None


class _GeneratorReader(io.RawIOBase):
    """A readable binary stream over a generator of decompressed chunks."""

    def __init__(self, chunks: Iterator[bytes], underlying: IO[bytes]) -> None:
        self._chunks, self._under = chunks, underlying
        self._buf, self._pos = b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while self._pos >= len(self._buf):
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._buf, self._pos = chunk, 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos:self._pos + n]
        self._pos += n
        return n

    def close(self) -> None:
        self._under.close()
        super().close()


def _read_exact(raw: IO[bytes], n: int, path: str, what: str) -> bytes:
    data = raw.read(n)
    if len(data) != n:
        raise EventLogError(f"{path}: truncated {what} ({len(data)} of {n} bytes)")
    return data


_MAX_BLOCK = 64 * 1024 * 1024


def _zstd_chunks(raw: IO[bytes], path: str) -> Iterator[bytes]:
    """zstd frames one after another; a frame cut short is an error, not a silent end.

    Input goes in 256-byte pieces: one piece of a hostile stream can expand to ~11 MB at most (RLE
    blocks), so memory stays bounded however well the data compresses.
    """
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    dobj, fed = dctx.decompressobj(), False
    while True:
        data = raw.read(1 << 16)
        if not data:
            if fed and not dobj.eof:
                raise EventLogError(f"{path}: the zstd stream ends inside a frame (cut short, or still being written)")
            return
        view, pos = memoryview(data), 0
        while pos < len(view):
            piece = view[pos:pos + 256]
            pos += len(piece)
            out = dobj.decompress(piece)
            fed = True
            if out:
                yield out
            if dobj.eof:
                rest = dobj.unused_data
                dobj, fed = dctx.decompressobj(), False
                if rest:
                    view, pos = memoryview(bytes(rest) + bytes(view[pos:])), 0


def _lz4_blocks(raw: IO[bytes], path: str) -> Iterator[bytes]:
    """lz4-java's LZ4BlockOutputStream framing, which Spark's lz4 codec writes."""
    while True:
        magic = raw.read(8)
        if not magic:
            return
        if magic != b"LZ4Block":
            raise EventLogError(f"{path}: not Spark's lz4 block format (bad magic {magic[:8]!r})")
        token = _read_exact(raw, 1, path, "lz4 block header")[0]
        clen, dlen, _checksum = struct.unpack("<iii", _read_exact(raw, 12, path, "lz4 block header"))
        if clen < 0 or dlen < 0 or clen > _MAX_BLOCK or dlen > _MAX_BLOCK:
            raise EventLogError(f"{path}: implausible lz4 block sizes {clen}/{dlen}")
        if dlen == 0:
            continue  # end mark of one stream; another may follow
        yield decode_lz4_block(token, _read_exact(raw, clen, path, "lz4 block"), dlen)


def decode_lz4_block(token: int, data: bytes, dlen: int) -> bytes:
    """One lz4-java block's content: stored raw (method 0x10) or LZ4-compressed (0x20)."""
    import lz4.block

    return data if token & 0xF0 == 0x10 else lz4.block.decompress(data, uncompressed_size=dlen)


def _snappy_chunks(raw: IO[bytes], path: str) -> Iterator[bytes]:
    """snappy-java's SnappyOutputStream framing, which Spark's snappy codec writes."""
    header = raw.read(16)
    if not header.startswith(b"\x82SNAPPY\x00"):
        raise EventLogError(f"{path}: not Spark's snappy stream format (bad header)")
    while True:
        size_bytes = raw.read(4)
        if not size_bytes:
            return
        if len(size_bytes) < 4:
            raise EventLogError(f"{path}: truncated snappy chunk header")
        (size,) = struct.unpack(">i", size_bytes)
        if size < 0 or size > _MAX_BLOCK:
            raise EventLogError(f"{path}: implausible snappy chunk size {size}")
        yield decode_snappy_chunk(_read_exact(raw, size, path, "snappy chunk"), path)


def decode_snappy_chunk(chunk: bytes, path: str) -> bytes:
    """One snappy-java chunk's content, refused when it would expand beyond the block bound."""
    import cramjam

    out = bytes(cramjam.snappy.decompress_raw(chunk))
    if len(out) > _MAX_BLOCK:
        raise EventLogError(f"{path}: snappy chunk expands beyond {_MAX_BLOCK} bytes")
    return out
