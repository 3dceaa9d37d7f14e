"""Keep the watcher's freed heap for its next poll instead of handing it back to the kernel after every poll.

One poll of the ``watch`` command decodes every followed log's new bytes (pieces of up to ~256 KiB, joined by
``spark_state_observer.fleet.codec_tail``) and holds the wanted lines of all applications (task ends, plans, job starts:
~130 kB a micro-batch, ~26 MB a poll at 200 applications) until they are handled, then frees them all. With
glibc's defaults, the pieces above its dynamic mmap threshold are mapped and unmapped one by one, and the heap's
free top is trimmed back to the kernel at the end of each poll: the next poll faults the same pages in again,
zero-filled, and the copies into them (line slicing, joins) cost 2-2.5x a copy into warm memory
(docs/benchmarks.md, issue 32, session 9). Raising both thresholds once keeps that memory mapped between polls:
RSS stays near its peak (which the poll reaches anyway) rather than falling back between polls.

glibc only (``mallopt``); elsewhere nothing changes. A process-wide setting: it is made by the ``watch``
command's ``FleetObserver``, whose process is the watcher's own, never inside an observed Spark driver.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
TRIM_BYTES = 64 * 1024 * 1024  # free heap top kept: over one poll's churn at 200 applications
MMAP_BYTES = 4 * 1024 * 1024  # allocations below this come from the heap: every decoded piece and line of a poll


def keep_freed_heap(trim_bytes: int = TRIM_BYTES, mmap_bytes: int = MMAP_BYTES) -> bool:
    """Ask glibc to keep up to ``trim_bytes`` of freed heap and to serve allocations under ``mmap_bytes`` from the
    heap; False where there is no glibc ``mallopt`` (musl, macOS) or it refused: the defaults stay."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap_bytes)) and bool(mallopt(_M_TRIM_THRESHOLD, trim_bytes))
