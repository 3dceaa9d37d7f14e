"""The one gate to the file system: only paths inside the configured checkpoint roots are opened.

The browser may be reachable by more people than the checkpoints' owners, so a typed path is resolved
(symlinks, ``..``) before it is compared with the roots; a path that escapes them is refused.
"""

from __future__ import annotations

import os


class PathRefused(ValueError):
    """The path lies outside every configured checkpoint root (or none is configured)."""


def resolve_under_roots(path: str, roots: tuple[str, ...]) -> str:
    """The real path of ``path`` (relative paths are taken from the first root) if a root contains it."""
    if not roots:
        raise PathRefused("no checkpoint root is configured: start the browser with --checkpoint-root DIR to open checkpoints")
    text = path.strip()
    if text.startswith("file:"):
        text = "/" + text[len("file:") :].lstrip("/")
    candidate = os.path.realpath(os.path.join(roots[0], text))
    for root in roots:
        real_root = os.path.realpath(root)
        if candidate == real_root or candidate.startswith(real_root.rstrip(os.sep) + os.sep):
            return candidate
    raise PathRefused(
        f"refused: {path} resolves to {candidate}, which is outside the configured checkpoint roots "
        f"({', '.join(roots)}); only checkpoints under these roots can be opened"
    )


def list_checkpoints(roots: tuple[str, ...], max_depth: int = 3) -> list[str]:
    """Folders under the roots that look like streaming checkpoints (an ``offsets`` folder or ``metadata``)."""
    found: list[str] = []
    for root in roots:
        base_depth = root.rstrip(os.sep).count(os.sep)
        for folder, dirs, files in os.walk(root, followlinks=False):
            if "offsets" in dirs or ("metadata" in files and "commits" in dirs):
                found.append(folder)
                dirs[:] = []
            elif folder.count(os.sep) - base_depth >= max_depth:
                dirs[:] = []
            else:
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    return sorted(found)
