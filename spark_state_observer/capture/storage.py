"""Event logs and checkpoints in object stores: a URL becomes an fsspec filesystem and a path in it.

Fleets keep event logs and checkpoints where the Spark History Server reads them: S3 (``s3a://`` from
Spark, ``s3://`` elsewhere), GCS (``gs://``), Azure (``abfs://``, ``abfss://``) and HDFS (``hdfs://``).
Each store's client is an optional extra (``[s3]``, ``[gcs]``, ``[azure]``, ``[hdfs]``); a missing one is
a one-line message naming the extra to install, not an ImportError.

Credentials come only from the store's own standard chain (for S3 the ``AWS_*`` environment variables,
``AWS_ENDPOINT_URL`` included, profiles, instance and web-identity roles): a URL carrying
``user:password@`` or ``token@`` is refused, and every message passes through ``redact``
(``spark_state_observer.model.redaction``: user parts, queries, fragments, secret-named parameters) so no
secret reaches a log, a label or a terminal. Store failures (no such bucket, access denied, no credentials, unreachable
endpoint, timeouts) become a ``StorageError`` with a short ``kind`` the callers count by.

The offline readers (replay, backtest, inspect) read local files; ``staged`` gives them a local copy
of a URL's objects (one LIST of the prefix, one GET per object, streamed to disk), cleaned up afterwards;
``staged_all`` copies only the objects an event-log reader opens. A key the local disk cannot hold (a name
too long, a key that is also a folder: ``x`` and ``x/y``) is skipped and said, never the end of the run.
"""

from __future__ import annotations

import os
import re
import tempfile
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from spark_state_observer.model.redaction import redact as redact  # messages of this module's callers pass through it

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
# S3 client timeouts and retries: a dead endpoint is a clear message within ~20 s, not a hang; the client's own
# 2 attempts in all, each at most 5 s to connect and 10 s without a byte (an endpoint that accepts and never
# answers took 127 s before); s3fs would retry each failed call 5 times more with back-off: a store answering
# errors would hold a sync for minutes; the next sync is the retry
# (a fresh client each time: credentials and endpoint are read from the environment as it is now)
_S3_OPTIONS: dict[str, Any] = {
    "skip_instance_cache": True,
    "config_kwargs": {"connect_timeout": 5, "read_timeout": 10, "retries": {"total_max_attempts": 2, "mode": "standard"}},
}


class StorageError(Exception):
    """A store could not be used; the message is safe to print (no credentials), ``kind`` is for counting."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(redact(message))
        self.kind = kind


def is_url(location: str) -> bool:
    """Whether ``location`` is a URL (``scheme://``) rather than a local path."""
    return _URL.match(location) is not None


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem for ``url`` and the path within it (bucket/key for object stores)."""
    match = _URL.match(url)
    scheme = match.group(1).lower() if match else ""
    if scheme not in SCHEMES:
        raise StorageError(f"{url}: unsupported URL scheme {scheme!r}; supported: {', '.join(s + '://' for s in SCHEMES)}", "unsupported")
    try:
        split = urlsplit(url)
        has_user = split.password is not None or (split.username is not None and SCHEMES[scheme][0] != "abfs")
    except ValueError:  # a malformed authority (an unclosed "[", a port that is no number)
        raise StorageError(f"{url}: not a URL this reader understands", "unsupported") from None
    if has_user:  # (abfs://container@account names the container there)
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
    text = redact(str(exc)[:2000])[:200]
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
    status = getattr(exc, "response", None)
    status = status.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(status, dict) else None
    throttling = ("SlowDown", "Throttl", "TooManyRequests", "ServiceUnavailable", "Service Unavailable", "503", "RequestLimitExceeded")
    if status in (429, 503) or any(word in text for word in throttling):
        return StorageError(f"{url}: the store is throttling requests ({name})", "throttled")
    return StorageError(f"{url}: {name}: {text}", "error")


def local_name(root: str, relative: str) -> str | None:
    """Where an object's relative key lands under ``root``; None for keys that would leave it (``..``, absolute)."""
    parts = [p for p in relative.split("/") if p]
    if not parts or any(p in (".", "..") or "\0" in p for p in parts):
        return None
    return os.path.join(root, *parts)


MAX_LISTED = 500_000  # objects one listing of a one-shot command holds: a listing that goes on beyond is refused


def find(fs: Any, path: str, limit: int = MAX_LISTED) -> dict[str, dict[str, Any]]:
    """Every object (and folder marker) under ``path`` as ``fs.find(path, detail=True)`` gives them, at most ``limit``.

    On S3 the listing is read page by page, so one that never ends (a broken or hostile server) is a
    ``StorageError`` once ``limit`` keys were read, not memory that grows until the process dies."""
    protocol = fs.protocol
    if "s3" not in ((protocol,) if isinstance(protocol, str) else tuple(protocol)):
        return dict(fs.find(path, detail=True))
    bucket, _, prefix = path.strip("/").partition("/")
    if prefix:  # a single object at ``path``, as fs.find gives it
        try:
            info = fs.info(path)
        except FileNotFoundError:
            info = None
        if info is not None and info.get("type") == "file":
            return {path: info}
    request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix + "/" if prefix else "", "MaxKeys": 1000}
    found: dict[str, dict[str, Any]] = {}
    while True:
        page = fs.call_s3("list_objects_v2", **request)
        for item in page.get("Contents") or []:
            key = f"{bucket}/{item.get('Key', '')}"
            found[key] = {"name": key, "size": int(item.get("Size") or 0), "ETag": item.get("ETag"), "type": "file"}
        if len(found) > limit:
            raise StorageError(f"{path}: more than {limit} objects under the prefix; name a narrower one", "listing")
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return found
        request["ContinuationToken"] = token


_EVENTS_PART = re.compile(r"^events_(\d+)_")
_MAX_DEPTH = 8  # as deep as the event-log reader goes (``spark_state_observer.offline.eventlog.MAX_DEPTH``)
MAX_NOTES = 20  # skipped keys named; the rest counted


def event_log_keys(relative: list[str]) -> set[str]:
    """The keys an event-log reader opens (``spark_state_observer.offline.eventlog.expand``): no dot names, no
    ``appstatus`` markers, in a folder of rolling parts only its ``events_<n>_`` parts, at most 8 folders deep."""
    folders: dict[str, list[str]] = {}
    for key in relative:
        folder, _, name = key.strip("/").rpartition("/")
        parts = key.strip("/").split("/")
        if len(parts) > _MAX_DEPTH or any(p.startswith((".", "appstatus")) for p in parts):
            continue
        folders.setdefault(folder, []).append(name)
    wanted: set[str] = set()
    for folder, names in folders.items():
        rolling = [n for n in names if _EVENTS_PART.match(n)]
        wanted |= {f"{folder}/{n}" if folder else n for n in (rolling or names)}
    return wanted


def copy_tree(url: str, into: str, event_logs_only: bool = False, notes: list[str] | None = None) -> str:
    """Copy the object (or every object under the prefix) at ``url`` into the folder ``into``; return the local path.

    One recursive LIST, one streamed GET per object (``event_logs_only``: the ones ``event_log_keys`` names).
    A key that would land outside ``into`` is skipped; one the local disk refuses (a name too long, a key that
    is also a folder) is skipped and said in ``notes``.
    """
    fs, path = filesystem(url)
    path = path.rstrip("/")
    base = os.path.basename(path) or "root"
    local_root = os.path.join(into, base)
    skipped = 0
    try:
        found = find(fs, path)
        if not found:
            raise FileNotFoundError(path)
        if list(found) == [path] and found[path].get("type") == "file":
            fs.get_file(path, local_root)
            return local_root
        os.makedirs(local_root, exist_ok=True)
        files = {key[len(path) :].strip("/"): key for key, info in found.items() if info.get("type") == "file" and not key.endswith("/")}
        wanted = event_log_keys(list(files)) if event_logs_only else set(files)
        for relative in sorted(wanted):  # folder markers (s3a writes them) are no files
            target = local_name(local_root, relative)
            if target is None:
                continue
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "xb"):  # the local disk takes this name (or says why not) before any GET
                    pass
            except OSError as exc:
                skipped += 1
                if notes is not None and skipped <= MAX_NOTES:
                    notes.append(f"{redact(url)}/{relative[:120]}: skipped, the local disk cannot hold it ({exc.strerror or exc})")
                continue
            fs.get_file(files[relative], target)  # streamed to the file, never whole in memory
    except Exception as exc:
        raise failure(url, exc) from None
    if notes is not None and skipped > MAX_NOTES:
        notes.append(f"{redact(url)}: {skipped - MAX_NOTES} more objects skipped")
    return local_root


@contextmanager
def staged(location: str, event_logs_only: bool = False, notes: list[str] | None = None) -> Iterator[str]:
    """A local path with the contents of ``location``: itself for a local path, a temporary copy for a URL."""
    if not is_url(location) or location.lower().startswith("file://"):
        yield location[len("file://") :] if location.lower().startswith("file://") else location
        return
    with tempfile.TemporaryDirectory(prefix="sso-store-") as tmp:
        yield copy_tree(location, tmp, event_logs_only, notes)


@contextmanager
def staged_all(locations: list[str], notes: list[str] | None = None) -> Iterator[tuple[list[str], Callable[[str], str]]]:
    """Local paths for ``locations`` (see ``staged``; only the objects an event-log reader opens) and a function
    that puts the URLs back into messages. Keys skipped are said in ``notes``."""
    with ExitStack() as stack:
        pairs = [(stack.enter_context(staged(location, True, notes)), location) for location in locations]

        def original(text: str) -> str:
            for local, location in pairs:
                if local != location:
                    text = text.replace(local, redact(location.rstrip("/")))
            return text

        yield [local for local, _ in pairs], original
