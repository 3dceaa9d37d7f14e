"""Spark's event-log codecs: which one a file uses, and its framing decoded as a lazy stream.

Spark compresses an event log whole with the codec its extension names (``.zstd``, ``.lz4``, ``.snappy``;
none for plain). The offline readers (``spark_state_observer.offline.eventlog``) read a finished file through
``open_decompressed``; the live watcher (``spark_state_observer.fleet.codec_tail``) decodes a file still being
written a unit at a time with the same block decoders. Both sit downstream of this leaf, which imports
nothing of the project's, so the watcher never reaches into ``spark_state_observer.offline``.

Memory is bounded however hostile the input: no lz4 block or snappy chunk may declare more than
``max_chunk_bytes`` (at most ``MAX_BLOCK_BYTES``) before anything is allocated, and zstd input goes in
256-byte pieces with a bounded window. Whatever the bytes, a reader gets its content or an
``EventLogError`` that names the file: a codec library's own error (a file named ``.zstd`` that is not
zstd, a corrupt lz4 block or snappy chunk) never reaches a caller.
"""

from __future__ import annotations

import io
import os
import stat
import struct
from typing import IO, Any, Iterator

# the longest line a reader holds: the offline readers' and the watcher's default bound
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
CODECS = ("zstd", "lz4", "snappy")
# the largest lz4 block or snappy chunk accepted (Spark writes 32 KiB ones)
MAX_BLOCK_BYTES = 64 * 1024 * 1024
# zstd's decoder allocates the frame's window: Spark's level 1 uses 512 KiB; refuse frames that need more than this
_MAX_ZSTD_WINDOW = 1 << 25


class EventLogError(ValueError):
    """A recorded file cannot be read (further); the message names the file and what is wrong."""


def codec_of(path: str) -> str | None:
    """The codec a log's name says (``None`` for plain); a codec Spark has but this cannot read is an error."""
    name = os.path.basename(path)
    if name.endswith(".inprogress"):
        name = name[: -len(".inprogress")]
    ext = name.rsplit(".", 1)[-1] if "." in name else ""
    if ext in CODECS:
        return ext
    if ext in ("lzf",):
        raise EventLogError(f"{path}: codec {ext!r} is not supported (use zstd, lz4, snappy or none)")
    return None


def open_decompressed(path: str, max_chunk_bytes: int = MAX_BLOCK_BYTES) -> io.RawIOBase | IO[bytes]:
    """A binary stream of the file's decompressed content, read lazily.

    Only a regular file is read (opened non-blocking and checked, so a FIFO swapped in cannot hang the
    replay); no decompressed chunk may be larger than ``max_chunk_bytes``.
    """
    codec = codec_of(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise EventLogError(f"{path}: not a regular file (a FIFO, socket or device is never read)")
    raw = os.fdopen(fd, "rb")
    if codec is None:
        return raw
    if codec == "zstd":
        return _GeneratorReader(_zstd_chunks(raw, path), raw)
    if codec == "lz4":
        return _GeneratorReader(_lz4_blocks(raw, path, max_chunk_bytes), raw)
    return _GeneratorReader(_snappy_chunks(raw, path, max_chunk_bytes), raw)


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
        b[:n] = self._buf[self._pos : self._pos + n]
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


def _zstd_chunks(raw: IO[bytes], path: str) -> Iterator[bytes]:
    """zstd frames one after another; a frame cut short is an error, not a silent end.

    Input goes in 256-byte pieces: one piece of a hostile stream can expand to ~11 MB at most (RLE
    blocks), so memory stays bounded however well the data compresses.
    """
    import zstandard

    dctx = zstandard.ZstdDecompressor(max_window_size=_MAX_ZSTD_WINDOW)
    dobj, fed = dctx.decompressobj(), False
    while True:
        data = raw.read(1 << 16)
        if not data:
            if fed and not dobj.eof:
                raise EventLogError(f"{path}: the zstd stream ends inside a frame (cut short, or still being written)")
            return
        view, pos = memoryview(data), 0
        while pos < len(view):
            piece = view[pos : pos + 256]
            pos += len(piece)
            try:
                out = dobj.decompress(piece)
            except zstandard.ZstdError as exc:  # not zstd (a file named .zstd that is not), or corrupt
                raise EventLogError(f"{path}: not zstd data, or corrupt ({exc})") from None
            fed = True
            if out:
                yield out
            if dobj.eof:
                rest = dobj.unused_data
                dobj, fed = dctx.decompressobj(), False
                if rest:
                    view, pos = memoryview(bytes(rest) + bytes(view[pos:])), 0


def _lz4_blocks(raw: IO[bytes], path: str, max_chunk_bytes: int = MAX_BLOCK_BYTES) -> Iterator[bytes]:
    """lz4-java's LZ4BlockOutputStream framing, which Spark's lz4 codec writes."""
    while True:
        magic = raw.read(8)
        if not magic:
            return
        if magic != b"LZ4Block":
            raise EventLogError(f"{path}: not Spark's lz4 block format (bad magic {magic[:8]!r})")
        token = _read_exact(raw, 1, path, "lz4 block header")[0]
        clen, dlen, _checksum = struct.unpack("<iii", _read_exact(raw, 12, path, "lz4 block header"))
        if clen < 0 or dlen < 0 or clen > max_chunk_bytes or dlen > max_chunk_bytes:
            raise EventLogError(f"{path}: implausible lz4 block sizes {clen}/{dlen} (at most {max_chunk_bytes} bytes)")
        if dlen == 0:
            continue  # end mark of one stream; another may follow
        data = _read_exact(raw, clen, path, "lz4 block")
        try:
            block = decode_lz4_block(token, data, dlen)
        except Exception as exc:  # lz4's LZ4BlockError: corrupt data behind a valid header
            raise EventLogError(f"{path}: corrupt lz4 block ({type(exc).__name__}: {str(exc)[:200]})") from None
        yield block


def decode_lz4_block(token: int, data: bytes, dlen: int) -> bytes:
    """One lz4-java block's content: stored raw (method 0x10) or LZ4-compressed (0x20)."""
    import lz4.block

    return data if token & 0xF0 == 0x10 else lz4.block.decompress(data, uncompressed_size=dlen)


def _snappy_chunks(raw: IO[bytes], path: str, max_chunk_bytes: int = MAX_BLOCK_BYTES) -> Iterator[bytes]:
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
        if size < 0 or size > max_chunk_bytes:
            raise EventLogError(f"{path}: implausible snappy chunk size {size}")
        yield decode_snappy_chunk(_read_exact(raw, size, path, "snappy chunk"), path, max_chunk_bytes)


def decode_snappy_chunk(chunk: bytes, path: str, max_chunk_bytes: int = MAX_BLOCK_BYTES) -> bytes:
    """One snappy-java chunk's content; refused, before the decompressor allocates it, when its header
    declares more than ``max_chunk_bytes``."""
    import cramjam

    declared = _snappy_length(chunk, path)
    if declared > max_chunk_bytes:
        raise EventLogError(f"{path}: a snappy chunk declares {declared} bytes (at most {max_chunk_bytes})")
    try:
        return bytes(cramjam.snappy.decompress_raw(chunk))
    except cramjam.DecompressionError as exc:  # corrupt data behind a valid length header
        raise EventLogError(f"{path}: corrupt snappy chunk ({str(exc)[:200]})") from None


def _snappy_length(chunk: bytes, path: str) -> int:
    """The uncompressed length a raw snappy block starts with (a little-endian base-128 varint)."""
    length = 0
    for shift, byte in zip(range(0, 35, 7), chunk[:5]):
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            return length
    raise EventLogError(f"{path}: a snappy chunk without a valid length header")
