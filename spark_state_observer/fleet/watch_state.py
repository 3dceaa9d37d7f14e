"""The event-log watcher's positions on disk, so a restarted watcher loses nothing and repeats nothing.

A small JSON document, replaced atomically (written to a temporary file in the same folder, fsynced,
then renamed over the old one): a crash leaves either the previous or the new state, never half of one.
A missing file is a first start; an unreadable or damaged one is reported and treated as a first start.
The path is input like any other: only a regular file is read (opened non-blocking, so a FIFO put there
cannot hang the start, and checked, so ``/dev/zero`` is never read), at most ``MAX_STATE_BYTES`` of it,
through the bounded JSON parser (a million ``[`` or ``[{},{},...]`` is refused, not a crash).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from typing import Any

from spark_state_observer.model.bounded import JsonTooLarge, clean_text, loads

STATE_VERSION = 1
# ~1 KiB a followed application with a few query runs: room for the 10,000 applications a watcher follows at most
MAX_STATE_BYTES = 64 << 20
MAX_STATE_ITEMS = 4_000_000


class StateFileError(ValueError):
    """The state file exists but cannot be used; the message says why."""


def load_state(path: str) -> dict[str, Any] | None:
    """The saved state, or None when there is none yet."""
    where = clean_text(path, 500)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(f"{where}: watcher state unreadable ({exc.strerror or exc}); starting as if for the first time") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StateFileError(f"{where}: the watcher state is not a regular file; starting as if for the first time")
        data = b"" if st.st_size > MAX_STATE_BYTES else _read_bounded(fd, MAX_STATE_BYTES + 1)
        if st.st_size > MAX_STATE_BYTES or len(data) > MAX_STATE_BYTES:
            raise StateFileError(f"{where}: watcher state larger than {MAX_STATE_BYTES >> 20} MiB; starting as if for the first time")
        state = loads(data, MAX_STATE_ITEMS)
    except StateFileError:
        raise
    except JsonTooLarge:
        raise StateFileError(f"{where}: watcher state with too many JSON items; starting as if for the first time") from None
    except RecursionError:
        raise StateFileError(f"{where}: watcher state nested too deep; starting as if for the first time") from None
    except (OSError, ValueError) as exc:
        why = clean_text(getattr(exc, "strerror", None) or str(exc), 200)
        raise StateFileError(f"{where}: watcher state unreadable ({why}); starting as if for the first time") from None
    finally:
        os.close(fd)
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION or not isinstance(state.get("apps"), dict):
        raise StateFileError(f"{where}: not a version-{STATE_VERSION} watcher state; starting as if for the first time")
    return state


def _read_bounded(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes of the file (a file that grows while read stops there)."""
    parts: list[bytes] = []
    size = 0
    while size < limit:
        part = os.read(fd, limit - size)
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)


def save_state(path: str, apps: dict[str, Any], done: list[str], extra: dict[str, Any] | None = None) -> None:
    """Replace the state file atomically; ``extra`` holds what the watcher's user keeps with the positions."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".watch-state-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({**(extra or {}), "version": STATE_VERSION, "apps": apps, "done": done}, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
