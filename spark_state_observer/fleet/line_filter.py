"""Pick the wanted event lines out of decoded event-log bytes without parsing the others.

Spark writes one JSON object per line and its ``"Event"`` field first (``{"Event":"SparkListenerTaskEnd",
...``), so a line's type is known from its first bytes. Most of a log is task, stage and SQL events the
observer does not need; stepping from line start to line start with ``bytes.find`` (C speed) and
looking each line's type (the text between ``{"Event":"`` and the next quote) up among the wanted ones costs
one lookup per line, far less than splitting the piece into Python lines (or searching it once per wanted
type, as this filter did before issue 32), and only the matching lines are copied out. A line still being
written is held only when it is (or may still turn out to be) wanted, and never beyond ``max_line_bytes``:
an unwanted or over-long line is skipped up to its newline without being held, so memory stays bounded
however long the lines are.

A line that JSON allows but Spark does not write (``{ "Event" : "..."``, whitespace around the brace, the
key or the colon) is read too, as replay reads it: a line not starting with ``{"Event":"`` is matched
against where such whitespace can be, and the type of such a line is read from its first ``_LOOSE_HEAD`` bytes.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable

from spark_state_observer.model.log_time import LINES_FOR_TIME

EVENT_PREFIX = b'{"Event":"'
_PREFIX_LEN = len(EVENT_PREFIX)
# ``"Event"`` first, with any JSON whitespace a line can hold around the brace, the key and the colon
_LOOSE = re.compile(rb'[ \t\r]*\{[ \t\r]*"Event"[ \t\r]*:[ \t\r]*"([^"\\]{1,200})"')
_LOOSE_HEAD = 512  # bytes of a line its loose type is read from
# where a line with "Event" first can hold whitespace: before the brace, after it, after the key, after the colon
_WS_AT = rb'(?=[ \t\r]|\{[ \t\r]|\{"Event"[ \t\r]|\{"Event":[ \t\r])'
_LOOSE_FIRST = re.compile(_WS_AT)
RECENT_BYTES = 64 * 1024  # decoded bytes kept to read the lines before a termination (Spark's are mostly under 4 KiB)


def line_pattern(event_type: str) -> bytes:
    """The first bytes of a line holding an event of this type."""
    return EVENT_PREFIX + event_type.encode() + b'"'


Handler = Callable[[int, str, bytes], bool]  # (line number, event type, line) -> True if the patterns changed


class LineFilter:
    """Complete wanted lines of one decoded stream, with their line numbers (1-based), handed to a handler."""

    def __init__(self, patterns: dict[bytes, str], max_line_bytes: int, decoded_pos: int = 0, lines: int = 0) -> None:
        self.set_patterns(patterns)
        self.max_line_bytes = max_line_bytes
        self.decoded_pos = decoded_pos  # decoded bytes seen
        self.consumed = decoded_pos  # decoded offset just after the last complete line
        self.lines = lines  # complete lines seen
        self._pending: bytearray | None = None  # start of a wanted (or undecided) line being written
        self._skipping = False  # inside an unwanted or over-long line: drop bytes up to its newline
        self.too_long: list[int] = []  # line numbers of wanted lines dropped for their length (read and cleared by the caller)
        # the pieces fed before the current one (by reference, at least ``RECENT_BYTES`` of them), and the current
        # piece with where the line being handled starts in it and how much of it was held from earlier pieces:
        # the lines before a handled one
        self._recent: deque[bytes] = deque()
        self._recent_len = 0
        self._current: tuple[bytes, int, int] = (b"", 0, 0)

    def set_patterns(self, patterns: dict[bytes, str]) -> None:
        """Change the wanted types (``line_pattern(type) -> type``); a handler doing so returns True."""
        self.patterns = patterns
        self._longest = max((len(p) for p in patterns), default=0)
        self._head = max(self._longest, _LOOSE_HEAD)  # bytes of a line start that decide whether it is wanted
        self._types = frozenset(patterns.values())

    def rewind(self, decoded_pos: int) -> None:
        """Restart at an earlier decoded offset (the caller skips up to ``consumed`` again): drop the partial line."""
        self.decoded_pos = decoded_pos
        self._pending, self._skipping = None, False
        self._recent.clear()
        self._recent_len, self._current = 0, (b"", 0, 0)

    def lines_before(self) -> list[bytes]:
        """The (at most ``LINES_FOR_TIME``) lines just before the line being handled, of any type: the time of a
        termination, which Spark logs without one, is read from them as replay reads it (``spark_state_observer.model.log_time``).
        Called by a handler for the rare line that needs it: nothing is joined or split otherwise."""
        piece, start, held = self._current
        before = b"".join(self._recent)
        if held:
            before = before[: max(0, len(before) - held)]
        return (before + piece[:start]).splitlines()[-LINES_FOR_TIME:]

    @property
    def partial(self) -> bool:
        """True while inside a line whose newline has not arrived."""
        return self._pending is not None or self._skipping

    def feed(self, data: bytes, handle: Handler) -> None:
        """Hand every wanted line completed by ``data`` to ``handle``, in order."""
        base = self.decoded_pos
        self.decoded_pos += len(data)
        pos = 0
        if self.partial:
            nl = data.find(b"\n")
            if nl < 0:
                self._extend(data)
                self._remember(data)
                return
            pending = self._pending
            self._pending, self._skipping = None, False
            self.lines += 1
            pos = nl + 1
            self.consumed = base + pos
            if pending is not None:
                line = bytes(pending) + data[:pos]
                kind = self._type_of(line)
                if kind is not None:
                    if len(line) > self.max_line_bytes:
                        self.too_long.append(self.lines)
                    else:
                        self._current = (b"", 0, len(pending))
                        handle(self.lines, kind, line)
        last = data.rfind(b"\n", pos)
        if last >= 0:
            hits, lines = self._hits(data, pos, last)
            line_no, k = self.lines, 0
            while k < len(hits):
                start, cursor, before, kind = hits[k]
                k += 1
                if cursor - start > self.max_line_bytes:
                    self.too_long.append(line_no + before)
                    continue
                self._current = (data, start, 0)
                if handle(line_no + before, kind, data[start:cursor]):  # other types wanted from the next line on
                    line_no += before
                    (hits, lines), k = self._hits(data, cursor, last), 0
            self.lines = line_no + lines
            pos = last + 1
            self.consumed = base + pos
        if pos < len(data):
            self._begin(data[pos:])
        self._remember(data)

    def _remember(self, data: bytes) -> None:
        """Keep ``data`` among the recent pieces (a small one by reference, the end of a large one copied), dropping
        the oldest beyond ``RECENT_BYTES``: at most twice that is held per followed file."""
        self._current = (b"", 0, 0)
        if len(data) >= RECENT_BYTES:
            self._recent.clear()
            data = data[-RECENT_BYTES:]
            self._recent_len = 0
        self._recent.append(data)
        self._recent_len += len(data)
        while self._recent_len - len(self._recent[0]) >= RECENT_BYTES:
            self._recent_len -= len(self._recent.popleft())

    def _hits(self, data: bytes, start: int, last: int) -> tuple[list[tuple[int, int, int, str]], int]:
        """The lines of ``data[start:last + 1]`` (``start`` is a line start, ``last`` a newline) of a wanted type,
        written as Spark writes them or with JSON whitespace: (start, end, line number counted from 1 at ``start``,
        type) each; and how many lines there are.

        One pass from line start to line start (``bytes.find`` of the newline, C speed): a line's type is the
        text between ``{"Event":"`` and the next quote, looked up among the wanted patterns, so the cost is
        one lookup per line, not one search of the whole piece per wanted type."""
        hits = []
        patterns, longest, head = self.patterns, self._longest, self._head
        find, startswith, loose = data.find, data.startswith, _LOOSE_FIRST.match
        i, n, end = start, 0, last + 1
        while i < end:
            newline = find(b"\n", i, end)
            n += 1
            if startswith(EVENT_PREFIX, i):
                quote = find(b'"', i + _PREFIX_LEN, i + longest)
                if quote >= 0:
                    kind = patterns.get(data[i : quote + 1])
                    if kind is not None:
                        hits.append((i, newline + 1, n, kind))
            elif loose(data, i, last):
                kind = self._type_of(data[i : i + head])
                if kind is not None:  # else shares a searched prefix with a wanted type
                    hits.append((i, newline + 1, n, kind))
            i = newline + 1
        return hits, n

    def _type_of(self, line: bytes | bytearray) -> str | None:
        if line.startswith(EVENT_PREFIX):  # the type ends at the first quote (no type holds one)
            quote = line.find(b'"', _PREFIX_LEN, self._longest)
            return self.patterns.get(bytes(line[: quote + 1])) if quote >= 0 else None
        match = _LOOSE.match(line, 0, _LOOSE_HEAD)
        if match is None:
            return None
        kind = match.group(1).decode("utf-8", "replace")
        return kind if kind in self._types else None

    def _may_be_wanted(self, start: bytes | bytearray) -> bool:
        if start.startswith(EVENT_PREFIX):
            return self._type_of(start) is not None or (len(start) < self._longest and any(p.startswith(start) for p in self.patterns))
        if EVENT_PREFIX.startswith(start):
            return True  # too short to tell
        if self._type_of(start) is not None:
            return True
        # a loose line whose type has not arrived yet
        return len(start) < _LOOSE_HEAD and _LOOSE.match(start) is None and start.lstrip(b" \t\r")[:1] in (b"", b"{")

    def _begin(self, tail: bytes) -> None:
        if self._may_be_wanted(tail[: self._head]):
            self._pending = bytearray(tail)
            self._check_length()
        else:
            self._skipping = True

    def _extend(self, data: bytes) -> None:
        if self._pending is None:
            return  # skipping
        decided = len(self._pending) >= self._head
        self._pending += data
        if not decided and not self._may_be_wanted(self._pending[: self._head]):
            self._pending, self._skipping = None, True
            return
        self._check_length()

    def _check_length(self) -> None:
        if self._pending is not None and len(self._pending) > self.max_line_bytes:
            if self._type_of(self._pending) is not None:
                self.too_long.append(self.lines + 1)
            self._pending, self._skipping = None, True
