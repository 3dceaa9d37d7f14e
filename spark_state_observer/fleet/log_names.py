"""How Spark names its event logs, and what the watcher derives from a name: the log's stable name (application
id and attempt), its codec, and the shard it belongs to.

Shared by the watcher and the object-store mirror (``spark_state_observer.fleet.store_mirror``), which must shard and name
logs exactly as the watcher does.

Sharding: ``shard=(K, N)`` keeps the applications whose log name (the file or folder name without
``eventlog_v2_``, ``.inprogress`` or codec suffix, i.e. the application id and attempt) has a CRC-32
equal to K modulo N; N watchers with K = 0..N-1 split a folder disjointly and completely.
"""

from __future__ import annotations

import os
import re
import zlib

from spark_state_observer.capture.codecs import CODECS

ROLLING_DIR = "eventlog_v2_"
EVENTS_FILE = re.compile(r"^events_(\d+)_(.+?)(?:\.compact)?$")
APPSTATUS = "appstatus_"
INPROGRESS = ".inprogress"
SUFFIXES = tuple("." + c for c in CODECS) + (".lzf",)


def log_name(entry_name: str) -> str:
    """The stable name of a log: application id and attempt, without folder prefix, codec or ``.inprogress``."""
    name = entry_name.removeprefix(ROLLING_DIR).removesuffix(INPROGRESS)
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def in_shard(name: str, shard: tuple[int, int] | None) -> bool:
    """Whether the log ``name`` belongs to shard (K, N): CRC-32 of its file-name bytes modulo N equals K.

    The bytes are the name's bytes on disk (``os.fsencode``: UTF-8, with the surrogate escapes of a name that
    is not UTF-8 turned back into its bytes), so such a name hashes like any other instead of raising.
    """
    if shard is None:
        return True
    k, n = shard
    return zlib.crc32(os.fsencode(name)) % n == k


def codec_of(name: str) -> str | None:
    """The codec a log's name says; ``lzf`` too, which Spark has and the watcher cannot read (reported, not read as text)."""
    base = name.removesuffix(INPROGRESS).removesuffix(".compact")
    ext = base.rsplit(".", 1)[-1] if "." in base else ""
    return ext if ext in CODECS or ext == "lzf" else None
