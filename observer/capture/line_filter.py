"""Pick the wanted event lines out of decoded event-log bytes without parsing the others.

Spark writes one JSON object per line and its ``"Event"`` field first (``{"Event":"SparkListenerTaskEnd",
...``), so a line's type is known from its first bytes. Most of a log is task, stage and SQL events the
observer does not need; scanning for ``\\n{"Event":"<wanted type>"`` with ``bytes.find`` (C speed) over a
whole decoded piece costs far less than splitting it into Python lines, and only the matching lines are
copied out. A line still being written is held only when it is (or may still turn out to be) wanted, and
never beyond ``max_line_bytes``: an unwanted or over-long line is skipped up to its newline without being
held, so memory stays bounded however long the lines are.
"""

from __future__ import annotations

EVENT_PREFIX = b'{"Event":"'


def line_pattern(event_type: str) -> bytes:
    """The first bytes of a line holding an event of this type."""
    return EVENT_PREFIX + event_type.encode() + b'"'


class LineFilter:
    """Complete wanted lines of one decoded stream, with their line numbers (1-based)."""

    def __init__(self, patterns: dict[bytes, str], max_line_bytes: int, decoded_pos: int = 0, lines: int = 0) -> None:
        self.patterns = patterns  # line_pattern(type) -> type
        self._needles = [(b"\n" + p, p, t) for p, t in patterns.items()]
        self._longest = max((len(p) for p in patterns), default=0)
        self.max_line_bytes = max_line_bytes
        self.decoded_pos = decoded_pos  # decoded bytes seen
        self.consumed = decoded_pos  # decoded offset just after the last complete line
        self.lines = lines  # complete lines seen
        self._pending: bytearray | None = None  # start of a wanted (or undecided) line being written
        self._skipping = False  # inside an unwanted or over-long line: drop bytes up to its newline
        self.too_long: list[int] = []  # line numbers of wanted lines dropped for their length (read and cleared by the caller)

    @property
    def partial(self) -> bool:
        """True while inside a line whose newline has not arrived."""
        return self._pending is not None or self._skipping

    def feed(self, data: bytes) -> list[tuple[int, str, bytes]]:
        """(line number, event type, line) of every wanted line completed by ``data``."""
        found: list[tuple[int, str, bytes]] = []
        base = self.decoded_pos
        self.decoded_pos += len(data)
        pos = 0
        if self.partial:
            nl = data.find(b"\n")
            if nl < 0:
                self._extend(data)
                return found
            if self._pending is not None:
                line = bytes(self._pending) + data[:nl + 1]
                kind = self._type_of(line)
                if kind is not None:
                    if len(line) > self.max_line_bytes:
                        self.too_long.append(self.lines + 1)
                    else:
                        found.append((self.lines + 1, kind, line))
            self._pending, self._skipping = None, False
            self.lines += 1
            pos = nl + 1
            self.consumed = base + pos
        last = data.rfind(b"\n", pos)
        if last >= 0:
            hits: list[tuple[int, str]] = []
            for needle, pattern, kind in self._needles:
                if data.startswith(pattern, pos):
                    hits.append((pos, kind))
                i = data.find(needle, pos, last)
                while i >= 0:
                    hits.append((i + 1, kind))
                    i = data.find(needle, i + 1, last)
            hits.sort()
            cursor, line_no = pos, self.lines
            for start, kind in hits:
                line_no += data.count(b"\n", cursor, start) + 1
                end = data.index(b"\n", start) + 1
                if end - start > self.max_line_bytes:
                    self.too_long.append(line_no)
                else:
                    found.append((line_no, kind, data[start:end]))
                cursor = end
            self.lines = line_no + data.count(b"\n", cursor, last + 1)
            pos = last + 1
            self.consumed = base + pos
        if pos < len(data):
            self._begin(data[pos:])
        return found

    def _type_of(self, line: bytes | bytearray) -> str | None:
        for pattern, kind in self.patterns.items():
            if line.startswith(pattern):
                return kind
        return None

    def _may_be_wanted(self, start: bytes | bytearray) -> bool:
        if self._type_of(start) is not None:
            return True
        return len(start) < self._longest and any(p.startswith(start) for p in self.patterns)

    def _begin(self, tail: bytes) -> None:
        if self._may_be_wanted(tail[:self._longest]):
            self._pending = bytearray(tail)
            self._check_length()
        else:
            self._skipping = True

    def _extend(self, data: bytes) -> None:
        if self._pending is None:
            return  # skipping
        decided = len(self._pending) >= self._longest
        self._pending += data
        if not decided and not self._may_be_wanted(self._pending[:self._longest]):
            self._pending, self._skipping = None, True
            return
        self._check_length()

    def _check_length(self) -> None:
        if self._pending is not None and len(self._pending) > self.max_line_bytes:
            if self._type_of(self._pending) is not None:
                self.too_long.append(self.lines + 1)
            self._pending, self._skipping = None, True
