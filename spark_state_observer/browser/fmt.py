"""Numbers and times as an on-call engineer reads them: one time language (24-hour UTC, said once on
the page), automatic units, thousands separators, short ids; and text from the history made inert.

Streamlit renders markdown in nearly every text it shows (captions, headers, alerts, widget labels): a
query name, an exception or an executor id from a job is data, and ``md``/``code`` make sure it shows
literally, never as a link, an image, HTML or markup. Every page puts data through them."""

from __future__ import annotations

import datetime as dt
import re
import string
from typing import Any

from spark_state_observer.model import signal_kinds as k

TIME_NOTE = "All times are UTC, 24-hour clock."
KIND_LABELS = {
    k.QUERY_STARTED: "start",
    k.QUERY_RESTARTED: "restart",
    k.QUERY_TERMINATED: "stop / failure",
    k.CRASH_LOOP: "crash loop",
    k.RESTORE: "restore",
    k.STORE_RELOAD: "state reload",
    k.STALLED: "stalled",
    k.STALL_RECOVERED: "stall over",
    k.QUERY_LOST: "driver lost",
    k.EXECUTOR_ADDED: "executor added",
    k.EXECUTOR_REMOVED: "executor lost",
    k.QUERY_IDLE: "idle",
    k.PARTITIONS_CHANGED: "partitions changed",
    k.STATE_UNBOUNDED: "state unbounded",
    k.STATE_BOUNDED: "state bounded",
    k.FALLING_BEHIND: "falling behind",
    k.CAUGHT_UP: "caught up",
    k.LOAD_LATENCY_ANOMALY: "slow state load",
    k.STATE_TASK_RETRY: "state task retried",
    k.PARTITION_MIGRATED: "partitions moved",
    k.KAFKA_LAG_GROWING: "Kafka lag growing",
    k.KAFKA_PARTITION_STUCK: "Kafka partition stuck",
    k.KAFKA_PARTITION_RECOVERED: "Kafka partition reads again",
    k.KAFKA_PARTITIONS_ADDED: "Kafka partitions added",
    k.KAFKA_OFFSETS_REWOUND: "Kafka offsets went back",
    k.KAFKA_OFFSETS_SKIPPED: "Kafka offsets skipped",
    k.KAFKA_LATEST_WENT_BACK: "Kafka topic truncated or recreated",
    k.KAFKA_CATCH_UP_FORECAST: "Kafka catch-up forecast",
    k.KAFKA_CAUGHT_UP: "Kafka backlog read",
    k.ROCKSDB_MEMORY_IMPLAUSIBLE: "RocksDB memory report implausible",
    k.SNAPSHOT_LAGGING: "State snapshots lagging",
    k.STATE_SKEWED: "State skewed by key",
    k.LATE_ROWS_DROPPED: "Late rows dropped by the watermark",
    k.LATE_ROWS_STOPPED: "Late rows no longer dropped",
    k.RESTORE_STARTED: "State restore started",
    k.RESTORE_PROGRESS: "State restore progress",
    k.RESTORE_FINISHED: "State restore finished",
}
"""Signal kinds in plain words (every kind of ``spark_state_observer.model.signal_kinds.SIGNAL_KINDS``)."""


def missing(value: Any) -> bool:
    """None, NaN and pandas' NA all read as 'no value'."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN and NA are not equal to themselves
    except (TypeError, ValueError):
        return False


def when(ts: float | None, date: bool = True) -> str:
    """``2026-11-22 22:31:30`` (UTC; the page says so once), or ``-``."""
    if missing(ts):
        return "-"
    stamp = dt.datetime.fromtimestamp(float(ts), dt.timezone.utc)  # type: ignore[arg-type]
    return stamp.strftime("%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S")


def clock(ts: float | None) -> str:
    """Just the time of day, for sentences about one incident (``22:31:30``)."""
    return when(ts, date=False)


def duration(seconds: float | None) -> str:
    """Seconds in the unit a person would use: 350 ms, 6.4 s, 2 min 5 s, 3.5 h, 2.1 d."""
    if missing(seconds):
        return "-"
    s = float(seconds)  # type: ignore[arg-type]
    if abs(s) < 1:
        return f"{s * 1000:.0f} ms"
    if abs(s) < 60:
        return f"{s:.1f} s"
    if abs(s) < 3600:
        minutes, rest = divmod(round(s), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    if abs(s) < 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def size(n: float | None) -> str:
    """Bytes with a binary unit: 9.5 MB, 812 B, or ``-``."""
    if n is None or missing(n):
        return "-"
    for unit, scale in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def number(n: float | None, decimals: int = 0) -> str:
    """Thousands separators; whole numbers without ``.0`` (7191.0 is 7,191)."""
    if missing(n):
        return "-"
    value = float(n)  # type: ignore[arg-type]
    if decimals == 0 or value.is_integer():
        return f"{value:,.0f}"
    return f"{value:,.{decimals}f}"


def compact(n: float | None) -> str:
    """A count short enough for a metric tile: 59,200; 1.2 M; 3.4 G."""
    if missing(n):
        return "-"
    value = float(n)  # type: ignore[arg-type]
    for unit, scale in (("G", 1e9), ("M", 1e6)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return number(value)


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 query``, ``2 queries``."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def short_id(full: str | None) -> str:
    return "-" if not full else str(full)[:8]


_MD_ESCAPE = re.compile("([" + re.escape(string.punctuation) + "])")
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def one_line(text: Any) -> str:
    """``text`` as a string on one line: line breaks and control characters become a space."""
    return _BREAKS.sub(" ", str(text))


# what Streamlit's markdown (remark-gfm, its icon and emoji plugins) turns into links or icons in plain text,
# whatever its escapes: URLs, www. names, e-mail addresses, :shortcodes:. Shown as code spans instead. An address
# is tried only where its run of name characters begins (a match, if any, starts there): tried at each of them, a
# 20 KB word took 1.5 s of CPU.
_LINKED = re.compile(r"(?i)(?:https?://|www(?=\.))\S*|(?<![-.\w+])[-.\w+]+@[-\w]+(?:\.[-\w]+)+|:[a-zA-Z][\w/+-]*:")


def md(text: Any) -> str:
    """``text`` for markdown, shown literally: every ASCII punctuation character backslash-escaped (so no
    link, image, emphasis, HTML tag, entity, math or Streamlit directive can start), URLs, e-mail addresses
    and shortcodes as code spans (Streamlit links those in plain text despite escapes), line breaks
    flattened and the ends trimmed (no new block, indented code included, can start)."""
    flat = one_line(text).strip()
    parts, start = [], 0
    for m in _LINKED.finditer(flat):
        parts += [_MD_ESCAPE.sub(r"\\\1", flat[start : m.start()]), code(m.group())]
        start = m.end()
    parts.append(_MD_ESCAPE.sub(r"\\\1", flat[start:]))
    return "".join(parts)


def code(text: Any) -> str:
    """``text`` as an inline code span, shown literally: fenced with more backticks than any run in it."""
    flat = one_line(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", flat)), default=0) + 1)
    return f"{fence} {flat} {fence}"


def kind(name: str) -> str:
    """An event kind in plain words (``store_reload`` is 'state reload')."""
    return KIND_LABELS.get(name, name.replace("_", " "))


def attrs(attributes: dict[str, Any]) -> str:
    """An event's attributes on one line in plain words, Nones left out, seconds and bytes with units."""
    parts = []
    for key, value in attributes.items():
        if missing(value) or (key in ("outcome",) and value == "clean"):
            continue
        label = key.replace("_", " ")
        if key.endswith("_seconds") and isinstance(value, (int, float)):
            parts.append(f"{label.removesuffix(' seconds')} {duration(value)}")
        elif key.endswith("_bytes") and isinstance(value, (int, float)):
            parts.append(f"{label.removesuffix(' bytes')} {size(value)}")
        elif isinstance(value, float):
            parts.append(f"{label} {number(value, 2)}")
        else:
            parts.append(f"{label} {value}")
    return ", ".join(parts)
