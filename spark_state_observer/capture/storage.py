"""Event logs and checkpoints in object stores: a URL becomes an fsspec filesystem and a path in it.

Fleets keep event logs and checkpoints where the Spark History Server reads them: S3 (``s3a://`` from
Spark, ``s3://`` elsewhere), GCS (``gs://``), Azure (``abfs://``, ``abfss://``) and HDFS (``hdfs://``).
Each store's client is an optional extra (``[s3]``, ``[gcs]``, ``[azure]``, ``[hdfs]``); a missing one is
a one-line message naming the extra to install, not an ImportError.

Credentials come only from the store's own standard chain (for S3 the ``AWS_*`` environment variables,
``AWS_ENDPOINT_URL`` included, profiles, instance and web-identity roles): a URL carrying
``user:password@`` is refused, and every message passes through ``redact`` so no secret reaches a log,
a label or a terminal. Store failures (no such bucket, access denied, no credentials, unreachable
endpoint, timeouts) become a ``StorageError`` with a short ``kind`` the callers count by.

The offline readers (replay, backtest, inspect) read local files; ``staged`` gives them a local copy
of a URL's objects (one LIST of the prefix, one GET per object), cleaned up afterwards.
"""

from __future__ import annotations

import os
import re
import tempfile
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

# URL scheme -> (fsspec protocol, extra that installs its client; "" where nothing is needed)
SCHEMES: dict[str, tuple[str, str]] = {
    "s3": ("s3", "s3"),
    "s3a": ("s3", "s3"),  # Hadoop's S3 connector writes what s3fs reads
    "gs": ("gs", "gcs"),
    "abfs": ("abfs", "azure"),
    "abfss": ("abfs", "azure"),
    "hdfs": ("hdfs", "hdfs"),
    "file": ("file", ""),
}
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/@\s:]*:[^/@\s]*@")  # bounded scheme: linear in the text
# S3 client timeouts and retries: a dead endpoint is a clear message within a minute, not a hang; the
# client's own 3 attempts only (s3fs would retry each failed call 5 times more with back-off: a store answering
# errors would hold the watcher's poll for minutes; its next poll is the retry)
# (a fresh client each time: credentials and endpoint are read from the environment as it is now)
_S3_OPTIONS: dict[str, Any] = {
    "skip_instance_cache": True,
    "config_kwargs": {"connect_timeout": 10, "read_timeout": 30, "retries": {"max_attempts": 3}},
}


class StorageError(Exception):
    """A store could not be used; the message is safe to print (no credentials), ``kind`` is for counting."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(redact(message))
        self.kind = kind


def is_url(location: str) -> bool:
    """Whether ``location`` is a URL (``scheme://``) rather than a local path."""
    return _URL.match(location) is not None


def redact(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it removed."""
    return _USERINFO.sub(r"\1", text)


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem for ``url`` and the path within it (bucket/key for object stores)."""
    match = _URL.match(url)
    scheme = match.group(1).lower() if match else ""
    if scheme not in SCHEMES:
        raise StorageError(f"{url}: unsupported URL scheme {scheme!r}; supported: {', '.join(s + '://' for s in SCHEMES)}", "unsupported")
    if urlsplit(url).password is not None:
        raise StorageError(
            f"{url}: credentials in a URL are refused; give them through the store's standard chain (e.g. AWS_* variables or a profile)",
            "credentials",
        )
    protocol, extra = SCHEMES[scheme]
    try:
        import fsspec

        options = _S3_OPTIONS if protocol == "s3" else {}
        fs, path = fsspec.core.url_to_fs(protocol + url[len(scheme) :], **options)
        if protocol == "s3":
            fs.retries = 1  # s3fs's own loop (no constructor argument): the client's attempts only, see _S3_OPTIONS
    except ImportError:
        raise StorageError(
            f"{url}: reading {scheme}:// needs the [{extra}] extra: pip install 'spark-state-observer[{extra}]'", "missing_extra"
        ) from None
    except Exception as exc:
        raise failure(url, exc) from None
    return fs, path


def failure(url: str, exc: BaseException) -> StorageError:
    """A store's exception as a clear, credential-free ``StorageError``: what failed, where, and its kind."""
    name = type(exc).__name__
    text = str(exc)[:200]
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return StorageError(f"{url}: not found (no such bucket, container or key)", "not_found")
    if isinstance(exc, PermissionError) or "AccessDenied" in text or "Forbidden" in text or "SignatureDoesNotMatch" in text:
        return StorageError(f"{url}: access denied; check the credentials of the store's standard chain ({name})", "denied")
    if name in ("NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError", "ClientAuthenticationError"):
        return StorageError(
            f"{url}: no credentials found in the store's standard chain (for S3: AWS_* variables, profile, role)", "credentials"
        )
    if isinstance(exc, (TimeoutError, ConnectionError)) or "Timeout" in name or "Connect" in name or "Endpoint" in name:
        return StorageError(f"{url}: the store cannot be reached ({name}: {text})", "unreachable")
    if "SlowDown" in text or "Throttl" in text or "TooManyRequests" in text:
        return StorageError(f"{url}: the store is throttling requests ({name})", "throttled")
    return StorageError(f"{url}: {name}: {text}", "error")


def local_name(root: str, relative: str) -> str | None:
    """Where an object's relative key lands under ``root``; None for keys that would leave it (``..``, absolute)."""
    parts = [p for p in relative.split("/") if p]
    if not parts or any(p in (".", "..") or "\0" in p for p in parts):
        return None
    return os.path.join(root, *parts)


def copy_tree(url: str, into: str) -> str:
    """Copy the object (or every object under the prefix) at ``url`` into the folder ``into``; return the local path.

    One recursive LIST, one GET per object. A key that would land outside ``into`` is skipped.
    """
    fs, path = filesystem(url)
    path = path.rstrip("/")
    base = os.path.basename(path) or "root"
    local_root = os.path.join(into, base)
    try:
        found = fs.find(path, detail=True)
        if not found:
            raise FileNotFoundError(path)
        if list(found) == [path] and found[path].get("type") == "file":
            fs.get_file(path, local_root)
            return local_root
        os.makedirs(local_root, exist_ok=True)
        for key, info in found.items():
            if info.get("type") != "file" or key.endswith("/"):  # folder markers (s3a writes them) are no files
                continue
            target = local_name(local_root, key[len(path) :])
            if target is None:
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            fs.get_file(key, target)
    except Exception as exc:
        raise failure(url, exc) from None
    return local_root


@contextmanager
def staged(location: str) -> Iterator[str]:
    """A local path with the contents of ``location``: itself for a local path, a temporary copy for a URL."""
    if not is_url(location) or location.lower().startswith("file://"):
        yield location[len("file://") :] if location.lower().startswith("file://") else location
        return
    with tempfile.TemporaryDirectory(prefix="sso-store-") as tmp:
        yield copy_tree(location, tmp)


@contextmanager
def staged_all(locations: list[str]) -> Iterator[tuple[list[str], Callable[[str], str]]]:
    """Local paths for ``locations`` (see ``staged``) and a function that puts the URLs back into messages."""
    with ExitStack() as stack:
        pairs = [(stack.enter_context(staged(location)), location) for location in locations]

        def original(text: str) -> str:
            for local, location in pairs:
                if local != location:
                    text = text.replace(local, redact(location.rstrip("/")))
            return text

        yield [local for local, _ in pairs], original
