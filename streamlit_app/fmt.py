"""Numbers and times as an on-call engineer reads them: short, with units, UTC."""

from __future__ import annotations

import datetime as dt
import math


def when(ts: float | None) -> str:
    if ts is None or (isinstance(ts, float) and math.isnan(ts)):
        return "-"
    return dt.datetime.fromtimestamp(float(ts), dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit} ago"
    return f"{seconds:.0f} s ago"


def size(n: float | None) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def attrs(attributes: dict) -> str:
    """An event's attributes on one line, Nones left out."""
    return ", ".join(f"{k}={v}" for k, v in attributes.items() if v is not None)
