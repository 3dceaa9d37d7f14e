"""The reading position in one event file: raw offset, the decoder while a compressed unit is incomplete, the
line filter, and the boundaries a restart may resume at (see ``FileTail.position``).
"""

from __future__ import annotations

import os
from typing import Any

from spark_state_observer.fleet.codec_tail import TailDecoder
from spark_state_observer.fleet.line_filter import LineFilter
from spark_state_observer.fleet.log_names import codec_of


class FileTail:
    """Reading position in one event file."""

    def __init__(
        self,
        path: str,
        index: int,
        patterns: dict[bytes, str],
        max_line_bytes: int,
        raw: int = 0,
        decoded: int = 0,
        consumed: int = 0,
        lines: int = 0,
    ) -> None:
        self.path, self.index = path, index
        self.codec = codec_of(os.path.basename(path))
        self.raw = raw  # raw offset read up to
        self.decoder: TailDecoder | None = None
        self.resume = (raw, decoded)  # a boundary: raw offset a fresh decoder can start at, decoded offset there
        self.candidates: list[tuple[int, int]] = []  # boundaries past the last complete line
        self.skip = consumed - decoded  # decoded bytes after the boundary that were delivered before a restart
        self.filter = LineFilter(patterns, max_line_bytes, decoded_pos=decoded, lines=lines)
        self.filter.consumed = consumed
        self.size = -1
        self.broken = False  # cannot be read further (corrupt); later files of a rolling log still can
        self.failed_at = -1  # boundary a decode failed after (it is retried once from there)
        self.inode: tuple[int, int] | None = None  # (device, inode) when first opened: another file renamed over it differs
        self.head = b""  # the file's first bytes as read (up to _HEAD_BYTES); known only when read from offset 0
        # (mode, device, inode, size, mtime) of the file when last read to its end: a poll that finds the same by
        # ``lstat`` (one system call) skips opening, checking and closing it (``spark_state_observer.fleet.log_tailing``)
        self.seen: tuple[int, int, int, int, int] | None = None

    def resume_point(self) -> tuple[int, int]:
        """(raw, decoded) offsets a fresh decoder can start at, at or before the last complete line."""
        if self.codec is None:  # every offset of a plain file is a boundary
            return self.filter.consumed, self.filter.consumed
        return self.resume

    def position(self) -> dict[str, Any]:
        raw, decoded = self.resume_point()
        return {
            "file": os.path.basename(self.path),
            "index": self.index,
            "raw": raw,
            "decoded": decoded,
            "consumed": self.filter.consumed,
            "lines": self.filter.lines,
        }

    def note_boundary(self, raw: int, decoded: int) -> None:
        self.candidates.append((raw, decoded))
        valid = [c for c in self.candidates if c[1] <= self.filter.consumed]
        if valid:
            self.resume = valid[-1]
            self.candidates = [c for c in self.candidates if c[1] > self.filter.consumed]
        del self.candidates[:-64]

    def rewind(self) -> None:
        """Go back to the last boundary: decode from there again, skipping the lines already delivered."""
        self.decoder = None
        self.raw, decoded = self.resume_point()
        self.skip = self.filter.consumed - decoded
        self.filter.rewind(decoded)
        self.candidates = []

    @property
    def partial(self) -> bool:
        return (self.decoder is not None and self.decoder.partial) or self.filter.partial
