"""The one line of a failure worth reading first.

The signals extract it themselves (``spark_state_observer.signals.classify.root_cause``: the ``root_cause``
attribute of ``query_terminated`` events, next to ``exception_class`` and ``message``) and the history
keeps it; :func:`root_cause` shows that line as the signals wrote it. Histories written before the
signals had it carry only the exception text: for them, and only then, :func:`from_text` picks the
best line of that text.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

TRACEBACK_HEADER = "Traceback (most recent call last):"
# "RuntimeError: ...", "pyspark.errors.exceptions.captured.StreamingQueryException: ..." (a Python error line)
_PY_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure))(?::\s*(.*))?$")
_CAUSED_BY = re.compile(r"^\s*Caused by:\s*(.+)$")
_NOISE = (TRACEBACK_HEADER, "at ", "...", 'File "', "^", "~")
MAX_CHARS = 300


_PACKAGE = re.compile(r"^(?:[a-z_][\w]*\.)+(?=[A-Z]\w*(?:Error|Exception)\b)")


def _clean(line: str) -> str:
    """One line, its exception class without the package (``org.apache.spark.SparkRuntimeException`` reads
    ``SparkRuntimeException``), at most MAX_CHARS."""
    line = _PACKAGE.sub("", line.strip())
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1] + "…"


def from_text(text: str | None) -> str | None:
    """The root-cause line of an exception text: the last ``SomeError: ...`` line of a Python traceback
    (the user's own error inside py4j and PythonException wrappers), else the innermost ``Caused by:``
    of a JVM trace, else the first line that is not a traceback header."""
    if not text or not text.strip():
        return None
    lines = [line.rstrip() for line in text.splitlines()]
    if any(TRACEBACK_HEADER in line for line in lines):
        python_errors = [line.strip() for line in lines if _PY_ERROR.match(line.strip()) and not line.startswith((" ", "\t"))]
        if python_errors:
            return _clean(python_errors[-1])
    causes = [m.group(1) for m in (_CAUSED_BY.match(line) for line in lines) if m]
    if causes:
        return _clean(causes[-1])
    for line in lines:
        stripped = line.strip()
        if stripped and not stripped.startswith(_NOISE):
            return _clean(stripped.replace(TRACEBACK_HEADER, "").strip() or stripped)
    return None


def _bounded(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1] + "…"


def root_cause(attributes: Mapping[str, Any] | None, exception_text: str | None = None) -> str | None:
    """The signals' ``root_cause`` as they wrote it (one line, at most MAX_CHARS) when the event has one,
    else the best line of the stored text, else the event's ``message`` (never a bare traceback header)."""
    attributes = attributes or {}
    given = attributes.get("root_cause")
    if isinstance(given, str) and given.strip() and given.strip() != TRACEBACK_HEADER:
        return _bounded(given)
    picked = from_text(exception_text)
    if picked:
        return picked
    message = attributes.get("message")
    return from_text(message) if isinstance(message, str) else None
