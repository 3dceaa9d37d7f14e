"""Verifying the checksum files Spark writes beside state files (4.1+, checkpoint format v2).

With ``spark.sql.streaming.checkpoint.fileChecksum.enabled`` (on by default, applied with checkpoint format
v2) every state file ``F`` gets ``F.crc`` beside it: ``{"algorithm":"CRC32C","value":<signed int>,
"mainFileSize":<bytes>,...}``. (Hadoop's own ``.F.crc`` files, hidden, are another thing and not read.) The
inspector verifies them only when asked (``inspect --verify-checksums``): every state file is read whole,
which costs what a restore's reads cost (in an object store, ranged GETs of ``files.CHUNK`` bytes: memory
stays bounded). Checksum files are never counted as state bytes (``spark_state_observer.offline.checkpoint.layout``
only counts state files). CRC32C runs in C with the ``[verify]`` extra (``google-crc32c``); without it, a
pure-Python table at about 8 MB/s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import ModuleType

from spark_state_observer.model.bounded import loads
from spark_state_observer.offline.checkpoint.files import UnreadableFile, chunks, is_dir, list_dir, read_text, regular_size

_c: ModuleType | None
try:
    import google_crc32c as _c
except ImportError:  # the [verify] extra is not installed: the table below
    _c = None

MAX_FILES = 100_000  # checksum files verified per checkpoint
MAX_PROBLEMS = 100  # mismatches and unreadable files named in the report
SUFFIX = ".crc"


def _crc32c_table() -> list[int]:
    poly = 0x82F63B78  # Castagnoli, reflected
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC32C (Castagnoli) of ``data``, continuing ``crc``; what Spark's checksum files hold (as a signed int)."""
    if _c is not None:
        return int(_c.extend(crc, data))
    return crc32c_python(data, crc)


def crc32c_python(data: bytes, crc: int = 0) -> int:
    """``crc32c`` without the C extension (and its reference in the tests)."""
    crc ^= 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


@dataclass
class ChecksumReport:
    """What ``verify`` found: files checked, and the ones that do not match or cannot be checked."""

    checked: int = 0
    mismatches: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    truncated: bool = False  # more than MAX_FILES checksum files: the rest not verified
    unreadable_count: int = 0  # every file that could not be verified (``unreadable`` names the first MAX_PROBLEMS)

    @property
    def complete(self) -> bool:
        """Whether every checksum file was verified: none unreadable, none left out."""
        return not self.unreadable_count and not self.truncated


def verify(root: str) -> ChecksumReport:
    """Verify every Spark checksum file under ``root/state`` against the file it describes."""
    report = ChecksumReport()
    state = os.path.join(root, "state")
    stack = [state] if is_dir(state) else []
    while stack:
        folder = stack.pop()
        try:
            names = sorted(list_dir(folder))
        except UnreadableFile as exc:
            _note(report.unreadable, str(exc))
            report.unreadable_count += 1
            continue
        for name in names:
            path = os.path.join(folder, name)
            if is_dir(path):
                if not os.path.islink(path):
                    stack.append(path)
                continue
            if not name.endswith(SUFFIX) or name.startswith("."):
                continue
            if report.checked >= MAX_FILES:
                report.truncated = True
                return report
            report.checked += 1
            problem = _check(path, path[: -len(SUFFIX)])
            if problem is not None:
                kind, text = problem
                _note(report.mismatches if kind == "mismatch" else report.unreadable, text)
                report.unreadable_count += kind != "mismatch"
    return report


def _note(into: list[str], text: str) -> None:
    if len(into) < MAX_PROBLEMS:
        into.append(text)


def _check(checksum_path: str, main: str) -> tuple[str, str] | None:
    try:
        meta = loads(read_text(checksum_path, limit=64 << 10))
        algorithm, expected, size = meta["algorithm"], meta["value"], meta["mainFileSize"]
    except UnreadableFile as exc:
        return "unreadable", str(exc)
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        return "unreadable", f"{checksum_path}: not a checksum file ({type(exc).__name__})"
    if algorithm != "CRC32C" or type(expected) is not int or type(size) is not int:
        return "unreadable", f"{checksum_path}: algorithm {str(algorithm)[:40]!r} or its fields are not what this inspector verifies"
    try:
        actual_size = regular_size(main)
        if actual_size != size:
            return "mismatch", f"{main}: {actual_size} bytes, its checksum file says {size}"
        crc = 0
        for chunk in chunks(main):
            crc = crc32c(chunk, crc)
    except UnreadableFile as exc:
        return "unreadable", str(exc)
    except OSError as exc:
        return "unreadable", f"{main}: cannot be read ({exc.strerror or exc})"
    if crc != expected & 0xFFFFFFFF:
        return "mismatch", f"{main}: CRC32C {crc:#010x}, its checksum file says {expected & 0xFFFFFFFF:#010x}"
    return None
