"""The zstd tail decoder: whole blocks fed at once (their ends read from the headers) decode to the same bytes and
boundaries as a reference decompression, however the stream is cut into reads, and stay bounded on a bomb."""

from __future__ import annotations

import glob
import os
import random
import struct

import pytest
import zstandard

from bench.eventlog_writer import flush_groups, recorded_lines
from conftest import FIXTURES
from spark_state_observer.capture.codecs import EventLogError
from spark_state_observer.fleet.codec_tail import FrameWalk, tail_decoder

LINES = recorded_lines(glob.glob(os.path.join(FIXTURES, "rocksdb_restart", "run1", "eventlog", "*", "events_*"))[0])
SKIPPABLE = struct.pack("<II", 0x184D2A50, 5) + b"hello"


def frame_per_flush(checksum: bool, content_size: bool, between: bytes = b"") -> bytes:
    """A frame per flush, as the bench's writer does (``between``: bytes after the fifth frame)."""
    c = zstandard.ZstdCompressor(level=1, write_checksum=checksum, write_content_size=content_size)
    frames = [c.compress(b"".join(group)) for group in flush_groups(LINES)]
    return b"".join(frames[:5]) + between + b"".join(frames[5:])


def one_frame(checksum: bool) -> bytes:
    """One frame for the whole file, a block ended at every flush (zstd-jni's flush), the frame ended at the close."""
    stream = zstandard.ZstdCompressor(level=3, write_checksum=checksum).compressobj()
    out = [stream.compress(b"".join(group)) + stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) for group in flush_groups(LINES)]
    return b"".join(out) + stream.flush()


STREAMS = {
    "frame per flush": frame_per_flush(False, True),
    "frame per flush, checksums, no content size": frame_per_flush(True, False),
    "one frame, block per flush": one_frame(False),
    "one frame, checksum": one_frame(True),
    "a skippable frame between (the walk gives up)": frame_per_flush(False, True, SKIPPABLE),
}


def decode(data: bytes, cuts: list[int]) -> tuple[bytes, list[tuple[int, int]]]:
    """Feed ``data`` cut at ``cuts`` to one decoder: the decoded bytes and the (raw, decoded) boundaries it named."""
    decoder = tail_decoder("x.zstd", "zstd")
    out, boundaries = bytearray(), []
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        for piece, boundary in decoder.feed(data[start:end]):
            out += piece
            if boundary is not None:
                boundaries.append((boundary, len(out)))
        assert decoder.raw_pos == end
    return bytes(out), boundaries


@pytest.mark.parametrize("name", list(STREAMS))
def test_any_cut_decodes_as_the_reference_and_resumes_at_every_boundary(name: str) -> None:
    data = STREAMS[name]
    expected = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True).read()
    assert len(expected) > 100_000
    rng = random.Random(name)
    for trial in range(15):
        # whole stream, a cut every few bytes, cuts inside headers (1-20 bytes apart), cuts far apart
        spread = (len(data), 7, 20, 3000, 40_000)[trial % 5]
        cuts = sorted({rng.randrange(1, len(data)) for _ in range(len(data) // spread)}) if spread < len(data) else []
        got, boundaries = decode(data, cuts[:4000])
        assert got == expected, (name, trial)
        assert boundaries and boundaries[-1] == (len(data), len(expected))
        for raw, decoded in rng.sample(boundaries, min(5, len(boundaries))):  # a fresh decoder starts at a boundary
            rest = b"".join(piece for piece, _ in tail_decoder("x.zstd", "zstd", raw).feed(data[raw:]))
            assert rest == expected[decoded:], (name, raw)


@pytest.mark.parametrize("name", ["one frame, block per flush", "frame per flush"])
def test_a_reader_that_stops_after_each_piece_gets_the_rest_from_where_it_stopped(name: str) -> None:
    """The tailer stops once a poll's decode budget is spent and feeds the rest of the bytes again next poll."""
    data = STREAMS[name]
    expected = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True).read()
    decoder, got, stops = tail_decoder("x.zstd", "zstd"), bytearray(), 0
    while decoder.raw_pos < len(data):
        pieces = decoder.feed(data[decoder.raw_pos :])
        got += next(pieces)[0]
        pieces.close()
        stops += 1
        assert decoder._walk.ok  # the walk is where the bytes fed again start: whole blocks stay the fast way
        if not decoder.partial:  # the tailer makes a new decoder at a boundary
            decoder = tail_decoder("x.zstd", "zstd", decoder.raw_pos)
    assert bytes(got) == expected and stops > 3


def test_the_walk_finds_every_block_and_frame_end_however_the_bytes_come() -> None:
    data = STREAMS["frame per flush, checksums, no content size"]
    whole = FrameWalk().walk(data)
    assert whole[-1] == (len(data), True)
    assert sum(ends for _, ends in whole) == len(flush_groups(LINES))  # one frame per flush
    for step in (1, 3, 1000):
        walk = FrameWalk()
        cuts = [(at + i, ends) for i in range(0, len(data), step) for at, ends in walk.walk(data[i : i + step])]
        assert walk.ok and cuts == whole, step


def test_a_bomb_of_tiny_blocks_is_decoded_in_bounded_pieces() -> None:
    """Zeros compress to a few bytes per 128 KiB block: one read of it decodes, piece after piece, to no more than the
    blocks the decoder hands the decompressor at once."""
    stream = zstandard.ZstdCompressor(level=1).compressobj()
    data = b"".join(stream.compress(b"\x00" * (1 << 20)) for _ in range(64)) + stream.flush()
    assert len(data) < 100_000
    decoder = tail_decoder("x.zstd", "zstd")
    total = 0
    for piece, _ in decoder.feed(data):
        assert len(piece) <= (32 << 17) + (1 << 18)
        total += len(piece)
    assert total == 64 << 20


def test_corrupt_data_is_an_error_naming_the_file() -> None:
    data = bytearray(STREAMS["one frame, block per flush"])
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    with pytest.raises(EventLogError, match="corrupt zstd data"):
        for _ in tail_decoder("x.zstd", "zstd").feed(bytes(data)):
            pass
