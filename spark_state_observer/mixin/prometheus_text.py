"""Text as Prometheus reads and writes it: durations (``for``, ``eval_time``, intervals) and the templates of
alert annotations (``{{ $labels.x }}``, ``{{ $value | humanize }}``).

The mixin writes rules and their promtool tests, the backtest reads rules back and writes promtool tests
of its own: both must agree with Prometheus, so both use this one module rather than two grammars and two
renderers that drift apart (a ``for: 1.5m`` the backtest accepted and Prometheus refused; an ``eval_time:
2.5m`` promtool refused; a ``$value`` rendered ``0.123457`` where Prometheus shows ``0.123456789``).
It sits in the mixin, which the offline tools may import; it imports nothing of the project.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

# --- durations: Prometheus' grammar (common/model ParseDuration and Duration.String) ---------------------
# units once each, largest first; no fractions; "0" alone is zero
DURATION = re.compile(r"(?:([0-9]+)y)?(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?(?:([0-9]+)ms)?")
DURATION_UNITS = (("y", 31536000000), ("w", 604800000), ("d", 86400000), ("h", 3600000), ("m", 60000), ("s", 1000), ("ms", 1))
MAX_DURATION_MS = (2**63 - 1) // 1_000_000  # a Go time.Duration, as Prometheus stores it


class DurationError(ValueError):
    """Text Prometheus would refuse as a duration; the message says why (the caller names where it was)."""


def parse_duration(text: str) -> float:
    """Seconds of a Prometheus duration such as ``1h30m`` or ``0s``; a ``DurationError`` for text Prometheus
    refuses (units out of order or repeated, fractions, spaces, longer than its ~292 years)."""
    if text == "0":
        return 0.0
    m = DURATION.fullmatch(text)
    if m is None or not text:
        raise DurationError("not a Prometheus duration such as 10m or 1h30m (units y w d h m s ms, largest first)")
    total_ms = sum(int(n) * unit for n, (_, unit) in zip(m.groups(), DURATION_UNITS) if n)
    if total_ms > MAX_DURATION_MS:
        raise DurationError("longer than Prometheus' longest duration (about 292 years)")
    return total_ms / 1000


def format_duration(seconds: float) -> str:
    """``seconds`` as Prometheus writes a duration (``1h2m30s``, ``500ms``, ``0s``), rounded to the
    millisecond: the only form promtool and the rule loader read back (``2.5m`` is refused)."""
    total_ms = round(seconds * 1000)
    if total_ms < 0 or total_ms > MAX_DURATION_MS:
        raise DurationError(f"{seconds!r} s cannot be written as a Prometheus duration")
    if total_ms == 0:
        return "0s"
    parts = []
    for unit, size in DURATION_UNITS:
        count, total_ms = divmod(total_ms, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


# --- alert templates: Prometheus' template functions (promql/template) -----------------------------------
def _go_g4(v: float) -> str:
    return f"{v:.4g}"


def humanize(v: float) -> str:
    """``humanize``: SI prefixes (k, M, ... and m, u, ...) with four significant digits."""
    if v == 0 or math.isnan(v) or math.isinf(v):
        return _go_g4(v)
    prefix = ""
    if abs(v) >= 1:
        for p in ("k", "M", "G", "T", "P", "E", "Z", "Y"):
            if abs(v) < 1000:
                break
            prefix, v = p, v / 1000
        return _go_g4(v) + prefix
    for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(v) >= 1:
            break
        prefix, v = p, v * 1000
    return _go_g4(v) + prefix


def humanize1024(v: float) -> str:
    """``humanize1024``: binary prefixes (ki, Mi, ...)."""
    if abs(v) <= 1 or math.isnan(v) or math.isinf(v):
        return _go_g4(v)
    prefix = ""
    for p in ("ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"):
        if abs(v) < 1024:
            break
        prefix, v = p, v / 1024
    return _go_g4(v) + prefix


def humanize_duration(v: float) -> str:
    """``humanizeDuration``: ``1d 2h 3m 4s`` from a second up, ``12.5ms`` below."""
    if math.isnan(v) or math.isinf(v):
        return _go_g4(v)
    if v == 0:
        return _go_g4(v) + "s"
    if abs(v) >= 1:
        sign = "-" if v < 0 else ""
        v = abs(v)
        s = int(v)
        seconds, minutes, hours, days = s % 60, (s // 60) % 60, (s // 3600) % 24, s // 86400
        if days:
            return f"{sign}{days}d {hours}h {minutes}m {seconds}s"
        if hours:
            return f"{sign}{hours}h {minutes}m {seconds}s"
        if minutes:
            return f"{sign}{minutes}m {seconds}s"
        return f"{sign}{_go_g4(v)}s"
    prefix = ""
    for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(v) >= 1:
            break
        prefix, v = p, v * 1000
    return f"{_go_g4(v)}{prefix}s"


def humanize_percentage(v: float) -> str:
    """``humanizePercentage``: a ratio as a percentage."""
    return _go_g4(v * 100) + "%"


def go_value(v: float) -> str:
    """``{{ $value }}`` as Go prints a float64 (shortest digits; exponent form from 1e21)."""
    if math.isfinite(v) and v == int(v) and abs(v) < 1e21:
        return str(int(v))
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


TEMPLATE_FUNCTIONS: dict[str, Callable[[float], str]] = {
    "humanize": humanize,
    "humanize1024": humanize1024,
    "humanizeDuration": humanize_duration,
    "humanizePercentage": humanize_percentage,
}
# {{ $labels.name }} or {{ $value }}, optionally piped to one function; spaces as Go's template lexer allows
TEMPLATE = re.compile(r"{{\s*\$(?:labels\.([a-zA-Z_][a-zA-Z0-9_]*)|(value))(?:\s*\|\s*(\w+))?\s*}}")
# {{ with $labels.name }}...{{ . }}...{{ end }}: the text only when the label is set (no nesting, as the rules use it)
WITH_LABEL = re.compile(r"{{\s*with\s+\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)\s*}}(.*?){{\s*end\s*}}", re.S)
DOT = re.compile(r"{{\s*\.\s*}}")


def render_template(text: str, labels: Mapping[str, str], value: float | None) -> str:
    """An annotation as Prometheus renders it for an alert with these labels and value: ``$labels.x``
    (empty when absent, as Go's map lookup), ``$value`` raw or through a function above. Template code
    outside that (a function this module does not know, ``range``, ``query``) is left as written, and so
    is ``$value`` when no value is known."""

    def one(m: re.Match[str]) -> str:
        if m.group(1):
            return labels.get(m.group(1), "")
        function = m.group(3)
        if value is None or (function and function not in TEMPLATE_FUNCTIONS):
            return m.group(0)
        return TEMPLATE_FUNCTIONS[function](value) if function else go_value(value)

    out, at = [], 0  # each part rendered once: a label's value is never read as template code
    for m in WITH_LABEL.finditer(text):
        out.append(TEMPLATE.sub(one, text[at : m.start()]))
        found = labels.get(m.group(1), "")
        if found:
            out.append(found.join(DOT.split(TEMPLATE.sub(one, m.group(2)))))
        at = m.end()
    out.append(TEMPLATE.sub(one, text[at:]))
    return "".join(out)
