"""The model's boundary against hostile input: clean strings, sane numbers and times, JSON of bounded cost.

Every string the model hands on ends up somewhere strict: a Prometheus label (UTF-8), an OTLP protobuf
string, a SQLite row. A lone surrogate (``"\\ud800"`` is valid JSON) or an unpaired UTF-8 byte that
py4j passed through breaks each of them later, far from the cause, and for every event at once (a
scrape renders all queries). So strings are cleaned once, here, where the event is built. Likewise a
number is a finite float or nothing, a time is a time a datetime can hold, and JSON text is refused
before parsing when it would expand into more Python objects than any real Spark event has.

Every JSON read of the package goes through ``loads`` or ``Decoder`` here, whatever it reads (event lines,
plans, checkpoint metadata and commits, lineage headers, REST answers): ``tests/unit/test_hostile_readers.py``
fails on a raw ``json.loads`` or msgspec decoder elsewhere.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Generic, TypeVar

import msgspec

T = TypeVar("T")

REPLACEMENT = "\ufffd"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_UNENCODABLE = re.compile(r"[\ud800-\udfff]")
# epoch seconds a datetime (and every consumer) can hold: years 1 to 9999
MIN_EPOCH_SECONDS = -62135596800.0
MAX_EPOCH_SECONDS = 253402300799.0
# JSON items (containers, members, elements) one event may have: a progress event of 5,000 partitions
# x 4 stores of instance metrics has ~40,000; each item costs ~60-80 bytes once parsed
MAX_JSON_ITEMS = 1_000_000


class JsonTooLarge(msgspec.DecodeError):
    """JSON text whose parsed form would be far larger than any real event's.

    A ``ValueError`` (as ``json.loads``'s errors are) and a ``msgspec.DecodeError`` (as a typed decode's are), so
    every reader's existing ``except`` for bad JSON counts it too."""


def clean_text(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters, with code points UTF-8 cannot encode (lone surrogates) replaced."""
    text = value[:limit]
    if text.isascii():  # the common case, checked at C speed
        return text
    return _UNENCODABLE.sub(REPLACEMENT, text)


def clean_label(value: str, limit: int) -> str:
    """``clean_text`` for a label value: control characters (NUL, escapes) replaced too; newlines and tabs kept."""
    text = value[:limit]
    if text.isascii() and text.isprintable():  # the common case, checked at C speed
        return text
    return _CONTROL.sub(REPLACEMENT, _UNENCODABLE.sub(REPLACEMENT, text))


def clean_stored(value: str) -> str:
    """``value`` as a database text column can hold it: lone surrogates (SQLite's and PostgreSQL's drivers
    refuse them) and NUL (PostgreSQL's text refuses it) replaced; other characters, newlines included, kept.

    Not bounded: the history keeps what the model already bounded (exception texts, raw progress)."""
    if value.isascii() and "\x00" not in value:  # the common case, checked at C speed
        return value
    return _UNENCODABLE.sub(REPLACEMENT, value).replace("\x00", REPLACEMENT)


MAX_IDENTITY_CHARS = 200


def clean_identity(value: object, limit: int = MAX_IDENTITY_CHARS) -> str:
    """An identity string (application name, id, attempt, log file name, label value) as labels may carry it.

    Identity comes from the data (an event's fields, a file's name decoded with surrogate escapes) and ends
    on every series of its application and in the history: one lone surrogate, NUL or escape character made
    every scrape of a fleet fail, and a 5 MB name was copied into every label set. So it is cut to ``limit``
    characters *before* anything else is done with it, then cleaned as ``clean_label`` cleans event strings;
    anything but a string or a number (a list, an object, a bool, null) is no identity: "".
    """
    if isinstance(value, str):
        return clean_label(value, limit)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return clean_label(str(value), limit)
        except ValueError:  # an int beyond Python's digit limit for str()
            return ""
    return ""


def finite(value: Any) -> float | None:
    """A JSON number as a finite float; None for anything else (bool, NaN, infinities, ints beyond a double)."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int:
        try:
            return float(value)
        except OverflowError:  # more than ~308 digits
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def epoch_seconds(value: float | None) -> float | None:
    """``value`` if it is a time a datetime can hold (years 1 to 9999), else None."""
    if value is None or not MIN_EPOCH_SECONDS <= value <= MAX_EPOCH_SECONDS:
        return None
    return value


def json_items(text: str | bytes | bytearray) -> int:
    """An upper bound on the JSON items ``text`` would parse into: containers plus separators.

    Four C-speed scans; strings that contain separators make it larger, never smaller.
    """
    if isinstance(text, str):
        return text.count("{") + text.count("[") + text.count(",") + text.count(":")
    return text.count(b"{") + text.count(b"[") + text.count(b",") + text.count(b":")


def check_items(text: str | bytes | bytearray | memoryview, max_items: int = MAX_JSON_ITEMS) -> None:
    """Raise ``JsonTooLarge`` when ``text`` could parse into more than ``max_items`` items.

    Every item takes at least one character, so text no longer than ``max_items`` is not even counted."""
    if len(text) <= max_items:
        return
    items = json_items(bytes(text) if isinstance(text, memoryview) else text)
    if items > max_items:
        raise JsonTooLarge(f"JSON with ~{items:,} items (more than {max_items:,}) refused before parsing")


def loads(text: str | bytes | bytearray, max_items: int = MAX_JSON_ITEMS) -> Any:
    """``json.loads``, refusing text whose parsed form would be out of proportion to any real event.

    A 32 MB line of ``[{},{},...]`` is 11 million dicts (~900 MB); this refuses it after counting.
    Raises ``JsonTooLarge``, ``ValueError`` (not JSON) or ``RecursionError`` (nested too deep).
    """
    check_items(text, max_items)
    return json.loads(text)


class Decoder(Generic[T]):
    """``msgspec.json.Decoder(kind)`` that refuses, as ``loads`` does, text of more than ``max_items`` items.

    A typed decode skips the fields it does not read, but builds whatever a field typed ``Any`` (or a list
    of structs) holds: a 30 MB ``[{},{},...]`` there is ten million objects. Raises ``JsonTooLarge`` (a
    ``msgspec.DecodeError``) before decoding such text.

    ``marker``: for a list of structs that each require that key (``b'"taskId"'``) and hold scalars only, what
    the decode builds is one struct per marker, whatever else the text holds (the decode skips it unbuilt):
    the markers are counted against ``max_items`` instead of every item."""

    __slots__ = ("_decoder", "marker", "max_items")

    def __init__(self, kind: type[T], max_items: int = MAX_JSON_ITEMS, marker: bytes | None = None) -> None:
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(kind)
        self.max_items = max_items
        self.marker = marker

    def decode(self, data: bytes | bytearray | memoryview | str) -> T:
        if self.marker is None:
            check_items(data, self.max_items)
        else:
            text = bytes(data) if isinstance(data, memoryview) else data
            found = text.count(self.marker.decode()) if isinstance(text, str) else text.count(self.marker)
            if found > self.max_items:
                raise JsonTooLarge(f"JSON with {found:,} structs (more than {self.max_items:,}) refused before parsing")
        return self._decoder.decode(data)


def stored_json(text: Any, default: Any) -> Any:
    """The value of a JSON text stored in a history (a batch's progress, a signal's attributes), or ``default``
    when it is not text, not JSON, nested too deep or out of proportion: a history is shared, and a row written
    by hand or by another tool costs its own value, never the page or the command that reads it."""
    if not isinstance(text, (str, bytes, bytearray)) or not text:
        return default
    try:
        return loads(text)
    except (ValueError, RecursionError):
        return default
