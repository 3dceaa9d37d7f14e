"""The event-log watcher's positions on disk, so a restarted watcher loses nothing and repeats nothing.

A small JSON document, replaced atomically (written to a temporary file in the same folder, fsynced,
then renamed over the old one): a crash leaves either the previous or the new state, never half of one.
A missing file is a first start; an unreadable or damaged one is reported and treated as a first start.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

STATE_VERSION = 1


class StateFileError(ValueError):
    """The state file exists but cannot be used; the message says why."""


def load_state(path: str) -> dict[str, Any] | None:
    """The saved state, or None when there is none yet."""
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StateFileError(f"{path}: watcher state unreadable ({exc}); starting as if for the first time") from None
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION or not isinstance(state.get("apps"), dict):
        raise StateFileError(f"{path}: not a version-{STATE_VERSION} watcher state; starting as if for the first time")
    return state


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
