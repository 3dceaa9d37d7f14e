"""The lineage a checkpoint-format-v2 RocksDB changelog starts with: which file of each earlier version it builds on.

With ``checkpointFormatVersion=2`` a retried or re-run batch writes its state under a new unique id, so a
version can have several files (``<version>_<uniqueId>.changelog/.zip``) of which one counts. The commit log
names it for the batches it still holds (``spark_state_observer.offline.checkpoint.layout``); each changelog names it too:
lz4-java's block format (Spark's default ``stateStore.compression.codec``), and inside, as Java's ``writeUTF``
writes them, the changelog format (``v3`` and later carry a lineage) then a JSON array of
``{"version": N, "checkpointUniqueId": "..."}`` back to the snapshot it builds on. Only the first blocks are
read (a ``writeUTF`` string is at most 65,535 bytes), each bounded as the event-log reader bounds them.
"""

from __future__ import annotations

import struct

from spark_state_observer.capture.codecs import decode_lz4_block
from spark_state_observer.model.bounded import loads
from spark_state_observer.offline.checkpoint.files import read_head

LZ4_MAGIC = b"LZ4Block"
_BLOCK_HEADER = 8 + 1 + 12
MAX_BLOCK_BYTES = 1 << 20  # Spark writes 32 KiB blocks by default (spark.io.compression.lz4.blockSize)
MAX_HEAD_BYTES = 4 << 20  # compressed bytes read from the file's start
_NEEDED = 2 + 16 + 2 + 65_535  # the format string and the longest writeUTF
FORMATS_WITH_LINEAGE = ("v3", "v4")


class NoLineage(ValueError):
    """The changelog carries no lineage (format v1/v2, another codec) or its header cannot be read."""


def _content(raw: bytes, path: str) -> bytes:
    """The decompressed start of a changelog: lz4-java blocks until ``_NEEDED`` bytes or the data runs out."""
    out = bytearray()
    at = 0
    while len(out) < _NEEDED and at + _BLOCK_HEADER <= len(raw):
        if raw[at : at + 8] != LZ4_MAGIC:
            if at == 0:
                raise NoLineage(f"{path}: not lz4-java block format (another stateStore.compression.codec?)")
            break
        token = raw[at + 8]
        clen, dlen, _checksum = struct.unpack_from("<iii", raw, at + 9)
        if not (0 <= clen <= MAX_BLOCK_BYTES and 0 <= dlen <= MAX_BLOCK_BYTES):
            raise NoLineage(f"{path}: implausible lz4 block sizes {clen}/{dlen}")
        at += _BLOCK_HEADER
        if clen == 0 or at + clen > len(raw):  # the end marker, or a block beyond what was read
            break
        out += decode_lz4_block(token, raw[at : at + clen], dlen)
        at += clen
    return bytes(out)


def _utf(data: bytes, at: int, path: str) -> tuple[str, int]:
    if at + 2 > len(data):
        raise NoLineage(f"{path}: header cut short")
    (n,) = struct.unpack_from(">H", data, at)
    if at + 2 + n > len(data):
        raise NoLineage(f"{path}: header cut short")
    return data[at + 2 : at + 2 + n].decode("utf-8", errors="replace"), at + 2 + n


def changelog_lineage(path: str) -> dict[int, str]:
    """version -> unique id, as the changelog at ``path`` names the files it builds on.

    Raises ``NoLineage`` (a ``ValueError``) when it names none or cannot be read, ``UnreadableFile`` when the
    file cannot be opened."""
    try:
        data = _content(read_head(path, MAX_HEAD_BYTES), path)
    except NoLineage:
        raise
    except Exception as exc:  # a corrupt block: lz4 raises its own errors
        raise NoLineage(f"{path}: header unreadable ({type(exc).__name__})") from None
    fmt, at = _utf(data, 0, path)
    if fmt not in FORMATS_WITH_LINEAGE:
        raise NoLineage(f"{path}: changelog format {fmt[:8]!r} carries no lineage")
    text, _ = _utf(data, at, path)
    try:
        entries = loads(text)  # at most 65,535 bytes, but ``[[[...]]]`` nests past Python's recursion limit
    except (ValueError, RecursionError):
        raise NoLineage(f"{path}: lineage is not JSON (or nested too deep)") from None
    lineage: dict[int, str] = {}
    for e in entries[:100_000] if isinstance(entries, list) else []:
        version = e.get("version") if isinstance(e, dict) else None
        uid = e.get("checkpointUniqueId") if isinstance(e, dict) else None
        if type(version) is int and 0 <= version < 2**63 and isinstance(uid, str):
            lineage[version] = uid[:64]
    return lineage
