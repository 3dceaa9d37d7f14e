"""Tailing: read what each followed log grew by since the last poll, file after file of a rolling log, within the
poll's decode budget; files opened non-blocking, checked, and found replaced when they are.

The tailer knows bytes and files, not events: each wanted line goes to ``on_line``
(``spark_state_observer.fleet.event_lines``), each read to a file's end to ``on_caught_up``
(``spark_state_observer.fleet.clock_skew``).

Incremental tailing: each file keeps its raw offset and, while a compressed unit is incomplete,
its decoder (``spark_state_observer.fleet.codec_tail``); a poll decodes only the bytes added since the last one.

Replaced logs: a file keeps its inode, never shrinks and keeps its first bytes while Spark writes it;
one that does not (renamed over, truncated, rewritten in place) is counted (``replaced``), its
application forgotten, and the log read again from its start as a new one at the next listing.

Symbolic links: are followed only when their target stays inside a watched folder (``follow_symlinks``
to follow them anywhere); others are counted (``symlink``) and never opened.

Bad input: never raises out of ``poll``: truncated or corrupt compressed data, unreadable files,
vanished folders, symlink loops, FIFOs and other non-regular files (never opened: files are opened
non-blocking and checked with ``fstat``), over-long lines, invalid JSON and two running applications
with the same name each give a message and a counted problem (``WatchCounts.problems`` and per
application ``AppEvents.problems``); the other applications go on. Lines are parsed by the bounded
parser (``bounded.loads``: an item bomb is refused before parsing, a nesting bomb fails cleanly), each
read decodes at most the poll's budget (a decompression bomb costs no more memory than a real log),
and a file decoding to over a thousand times its size is called ``inflated`` and skipped. A decode failure is retried once
from the last boundary before the file is called corrupt (a network file system can show a grown size
before the bytes), and a log is believed gone only when two listings agree (a rename in between).
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable
from typing import Any

from spark_state_observer.capture.codecs import CODECS, EventLogError
from spark_state_observer.fleet.codec_tail import tail_decoder
from spark_state_observer.fleet.file_tail import FileTail
from spark_state_observer.fleet.followed_app import FollowedApp, FollowedApps
from spark_state_observer.fleet.log_names import APPSTATUS, EVENTS_FILE, INPROGRESS
from spark_state_observer.fleet.watch_problems import Problems

_READ_CHUNK = 1 << 20
_FUTURE_SKEW_SECONDS = 300.0  # a file modified this far in the future means the clocks disagree
_RELIST_EVERY = 10  # polls between listings of a rolling folder whose mtime did not change
_HEAD_BYTES = 4096  # a file's first bytes, compared while it grows: another file moved or copied over it differs
# decoded bytes a file may hold per raw byte (beyond a first 64 MiB) before it is called inflated: Spark's
# logs compress 5-50 times; a few KiB of zstd that decode to gigabytes are a decompression bomb
_MAX_INFLATION = 1000
_INFLATION_ALLOWANCE = 64 << 20


class Tailer:
    """Incremental reading of the followed logs."""

    def __init__(
        self,
        book: FollowedApps,
        problems: Problems,
        *,
        patterns: dict[bytes, str],
        patterns_batch: dict[bytes, str],
        max_line_bytes: int,
        link_inside: Callable[[str], bool],
        on_line: Callable[[FollowedApp, FileTail, int, str, bytes], bool],
        on_caught_up: Callable[[FollowedApp], None],
    ) -> None:
        """``patterns``: the wanted lines' first bytes, by event type (``patterns_batch``: those searched for until an
        application shows a streaming query); ``on_line`` returns True when the application turned streaming."""
        self.book, self.problems, self.counts = book, problems, problems.counts
        self.patterns, self.patterns_batch, self.max_line_bytes = patterns, patterns_batch, max_line_bytes
        self.link_inside, self.on_line, self.on_caught_up = link_inside, on_line, on_caught_up
        self.backlog = False  # a read stopped at the poll's budget: poll again without waiting

    def follow(self, app: FollowedApp, budget: int) -> int:
        """Read what ``app``'s log grew by, within ``budget`` decoded bytes; returns what is left of it."""
        if app.listing.kind == "rolling":
            self._relist(app)
        elif app.tail is None:
            app.tail = self.new_tail(app, app.listing.path, 0)
        while app.tail is not None:
            tail = app.tail
            if app.listing.kind == "single":
                tail.path = app.listing.path  # renamed from .inprogress when the application ended
            if not tail.broken:
                budget = self._read(app, tail, budget)
                if app.dropped:
                    return budget
                if budget <= 0:
                    self.backlog = True
                    return budget
                if tail.size < 0 or tail.raw < tail.size:
                    break  # could not read it (reported): try again next poll
            nxt = self.next_index(app, tail.index)
            if nxt is not None and nxt != tail.index + 1:
                # parts are numbered 1, 2, 3...: a listing taken while Spark created them may show a later part
                # and not yet the one before it; list again before moving past a gap (compaction leaves real ones)
                self._relist(app, force=True)
                nxt = self.next_index(app, tail.index)
            if nxt is None:
                break
            # the next file exists, so Spark has closed this one (it closes before it opens the next)
            if not tail.broken and tail.partial:
                self.truncated(app, tail, "though the log rolled on to the next file")
            app.tail = self.new_tail(app, os.path.join(app.listing.path, app.files[nxt]), nxt)
        return budget

    def truncated(self, app: FollowedApp, tail: FileTail, why: str) -> None:
        unit = "line" if tail.filter.partial else f"{tail.codec} unit"
        self.problems.report(app, "truncated", f"{tail.path}: ends inside a {unit} {why}; the cut-off part is lost")
        tail.broken, tail.decoder = True, None

    def _relist(self, app: FollowedApp, force: bool = False) -> None:
        app.polls_since_listing += 1
        if not force and app.listing.mtime_ns == app.dir_mtime and app.polls_since_listing < _RELIST_EVERY and app.tail is not None:
            return
        try:
            names = os.listdir(app.listing.path)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return  # gone: the next listing of the parent forgets it
            self.problems.report(app, "unreadable", f"{app.listing.path}: cannot list: {exc.strerror or exc}", once=True)
            return
        app.dir_mtime, app.polls_since_listing = app.listing.mtime_ns, 0
        files: dict[int, str] = {}
        for n in names:
            m = EVENTS_FILE.match(n)
            if m:
                files[int(m.group(1))] = n
            elif n.startswith(APPSTATUS) and not n.endswith(INPROGRESS):
                app.marker_final = True
        app.files = files
        if app.tail is None and files and min(files) > 1 and not force:
            self._relist(app, force=True)  # Spark starts at part 1: a listing may have missed it while it was created
            return
        if app.tail is None and files:
            first = min(files)
            app.tail = self.new_tail(app, os.path.join(app.listing.path, files[first]), first)

    def next_index(self, app: FollowedApp, index: int) -> int | None:
        later = [i for i in app.files if i > index]
        return min(later) if later else None

    def new_tail(self, app: FollowedApp, path: str, index: int, pos: dict[str, Any] | None = None) -> FileTail:
        patterns = self.patterns if app.streaming else self.patterns_batch
        if pos is None:
            return FileTail(path, index, patterns, self.max_line_bytes)
        return FileTail(
            path,
            index,
            patterns,
            self.max_line_bytes,
            raw=int(pos["raw"]),
            decoded=int(pos["decoded"]),
            consumed=int(pos["consumed"]),
            lines=int(pos["lines"]),
        )

    def _read(self, app: FollowedApp, tail: FileTail, budget: int) -> int:
        if tail.codec is not None and tail.codec not in CODECS:
            self.problems.report(
                app, "unreadable", f"{tail.path}: codec {tail.codec!r} is not supported (use zstd, lz4, snappy or none)", once=True
            )
            tail.broken = True
            return budget
        if tail.seen is not None:
            try:
                unchanged = _stat_key(os.lstat(tail.path)) == tail.seen
            except OSError:
                unchanged = False  # opening it says what is wrong
            if unchanged:  # not grown, moved, replaced or turned into a link since it was read to its end
                self.on_caught_up(app)
                return budget
            tail.seen = None
        fd = self._open(app, tail)
        if fd is None:
            return budget
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.problems.report(app, "not_regular", f"{tail.path}: not a regular file; never read", once=True)
                tail.broken = True
                return budget
            app.active_problems.discard("unreadable")
            if st.st_mtime - time.time() > _FUTURE_SKEW_SECONDS:
                self.problems.report(
                    app,
                    "clock_skew",
                    f"{tail.path}: modified {st.st_mtime - time.time():.0f} s in the future; "
                    "the writer's clock is ahead (timeouts use this process's clock, so nothing else changes)",
                    once=True,
                )
            why = self._replaced_why(fd, st, tail)
            if why:
                self._replaced(app, tail, why)
                return budget
            tail.size = st.st_size
            if st.st_size == tail.raw:
                self.on_caught_up(app)
                tail.seen = _stat_key(st)
                return budget
            while tail.raw < st.st_size and budget > 0 and not tail.broken:
                at = tail.raw
                data = os.pread(fd, min(_READ_CHUNK, st.st_size - at), at)
                if not data:
                    break
                if at < _HEAD_BYTES and len(tail.head) == at:
                    tail.head += data[: _HEAD_BYTES - at]
                budget -= self._decode(app, tail, data, budget)
            if tail.raw >= st.st_size:
                self.on_caught_up(app)
                if not tail.broken:
                    tail.seen = _stat_key(st)  # a symbolic link's lstat differs from its target's fstat: never skipped
            else:
                app.caught_up = False
        except OSError as exc:
            self.problems.report(app, "unreadable", f"{tail.path}: read failed: {exc.strerror or exc}", once=True)
        except EventLogError as exc:
            if tail.failed_at != tail.resume_point()[0]:
                # read once more from the last boundary: a network file system may have shown the new size
                # before the bytes (a hole of zeros); the same failure twice means the data is bad
                tail.failed_at = tail.resume_point()[0]
                tail.rewind()
            else:
                self.problems.report(app, "corrupt", f"{exc}; the rest of this file is skipped")
                tail.broken, tail.decoder = True, None
        finally:
            os.close(fd)
        if tail.decoder is not None and (tail.broken or not tail.decoder.partial):
            tail.decoder = None  # nothing held: recreate at the next boundary instead of keeping its buffers
        return budget

    def _open(self, app: FollowedApp, tail: FileTail) -> int | None:
        """The file opened non-blocking (a FIFO swapped in never hangs a poll); a symbolic link only where allowed."""
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            try:
                return os.open(tail.path, flags | getattr(os, "O_NOFOLLOW", 0))
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
            # a symbolic link (or a loop): followed only when its target stays inside a watched folder
            if not self.link_inside(tail.path):
                self.problems.report(app, "symlink", f"{tail.path}: a symbolic link out of the watched folders; not read", once=True)
                tail.broken = True
                return None
            return os.open(tail.path, flags)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return None  # renamed or removed: the next listing says which
            why = "symbolic link loop" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
            self.problems.report(app, "unreadable", f"{tail.path}: cannot open: {why}", once=True)
            return None

    @staticmethod
    def _replaced_why(fd: int, st: os.stat_result, tail: FileTail) -> str:
        """Why the file at ``tail.path`` is not the one read so far ("" when it is): smaller, other first bytes, another inode.

        Another inode with the same first bytes is the same log (some network file systems renumber inodes): kept.
        """
        if st.st_size < tail.raw:
            return f"it shrank from {tail.raw} to {st.st_size} bytes"
        inode = (st.st_dev, st.st_ino)
        moved = tail.inode is not None and inode != tail.inode
        tail.inode = inode
        if tail.head and (moved or st.st_size > tail.raw) and os.pread(fd, len(tail.head), 0) != tail.head:
            return "another file took its name" if moved else "its first bytes changed"
        if moved and not tail.head and tail.raw > 0:
            return "another file took its name"
        if not tail.head and tail.raw > 0:  # resumed from a saved position: these first bytes are the log's from now on
            tail.head = os.pread(fd, min(tail.raw, _HEAD_BYTES), 0)
        return ""

    def _replaced(self, app: FollowedApp, tail: FileTail, why: str) -> None:
        """A log replaced or truncated under the watcher: what was read belongs to another file. The application is
        forgotten (its series go) and the log found again at the next listing, read from its start as a new one."""
        self.problems.report(app, "replaced", f"{tail.path}: replaced or truncated ({why}); read again from its start as a new log")
        tail.broken, tail.decoder = True, None
        self.book.drop(app, "forgotten", f"{app.name}: its log was replaced", done=False)

    def _decode(self, app: FollowedApp, tail: FileTail, data: bytes, budget: int) -> int:
        """Decode one raw chunk and deliver its wanted lines, stopping once ``budget`` decoded bytes are spent
        (``tail.raw`` then says how far the chunk was used); returns the decoded size."""
        if tail.decoder is None:
            tail.decoder = tail_decoder(tail.path, tail.codec, tail.raw)
        decoded_total = 0
        pieces = tail.decoder.feed(data)
        try:
            for piece, boundary in pieces:
                decoded_total += len(piece)
                if tail.skip > 0:  # delivered before a restart
                    cut = min(tail.skip, len(piece))
                    tail.skip -= cut
                    tail.filter.decoded_pos += cut
                    tail.filter.consumed = tail.filter.decoded_pos
                    piece = piece[cut:]
                before = tail.filter.lines
                tail.filter.feed(piece, lambda line_no, event_type, line: self.on_line(app, tail, line_no, event_type, line))
                self.counts.lines += tail.filter.lines - before
                for line_no in tail.filter.too_long:
                    self.problems.report(
                        app, "line_too_long", f"{tail.path}:{line_no}: a wanted event line longer than {self.max_line_bytes} bytes; skipped"
                    )
                tail.filter.too_long.clear()
                if boundary is not None:
                    tail.note_boundary(boundary, tail.filter.decoded_pos)
                if decoded_total >= budget or self._inflated(app, tail):
                    break
        finally:
            pieces.close()  # the decoder notes how much of ``data`` it used
        self.counts.read_bytes += max(0, tail.decoder.raw_pos - tail.raw)
        tail.raw = tail.decoder.raw_pos
        self.counts.decoded_bytes += decoded_total
        if decoded_total:
            self.book.dirty = True
        return decoded_total

    def _inflated(self, app: FollowedApp, tail: FileTail) -> bool:
        """True (counted once per file, the rest of it skipped) when the file decodes to far more than any log does."""
        raw = tail.decoder.raw_pos if tail.decoder is not None else tail.raw
        if tail.codec is None or tail.filter.decoded_pos <= _MAX_INFLATION * raw + _INFLATION_ALLOWANCE:
            return False
        self.problems.report(
            app,
            "inflated",
            f"{tail.path}: {raw} compressed bytes decode to over {tail.filter.decoded_pos} (a decompression bomb?); "
            "the rest of this file is skipped",
        )
        tail.broken = True
        return True


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """What says a file is the one read so far and has not changed: its type, identity, size and modification time."""
    return st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns
