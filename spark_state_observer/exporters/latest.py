"""The newest complete exposition, gzipped once per rendering and, when rendering is slow, rendered ahead of the scrapes.

A fleet's exposition (1,000 applications x 2 queries: ~48 MB of text, 1.9 MB gzipped) costs ~0.15 s
of CPU to join and gzip, and rendered inside the request a GET took 1.3-6.6 s (medians of runs) of wall time: the event
worker holds the GIL and the machine's 2 cores are shared (bench/render_scale.py --fleet). The text
is therefore served from the newest complete rendering, kept as its gzipped bytes only (a plain GET
decompresses them), and:

- **cheap renderings** (the last one took under ``ahead_after`` seconds of CPU, as for a listener's
  few queries; CPU rather than wall time, so that a loaded machine does not change the mode): every
  GET renders afresh in its own thread, exactly as before; no thread is started;
- **slow renderings**: a renderer thread renders ahead of the next scrape, expected one scrape
  interval (the median of the last gaps between GETs) after the last one, beginning a rendering's time
  plus ``refresh`` seconds before it; a GET sends the newest rendering as it is. Scraped every 15 s,
  that is one rendering per scrape, as before, but off the request; scraped faster than renderings
  take, it renders back to back, each at least ``refresh`` after the previous began and never sooner
  than the previous one's CPU time after it ended (at most half a core).

Staleness: a GET serves a rendering begun at most ``max_age`` seconds or two scrape intervals (whichever
is longer) before the GET arrived, and never one begun before the last ``invalidate()``
(``Observer.flush``); otherwise it waits for the renderer. With regular scrapes a GET gets the one
rendered for it, begun about one rendering plus ``refresh`` before it; when that one is late (a
rendering took longer than the last ones), the previous, about one interval older. Each response says
its rendering's age in ``AGE_HEADER``.

Memory: one gzipped copy, plus one metric family's text at a time while rendering (the text comes
in per-family parts and is compressed as it comes; the full text is never held).
"""

from __future__ import annotations

import statistics
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import pairwise

# zlib's fastest level: a fleet's 48 MB exposition compresses in ~0.05 s of CPU instead of ~0.5 s at
# level 6 (~2 s at gzip.compress's default 9, prometheus-client's), for a body ~25% larger
GZIP_LEVEL = 1
# the response header that carries the served rendering's age, in seconds since it began
AGE_HEADER = "X-Spark-State-Observer-Age-Seconds"
# a GET that waits longer than this for a rendering fails (500) instead of holding its connection
WAIT_SECONDS = 60.0


class RenderingUnavailable(RuntimeError):
    """No rendering recent enough arrived in time (``WAIT_SECONDS``)."""


@dataclass(frozen=True)
class Rendered:
    """One complete rendering: the text gzipped, when its rendering began and ended, and its cost."""

    gzipped: bytes
    began: float  # time.monotonic(): the state shown is the state as of about then
    ended: float
    cpu: float  # CPU seconds of the thread that rendered it
    size: int  # bytes of the text

    @property
    def wall(self) -> float:
        return self.ended - self.began

    def text(self) -> bytes:
        """The text itself, for a client that does not accept gzip."""
        return zlib.decompress(self.gzipped, 31)

    def text_pieces(self, piece: int) -> Iterator[bytes]:
        """The text in pieces of at most ``piece`` bytes, decompressed as they are asked for: a client that does
        not accept gzip, and reads slowly or not at all, holds one piece and the decompressor, not the text."""
        inflate = zlib.decompressobj(31)
        view = memoryview(self.gzipped)
        for start in range(0, len(view), 16384):  # fed in slices: a leftover input is copied, so it stays small
            data: bytes | memoryview = view[start : start + 16384]
            while data:
                out = inflate.decompress(data, piece)
                data = inflate.unconsumed_tail
                if out:
                    yield out
        tail = inflate.flush()
        if tail:
            yield tail


def render_gzipped(render: Callable[[], Iterable[bytes]]) -> Rendered:
    """Render ``render()``'s parts and gzip them as they come (one part's text in memory at a time)."""
    began, cpu = time.monotonic(), time.thread_time()
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    out, size = [], 0
    for part in render():
        size += len(part)
        out.append(compressor.compress(part))
    out.append(compressor.flush())
    return Rendered(b"".join(out), began, time.monotonic(), time.thread_time() - cpu, size)


class LatestExposition:
    """What the endpoint serves: see the module docstring for when it renders and how stale it may be.

    ``render`` gives the exposition's text in parts (their concatenation is the text).
    """

    def __init__(
        self,
        render: Callable[[], Iterable[bytes]],
        *,
        refresh: float = 1.0,
        max_age: float = 10.0,
        ahead_after: float = 0.05,
    ) -> None:
        self._render = render
        self.refresh, self.max_age, self.ahead_after = refresh, max_age, ahead_after
        self._cond = threading.Condition()
        self._newest: Rendered | None = None
        self._need = float("-inf")  # a waiting GET needs a rendering begun at or after this
        self._invalid_before = float("-inf")  # no rendering begun before this is served (``invalidate``)
        self._gets: deque[float] = deque(maxlen=6)  # when the last GETs arrived: the scrape interval
        self._walls: deque[float] = deque(maxlen=3)  # how long the last renderings took
        self._failure: tuple[float, BaseException] | None = None  # the renderer's last failed rendering, when it began
        self._thread: threading.Thread | None = None
        self._closed = False
        self.renderings = 0  # renderings completed, by either path

    @property
    def newest(self) -> Rendered | None:
        return self._newest

    def get(self) -> Rendered:
        """A rendering recent enough to serve now; renders here when renderings are cheap, else waits for the renderer.

        Raises what the rendering raised, or ``RenderingUnavailable`` after ``WAIT_SECONDS``.
        """
        now = time.monotonic()
        with self._cond:
            self._gets.append(now)
            newest = self._newest
            ahead = newest is not None and newest.cpu >= self.ahead_after and not self._closed
            if ahead:
                interval = self._interval()
                oldest = max(self.max_age, 2 * interval) if interval is not None else self.max_age
                return self._wait(max(now - oldest, self._invalid_before), now)
        return self._store(render_gzipped(self._render))

    def invalidate(self) -> None:
        """Serve nothing begun before now: the next GET shows every change made so far (``Observer.flush``)."""
        with self._cond:
            self._invalid_before = time.monotonic()

    def close(self) -> None:
        """Stop the renderer thread (a GET afterwards renders in its own thread)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _wait(self, floor: float, now: float) -> Rendered:
        """Called with the lock held: the newest rendering begun at or after ``floor``, waiting for the renderer if needed."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="spark-state-observer-render", daemon=True)
            self._thread.start()
        deadline = now + WAIT_SECONDS
        while True:
            newest = self._newest
            if newest is not None and newest.began >= floor:
                self._cond.notify_all()  # the renderer plans its next rendering from this GET
                return newest
            if self._failure is not None and self._failure[0] >= floor:
                raise self._failure[1]
            if self._need < floor:
                self._need = floor
                self._cond.notify_all()
            left = deadline - time.monotonic()
            if left <= 0 or self._closed:
                raise RenderingUnavailable(
                    f"no rendering of the metrics within {WAIT_SECONDS:.0f} s" if left <= 0 else "the endpoint is closing"
                )
            self._cond.wait(left)

    def _store(self, rendered: Rendered) -> Rendered:
        with self._cond:
            if self._newest is None or rendered.began > self._newest.began:
                self._newest = rendered
            self._walls.append(rendered.wall)
            self.renderings += 1
            self._cond.notify_all()
        return rendered

    def _interval(self) -> float | None:
        """Called with the lock held: the scrape interval as the GETs show it (the median of their last gaps)."""
        if len(self._gets) < 2:
            return None
        return statistics.median(b - a for a, b in pairwise(self._gets))

    def _due(self, now: float) -> float | None:
        """Called with the lock held: when the renderer should begin its next rendering; None: not until notified."""
        newest = self._newest
        if newest is None or newest.cpu < self.ahead_after:
            return None  # cheap renderings are done by the GETs themselves
        failed = self._failure[0] + self.refresh if self._failure is not None else float("-inf")  # a failing render: retried each refresh
        if self._need > newest.began:  # a GET waits
            return max(now, failed)
        interval = self._interval()
        if interval is None:
            return None  # no scrape interval yet: the next GET renders (or takes the newest within max_age)
        start = self._gets[-1] + interval - max(self._walls) - self.refresh  # done about ``refresh`` before the next GET
        if newest.began >= start:
            return None  # the next GET's rendering is done or under way: wait for that GET
        return max(start, newest.began + self.refresh, newest.ended + newest.cpu, failed)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    now = time.monotonic()
                    due = self._due(now)
                    if due is not None and due <= now:
                        break
                    self._cond.wait(None if due is None else due - now)
            began = time.monotonic()
            try:
                self._store(render_gzipped(self._render))
            except Exception as exc:  # a broken rendering fails the GETs waiting for it, not the renderer
                with self._cond:
                    self._failure = (began, exc)
                    self._cond.notify_all()
            else:
                with self._cond:
                    self._failure = None
