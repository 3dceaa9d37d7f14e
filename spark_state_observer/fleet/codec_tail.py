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

import copy
import struct
import threading
from collections.abc import Generator
from typing import Any

from spark_state_observer.capture.codecs import MAX_BLOCK_BYTES, EventLogError, decode_lz4_block, decode_snappy_chunk

# a decoded piece and, when its end is a unit boundary, the raw offset just after that unit
Piece = tuple[bytes, "int | None"]
SNAPPY_HEADER = b"\x82SNAPPY\x00"
_SNAPPY_HEADER_LEN = 16
_LZ4_HEADER_LEN = 21
_YIELD_BYTES = 1 << 18  # join small decoded units into pieces of about this size
_BLOCK_MAX = 128 << 10  # what one zstd block decodes to at most (RFC 8878: Block_Maximum_Size)
_SLICE_BLOCKS = 32  # whole zstd blocks given to the decompressor in one call: at most 4 MiB decoded
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # a zstd frame's first bytes
_DID_BYTES = (0, 1, 2, 4)  # by the frame header descriptor's Dictionary_ID_flag
_FCS_BYTES = (0, 2, 4, 8)  # by its Frame_Content_Size_flag (0: none, or 1 byte in a single segment)
_SHARED = threading.local()


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


class FrameWalk:
    """Where the blocks and frames of a zstd stream end, read from their headers (RFC 8878) without decoding them.

    Why: a block decodes to at most 128 KiB, so the decoder may hand the decompressor many whole blocks in one call
    (not 256 bytes per call) and still know how far they can expand; and a frame that lies whole in one read can be
    decoded by a decompressor every file shares. The walk reads frame and block headers and skips their contents;
    it gives up (``ok`` False) on what Spark does not write (a skippable frame, a reserved bit or block type, a
    block over the maximum): the decompressor then judges those bytes, fed 256 at a time.
    """

    def __init__(self) -> None:
        self.ok = True
        self._head = b""  # the start of a header the last bytes fed cut off
        self._block = False  # a block's header comes next, else a frame's
        self._skip = 0  # bytes still to pass: a block's content, and the checksum after a frame's last block
        self._checksum = 0  # bytes of checksum after the current frame's last block
        self._last = False  # the block being passed is its frame's last

    def walk(self, data: bytes) -> list[tuple[int, bool]]:
        """The ends of the blocks completed in ``data``: (offset in ``data``, whether its frame ends there)."""
        cuts: list[tuple[int, bool]] = []
        held = len(self._head)
        buf = self._head + data if held else data
        self._head = b""
        pos, size = 0, len(buf)
        if self._skip:
            pos = min(self._skip, size)
            self._skip -= pos
            if self._skip:
                return cuts
            cuts.append((pos, self._last))
            self._block = not self._last
        while True:
            if self._block:
                if size - pos < 3:
                    break
                header = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
                kind, length = (header >> 1) & 3, header >> 3
                if kind == 3 or length > _BLOCK_MAX:
                    self.ok = False
                    return cuts
                self._last = bool(header & 1)
                end = pos + 3 + (1 if kind == 1 else length) + (self._checksum if self._last else 0)
                if end > size:
                    self._skip = end - size
                    return cuts
                pos = end
                cuts.append((pos - held, self._last))
                self._block = not self._last
            else:
                if size - pos < 5:
                    break
                descriptor = buf[pos + 4]
                if buf[pos : pos + 4] != _ZSTD_MAGIC or descriptor & 0x08:
                    self.ok = False  # a skippable frame, a reserved bit, or not zstd at all
                    return cuts
                single = descriptor & 0x20
                length = 5 + (0 if single else 1) + _DID_BYTES[descriptor & 0x03] + (_FCS_BYTES[descriptor >> 6] or (1 if single else 0))
                if size - pos < length:
                    break
                self._checksum = 4 if descriptor & 0x04 else 0
                pos += length
                self._block = True
        self._head = bytes(buf[pos:])
        return cuts


class ZstdTailDecoder(TailDecoder):
    """zstd frames one after another, made of blocks; Spark (zstd-jni) ends a block at every flush.

    Whole blocks go to the decompressor up to ``_SLICE_BLOCKS`` per call (``FrameWalk`` says where they end); a
    frame that lies whole in one read is decoded in one call by the thread's shared decompressor, so only a frame
    still being written keeps one of its own (a context is a few hundred KiB and costs 20 µs to make).
    """

    def __init__(self, path: str, raw_pos: int = 0) -> None:
        super().__init__(path, raw_pos)
        self._dctx: Any = None  # this file's own decompressor, made when a frame is left incomplete
        self._dobj: Any = None  # the incomplete frame's decompression object; None between frames
        self._walk = FrameWalk()

    @property
    def partial(self) -> bool:
        return self._dobj is not None

    def feed(self, data: bytes) -> Generator[Piece, None, None]:
        view, base = memoryview(data), self.raw_pos
        walked = copy.copy(self._walk)  # where the walk was: a caller that stops early feeds the rest again
        cuts = self._walk.walk(data) if self._walk.ok else []
        out: list[bytes] = []
        size, pos, i = 0, 0, 0
        try:
            while i < len(cuts) and self._walk.ok:  # whole blocks: at most _SLICE_BLOCKS, never past a frame's end
                j = i
                while not cuts[j][1] and j + 1 < len(cuts) and j + 1 - i < _SLICE_BLOCKS:
                    j += 1
                end, frame_ends = cuts[j]
                whole = self._dobj is None and frame_ends
                dobj = _shared_dctx().decompressobj() if whole else self._dobj or self._own_dctx().decompressobj()
                decoded = self._decompress(dobj, view[pos:end], base + pos)
                if dobj.eof != frame_ends or dobj.unused_data:  # not where the walk said: the 256-byte way decides
                    self._walk.ok = False
                    if whole:
                        break  # nothing of it kept: fed again below
                    pos = end - len(dobj.unused_data)
                    self._dobj = None if dobj.eof else dobj
                else:
                    pos, i = end, j + 1
                    self._dobj = None if frame_ends else dobj
                if decoded:
                    out.append(decoded)
                    size += len(decoded)
                if size >= _YIELD_BYTES:
                    chunk, out, size = b"".join(out), [], 0
                    yield chunk, base + pos if self._dobj is None else None
            if pos < len(view) and self._walk.ok:  # the start of a block: decodes to no more than its raw bytes
                dobj = self._dobj or self._own_dctx().decompressobj()
                decoded = self._decompress(dobj, view[pos:], base + pos)
                if dobj.eof:
                    self._walk.ok = False
                    pos, self._dobj = len(view) - len(dobj.unused_data), None
                else:
                    pos, self._dobj = len(view), dobj
                if decoded:
                    out.append(decoded)
                    size += len(decoded)
            while pos < len(view):  # what the walk gave up on: 256 bytes at a time (one piece expands to ~8 MiB at most)
                piece = view[pos : pos + 256]
                pos += len(piece)
                if self._dobj is None:
                    self._dobj = self._own_dctx().decompressobj()
                decoded = self._decompress(self._dobj, piece, base + pos)
                if decoded:
                    out.append(decoded)
                    size += len(decoded)
                if self._dobj.eof:
                    # the next frame starts inside this piece: feed its bytes again to a fresh decompressor
                    pos -= len(self._dobj.unused_data)
                    self._dobj = None
                    if size >= _YIELD_BYTES or pos >= len(view):
                        chunk, out, size = b"".join(out), [], 0
                        yield chunk, base + pos
                elif size >= _YIELD_BYTES:
                    chunk, out, size = b"".join(out), [], 0
                    yield chunk, None
            if out or (pos and self._dobj is None):  # the boundary, even after a frame's empty last block
                chunk, out = b"".join(out), []
                yield chunk, None if self._dobj is not None else base + pos
        finally:
            # every byte before ``pos`` went into the decompressor and its output out (a caller that stops
            # early took all of it but what ``out`` still holds: nothing, at a yield)
            self.raw_pos = base + pos
            if pos < len(view) and self._walk.ok:  # walk again only what was used, so the rest is walked when it comes
                self._walk = walked
                self._walk.walk(data[:pos])

    def _decompress(self, dobj: Any, data: memoryview, raw: int) -> bytes:
        import zstandard

        try:
            return dobj.decompress(data)  # type: ignore[no-any-return]
        except zstandard.ZstdError as exc:
            raise EventLogError(f"{self.path}: corrupt zstd data near raw offset {raw}: {exc}") from None

    def _own_dctx(self) -> Any:
        if self._dctx is None:
            import zstandard

            self._dctx = zstandard.ZstdDecompressor()
        return self._dctx


def _shared_dctx() -> Any:
    """This thread's decompressor for frames decoded whole in one call (a context serves one frame at a time)."""
    dctx = getattr(_SHARED, "dctx", None)
    if dctx is None:
        import zstandard

        dctx = _SHARED.dctx = zstandard.ZstdDecompressor()
    return dctx


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
