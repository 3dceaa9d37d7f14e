"""``spark_state_observer.fleet.heap``: after ``keep_freed_heap`` a poll's freed pieces stay in the process's heap for the next
poll, where glibc's defaults hand them back to the kernel (mapped and unmapped one by one, or trimmed)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from conftest import ROOT

_PROBE = """
import ctypes, sys
from spark_state_observer.fleet.heap import keep_freed_heap

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "keep":
    assert keep_freed_heap()
pieces = [bytes(256 * 1024) for _ in range(40)]  # one poll's decoded pieces (~10 MB), freed at its end
del pieces
print(libc.mallinfo2().fordblks)  # free bytes the heap kept
"""


def _kept(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", _PROBE, mode], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    return int(done.stdout)


def test_freed_pieces_stay_in_the_heap() -> None:
    try:
        ctypes.CDLL(None).mallinfo2  # noqa: B018  # glibc 2.33+: what the probe reads
    except AttributeError:
        pytest.skip("no glibc mallinfo2 to read the heap with")
    assert _kept("default") < 4 * 1024 * 1024  # mapped one by one, unmapped when freed
    assert _kept("keep") >= 10 * 1024 * 1024  # all of them, reusable by the next poll
