"""Decode a growing event-log file a piece at a time, remembering where a fresh decoder could resume.

``spark_state_observer.capture.codecs.open_decompressed`` reads a finished file from start to end. A file Spark is still writing ends in the
middle of a zstd frame, an lz4-java block or a snappy-java chunk; reading it again from the start on every
poll would cost the whole file each time. These decoders take the raw bytes added since the last poll,
hold the incomplete unit until its rest arrives, and say after which raw offsets the stream is at a unit
boundary: the watcher persists such a boundary, so a restarted watcher seeks there with a fresh decoder
instead of decoding the file again. Spark's writers end a unit at every flush, which in practice is the
end of an event line (zstd frames per flush, snappy chunks per flush; lz4-java only writes full 32 KiB
blocks because Spark does not ask it to sync-flush, so lz4 logs become visible 32 KiB at a time).

Memory is bounded however hostile the input: zstd input goes in 256-byte pieces (one piece expands to
~8 MiB at most), lz4 and snappy units are refused above ``spark_state_observer.capture.codecs``' 64 MiB bound.
"""

from __future__ import annotations

import struct
from collections.abc import Generator

from spark_state_observer.capture.codecs import MAX_BLOCK_BYTES, EventLogError, decode_lz4_block, decode_snappy_chunk

# a decoded piece and, when its end is a unit boundary, the raw offset just after that unit
Piece = tuple[bytes, "int | None"]
SNAPPY_HEADER = b"\x82SNAPPY\x00"
_SNAPPY_HEADER_LEN = 16
_LZ4_HEADER_LEN = 21
_YIELD_BYTES = 1 << 18  # join small decoded units into pieces of about this size


class TailDecoder:
    """Uncompressed bytes: every raw offset is a boundary; subclasses decode a codec."""

    def __init__(self, path: str, raw_pos: int = 0) -> None:
        self.path = path
        self.raw_pos = raw_pos  # absolute offset of the next raw byte to feed

    @property
    def partial(self) -> bool:
        """True while an incomplete unit is held: if the file ends here, it was cut short."""
        return False

    def feed(self, data: bytes) -> Generator[Piece, None, None]:
        """Decode ``data`` (the raw bytes at ``raw_pos``); raises ``EventLogError`` on corrupt input.

        A caller may stop early (``close()`` the iterator after a piece): ``raw_pos`` then says how much of
        ``data`` the pieces it took came from, and the rest is fed again later. So the decoded bytes of one
        read are bounded by the caller's budget plus one piece, however far the input would expand.
        """
        self.raw_pos += len(data)
        yield data, self.raw_pos


class ZstdTailDecoder(TailDecoder):
    """zstd frames one after another; Spark (zstd-jni) ends a frame at every flush."""

    def __init__(self, path: str, raw_pos: int = 0) -> None:
        super().__init__(path, raw_pos)
        import zstandard

        self._dctx = zstandard.ZstdDecompressor()
        self._dobj: object | None = None  # None between frames: nothing held

    @property
    def partial(self) -> bool:
        return self._dobj is not None

    def feed(self, data: bytes) -> Generator[Piece, None, None]:
        import zstandard

        out: list[bytes] = []
        size = 0
        view, pos = memoryview(data), 0
        base = self.raw_pos
        try:
            while pos < len(view):
                piece = view[pos : pos + 256]
                pos += len(piece)
                if self._dobj is None:
                    self._dobj = self._dctx.decompressobj()
                try:
                    decoded = self._dobj.decompress(piece)  # type: ignore[attr-defined]
                except zstandard.ZstdError as exc:
                    raise EventLogError(f"{self.path}: corrupt zstd data near raw offset {base + pos}: {exc}") from None
                if decoded:
                    out.append(decoded)
                    size += len(decoded)
                if self._dobj.eof:  # type: ignore[attr-defined]
                    # the next frame starts inside this piece: feed its bytes again to a fresh decompressor
                    pos -= len(self._dobj.unused_data)  # type: ignore[attr-defined]
                    self._dobj = None
                    if size >= _YIELD_BYTES or pos >= len(view):
                        chunk, out, size = b"".join(out), [], 0
                        yield chunk, base + pos
                elif size >= _YIELD_BYTES:
                    chunk, out, size = b"".join(out), [], 0
                    yield chunk, None
            if out:
                chunk, out = b"".join(out), []
                yield chunk, None if self._dobj is not None else base + pos
        finally:
            # every byte before ``pos`` went into the decompressor and its output out (a caller that stops
            # early took all of it but what ``out`` still holds: nothing, at a yield)
            self.raw_pos = base + pos


class _BlockTailDecoder(TailDecoder):
    """Length-prefixed units: the bytes of an incomplete unit are held until the rest arrives."""

    def __init__(self, path: str, raw_pos: int = 0) -> None:
        super().__init__(path, raw_pos)
        self._held = b""

    @property
    def partial(self) -> bool:
        return bool(self._held)

    def feed(self, data: bytes) -> Generator[Piece, None, None]:
        buf = self._held + data if self._held else data
        start = self.raw_pos - len(self._held)  # raw offset of buf[0]
        self._held = b""
        pos = 0
        out: list[bytes] = []
        size = 0
        finished = False
        try:
            while True:
                unit = self._unit(buf, pos, start + pos)
                if unit is None:
                    break
                decoded, pos = unit
                if decoded:
                    out.append(decoded)
                    size += len(decoded)
                if size >= _YIELD_BYTES:
                    chunk, out, size = b"".join(out), [], 0
                    yield chunk, start + pos
            self._held = bytes(buf[pos:])
            self.raw_pos = start + len(buf)
            finished = True
            if out:
                yield b"".join(out), start + pos
        finally:
            if not finished:  # stopped early at a unit boundary: the caller feeds the rest again from there
                self.raw_pos = start + pos

    def _unit(self, buf: bytes, pos: int, raw: int) -> tuple[bytes, int] | None:
        """Decode the unit at ``buf[pos:]``: (content, position after it), or None if incomplete."""
        raise NotImplementedError


class Lz4TailDecoder(_BlockTailDecoder):
    """lz4-java's LZ4BlockOutputStream blocks (magic, token, sizes, checksum, data)."""

    def _unit(self, buf: bytes, pos: int, raw: int) -> tuple[bytes, int] | None:
        if len(buf) - pos < _LZ4_HEADER_LEN:
            if buf[pos : pos + 8] != b"LZ4Block"[: len(buf) - pos]:
                raise EventLogError(f"{self.path}: not Spark's lz4 block format at raw offset {raw} (bad magic)")
            return None
        if buf[pos : pos + 8] != b"LZ4Block":
            raise EventLogError(f"{self.path}: not Spark's lz4 block format at raw offset {raw} (bad magic)")
        token = buf[pos + 8]
        clen, dlen, _checksum = struct.unpack_from("<iii", buf, pos + 9)
        if clen < 0 or dlen < 0 or clen > MAX_BLOCK_BYTES or dlen > MAX_BLOCK_BYTES:
            raise EventLogError(f"{self.path}: implausible lz4 block sizes {clen}/{dlen} at raw offset {raw}")
        end = pos + _LZ4_HEADER_LEN + clen
        if len(buf) < end:
            return None
        if dlen == 0:
            return b"", end  # end mark of one stream; another may follow
        import lz4.block

        try:
            return decode_lz4_block(token, bytes(buf[pos + _LZ4_HEADER_LEN : end]), dlen), end
        except lz4.block.LZ4BlockError as exc:
            raise EventLogError(f"{self.path}: corrupt lz4 block at raw offset {raw}: {exc}") from None


class SnappyTailDecoder(_BlockTailDecoder):
    """snappy-java's SnappyOutputStream: a 16-byte header, then big-endian length-prefixed chunks."""

    def _unit(self, buf: bytes, pos: int, raw: int) -> tuple[bytes, int] | None:
        if raw == 0:
            if len(buf) - pos < _SNAPPY_HEADER_LEN:
                if buf[pos : pos + 8] != SNAPPY_HEADER[: len(buf) - pos]:
                    raise EventLogError(f"{self.path}: not Spark's snappy stream format (bad header)")
                return None
            if not buf[pos:].startswith(SNAPPY_HEADER):
                raise EventLogError(f"{self.path}: not Spark's snappy stream format (bad header)")
            return b"", pos + _SNAPPY_HEADER_LEN
        if len(buf) - pos < 4:
            return None
        (size,) = struct.unpack_from(">i", buf, pos)
        if size < 0 or size > MAX_BLOCK_BYTES:
            raise EventLogError(f"{self.path}: implausible snappy chunk size {size} at raw offset {raw}")
        end = pos + 4 + size
        if len(buf) < end:
            return None
        try:
            return decode_snappy_chunk(bytes(buf[pos + 4 : end]), self.path), end
        except EventLogError as exc:  # corrupt, or declaring more than the bound
            raise EventLogError(f"{exc} at raw offset {raw}") from None


def tail_decoder(path: str, codec: str | None, raw_pos: int = 0) -> TailDecoder:
    """A decoder for ``codec`` (as ``spark_state_observer.capture.codecs.codec_of`` names it) starting at a boundary."""
    if codec is None:
        return TailDecoder(path, raw_pos)
    if codec == "zstd":
        return ZstdTailDecoder(path, raw_pos)
    if codec == "lz4":
        return Lz4TailDecoder(path, raw_pos)
    return SnappyTailDecoder(path, raw_pos)
