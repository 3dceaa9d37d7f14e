"""Where the history lives: a plain path or ``sqlite:///path`` (the embedded file) or a PostgreSQL URL.

One string names the history everywhere (the ``history_path`` setting, ``--history`` of replay,
inspect and the browser), so the choice of backend is made here once. ``redact`` is the only form of a
URL that may reach a log line or an error message: a password never does.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

POSTGRES_SCHEMES = ("postgresql", "postgres")
_SECRET_PARAMS = ("password", "passfile", "sslpassword")


class HistoryURLError(ValueError):
    """The history location cannot be understood; the message shows it redacted."""


@dataclass(frozen=True)
class HistoryTarget:
    """A parsed history location: ``kind`` is "sqlite" (``location`` a file path) or "postgresql" (a URL)."""

    kind: str
    location: str

    @property
    def display(self) -> str:
        """How to show this location to a person: file paths as given, URLs without their password."""
        return redact(self.location)


_UNSHOWABLE = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")  # bytes that were not UTF-8, as Python decodes a command line


def shown(text: str) -> str:
    """``text`` with control characters and lone surrogates as escapes (``\\x00``): safe in a message or a log line."""
    return _UNSHOWABLE.sub(lambda m: repr(m.group())[1:-1], text)


def _said(text: str) -> str:
    """How a location is quoted in a message: a PostgreSQL URL without its password, every location escaped."""
    return shown(redact(text) if text.lower().startswith(POSTGRES_SCHEMES) else text)


def parse(value: str) -> HistoryTarget:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db`` (SQLAlchemy's convention), a plain path,
    or ``postgresql://user[:password]@host[:port]/database[?param=value]`` (``postgres://`` too).

    A location no file system or server can take (a NUL byte, raw or as ``%00``; text that is not UTF-8)
    is refused here with a message, rather than failing later, deep in a driver."""
    text = value.strip()
    if "\x00" in text or ("%00" in text and "://" in text):  # a plain path is not %-decoded
        raise HistoryURLError(f"{_said(text)}: the history location holds a NUL byte (or %00), which no path or URL may hold")
    if _SURROGATES.search(text):
        raise HistoryURLError(f"{_said(text)}: the history location is not UTF-8 text")
    scheme, sep, rest = text.partition("://")
    if not sep or "/" in scheme or "\\" in scheme:
        if not text:
            raise HistoryURLError("the history location is empty; give a file path, sqlite:///path or postgresql://user@host/db")
        return HistoryTarget("sqlite", text)
    scheme = scheme.lower()
    if scheme == "sqlite":
        path = rest.removeprefix("/")  # sqlite:///x.db -> x.db, sqlite:////tmp/x.db -> /tmp/x.db
        path = path.split("?", 1)[0]
        if not path:
            raise HistoryURLError(f"{shown(text)}: sqlite URL without a file path (sqlite:///relative.db or sqlite:////absolute.db)")
        try:
            return HistoryTarget("sqlite", urllib.parse.unquote(path, errors="strict"))
        except UnicodeDecodeError:
            raise HistoryURLError(f"{shown(text)}: the file path's %-escapes are not UTF-8") from None
    if scheme in POSTGRES_SCHEMES:
        try:
            parts = urllib.parse.urlsplit(text)
        except ValueError as exc:  # an unclosed [IPv6] host
            raise HistoryURLError(f"{shown(redact(text))}: not a URL ({exc})") from None
        try:
            parts.port  # noqa: B018  (raises on a non-numeric port)
        except ValueError:
            raise HistoryURLError(f"{shown(redact(text))}: the port is not a number") from None
        if not parts.hostname and "host=" not in parts.query:
            raise HistoryURLError(f"{shown(redact(text))}: a PostgreSQL URL needs a host (postgresql://user@host:5432/database)")
        if not parts.path.strip("/"):
            raise HistoryURLError(f"{shown(redact(text))}: a PostgreSQL URL needs a database name (postgresql://user@host:5432/database)")
        return HistoryTarget("postgresql", "postgresql://" + text.split("://", 1)[1])
    raise HistoryURLError(
        f"{shown(redact(text))}: unknown history scheme {shown(scheme)!r}; use a file path, sqlite:///path or postgresql://user@host/db"
    )


def redact(value: str) -> str:
    """``value`` with any password (in the authority or as a query parameter) replaced by ``***``."""
    if "://" not in value:
        return value
    try:
        parts = urllib.parse.urlsplit(value)
    except ValueError:
        return re.sub(r"//[^@/]*@", "//***@", value)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{host}"
    query = "&".join(
        f"{k}=***" if k.lower() in _SECRET_PARAMS else f"{k}={v}" if v != "" else k
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def secrets_of(value: str) -> list[str]:
    """The passwords in ``value`` (to scrub from driver messages that might echo them)."""
    if "://" not in value:
        return []
    parts = urllib.parse.urlsplit(value)
    found = [urllib.parse.unquote(parts.password)] if parts.password else []
    found += [v for k, v in urllib.parse.parse_qsl(parts.query) if k.lower() in _SECRET_PARAMS and v]
    return [s for s in found if s]


def scrub(message: str, value: str) -> str:
    """``message`` with every password of ``value`` (and the URL itself) replaced by its redacted form."""
    message = message.replace(value, redact(value))
    for secret in secrets_of(value):
        message = message.replace(secret, "***")
    return message
