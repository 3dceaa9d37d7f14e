"""Write real recorded event-log lines the way Spark writes them, a piece at a time (tests and benchmarks).

Spark's ``EventLoggingListener`` flushes after every event except the task-level ones, and each codec turns
a flush into a unit on disk: zstd-jni ends a frame, snappy-java writes a chunk, lz4-java writes nothing until
its 32 KiB block is full (Spark does not ask it to sync-flush). Rolling logs (the Spark 4 default) are a
folder ``eventlog_v2_<appId>`` of ``events_<N>_<appId>[.codec]`` files, each a separate compressed stream,
rolled when the file reaches its maximum size, and an ``appstatus_<appId>.inprogress`` marker renamed to
``appstatus_<appId>`` at the end. The events themselves come from real recorded logs (tests/fixtures).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator

from spark_state_observer.capture.codecs import open_decompressed

# task-level events are logged without a flush (EventLoggingListener: onTaskStart/End, onTaskGettingResult, ...)
_NOT_FLUSHED = (
    b'{"Event":"SparkListenerTaskStart"',
    b'{"Event":"SparkListenerTaskEnd"',
    b'{"Event":"SparkListenerTaskGettingResult"',
    b'{"Event":"SparkListenerSpeculativeTaskSubmitted"',
    b'{"Event":"SparkListenerExecutorMetricsUpdate"',
)
_BLOCK = 32 * 1024  # lz4-java and snappy-java block size Spark configures (spark.io.compression.*.blockSize)
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M = 0xFFFFFFFF


def recorded_lines(path: str) -> list[bytes]:
    """The decoded lines (with their newline) of a real event-log file."""
    with open_decompressed(path) as stream:
        return stream.read().splitlines(keepends=True)


def flush_groups(lines: list[bytes]) -> list[list[bytes]]:
    """Lines grouped as Spark flushes them: a group ends with every event that is not task-level."""
    groups: list[list[bytes]] = []
    current: list[bytes] = []
    for line in lines:
        current.append(line)
        if not line.startswith(_NOT_FLUSHED):
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def xxh32(data: bytes, seed: int) -> int:
    """XXH32 (lz4-java's block checksum); plain Python, fine for test-sized blocks."""
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        words = struct.unpack_from(f"<{(n // 16) * 4}I", data)
        for j in range(0, len(words), 4):
            for lane in range(4):
                v[lane] = (_rotl((v[lane] + words[j + lane] * _P2) & _M, 13) * _P1) & _M
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        i = (n // 16) * 16
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 4 <= n:
        (w,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + w * _P3) & _M, 17) * _P4) & _M
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M, 11) * _P1) & _M
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M
    h ^= h >> 13
    h = (h * _P3) & _M
    h ^= h >> 16
    return h


class StreamEncoder:
    """One compressed stream as Spark's codec writes it: ``flush(lines)`` returns the bytes that reach the file."""

    def __init__(self, codec: str | None) -> None:
        self.codec = codec
        self._buffer = b""
        self._started = False
        if codec == "zstd":
            import zstandard

            self._zstd = zstandard.ZstdCompressor(level=1)

    def flush(self, lines: list[bytes]) -> bytes:
        data = b"".join(lines)
        head = b""
        if not self._started:
            self._started = True
            if self.codec == "snappy":
                head = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        if self.codec is None:
            return head + data
        if self.codec == "zstd":
            return self._zstd.compress(data) if data else b""
        if self.codec == "snappy":
            return head + b"".join(self._snappy_chunk(data[i : i + _BLOCK]) for i in range(0, len(data), _BLOCK))
        self._buffer += data  # lz4: only full blocks are written
        out = []
        while len(self._buffer) >= _BLOCK:
            out.append(self._lz4_block(self._buffer[:_BLOCK]))
            self._buffer = self._buffer[_BLOCK:]
        return b"".join(out)

    def close(self) -> bytes:
        if self.codec != "lz4":
            return b""
        tail = self._lz4_block(self._buffer) if self._buffer else b""
        self._buffer = b""
        return tail + b"LZ4Block" + bytes([0x15]) + struct.pack("<iii", 0, 0, 0)  # end mark

    @staticmethod
    def _snappy_chunk(data: bytes) -> bytes:
        import cramjam

        compressed = bytes(cramjam.snappy.compress_raw(data))
        return struct.pack(">i", len(compressed)) + compressed

    @staticmethod
    def _lz4_block(data: bytes) -> bytes:
        import lz4.block  # type: ignore[import-untyped]

        compressed = lz4.block.compress(data, store_size=False)
        token, payload = (0x25, compressed) if len(compressed) < len(data) else (0x15, data)
        check = xxh32(data, 0x9747B28C) & 0xFFFFFFF
        return b"LZ4Block" + bytes([token]) + struct.pack("<iii", len(payload), len(data), check) + payload


def suffix(codec: str | None) -> str:
    return "." + codec if codec else ""


class ProgressiveLog:
    """An application's event log being written: rolling folder or single file, any codec.

    ``steps()`` writes the given lines flush group by flush group and yields after every append, so a
    caller can poll in between; ``split`` also cuts each unit in two appends (a reader then sees the file
    end inside a frame, block or chunk, as it does when it reads while Spark writes).
    """

    def __init__(self, folder: str, app_id: str, codec: str | None, *, rolling: bool = True, max_file_bytes: int = 128 << 20) -> None:
        self.app_id, self.codec, self.rolling, self.max_file_bytes = app_id, codec, rolling, max_file_bytes
        if rolling:
            self.dir = os.path.join(folder, f"eventlog_v2_{app_id}")
            os.makedirs(self.dir, exist_ok=True)
            self.marker = os.path.join(self.dir, f"appstatus_{app_id}.inprogress")
            open(self.marker, "wb").close()
        else:
            self.dir = folder
        self.index = 0
        self.path = ""
        self.encoder = StreamEncoder(codec)
        self.size = 0
        self._open_next()

    def _open_next(self) -> None:
        self.index += 1
        if self.rolling:
            self.path = os.path.join(self.dir, f"events_{self.index}_{self.app_id}{suffix(self.codec)}")
        else:
            self.path = os.path.join(self.dir, f"{self.app_id}{suffix(self.codec)}.inprogress")
        open(self.path, "wb").close()
        self.encoder = StreamEncoder(self.codec)
        self.size = 0

    def append(self, data: bytes) -> None:
        with open(self.path, "ab") as f:
            f.write(data)
        self.size += len(data)

    def write_group(self, group: list[bytes], split: bool = False) -> Iterator[None]:
        """Write one flush group (rolling first if the file is full); yields after each append."""
        if self.rolling and self.size >= self.max_file_bytes:
            self.append(self.encoder.close())
            self._open_next()
        data = self.encoder.flush(group)
        if split and len(data) > 1:
            self.append(data[: len(data) // 2])
            yield
            data = data[len(data) // 2 :]
        if data:
            self.append(data)
        yield

    def write_encoded(self, data: bytes) -> None:
        """Append units already encoded (``StreamEncoder.flush`` of a codec whose units stand alone: zstd, snappy
        after its header, none) in one write, rolling first if the file is full: a writer that reuses the
        encoding of repeated events (``bench/watch_scale.py``) spends its CPU on what changes, not on compressing."""
        if self.rolling and self.size >= self.max_file_bytes:
            self.append(self.encoder.close())
            self._open_next()
            if self.codec == "snappy":
                self.append(self.encoder.flush([]))  # the new file's stream header
        self.append(data)

    def steps(self, lines: list[bytes], split: bool = False) -> Iterator[None]:
        for group in flush_groups(lines):
            yield from self.write_group(group, split)

    def finish(self) -> None:
        """Close the stream and mark the application finished, as Spark's ``stop()`` does."""
        self.append(self.encoder.close())
        if self.rolling:
            os.rename(self.marker, os.path.join(self.dir, f"appstatus_{self.app_id}"))
        else:
            final = self.path[: -len(".inprogress")]
            os.rename(self.path, final)
            self.path = final


def renamed(lines: list[bytes], app_name: str, app_id: str) -> list[bytes]:
    """The same events as another application: the application-start event names ``app_name``/``app_id``."""
    out = []
    for line in lines:
        if line.startswith(b'{"Event":"SparkListenerApplicationStart"'):
            event = json.loads(line)
            event["App Name"], event["App ID"] = app_name, app_id
            line = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        out.append(line)
    return out
