"""Classify a query's terminating exception into the few causes an on-call engineer acts on differently."""

from __future__ import annotations

import re

# (class, substrings of Spark error classes or messages); first match wins, so order matters
_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # the state in the checkpoint does not fit the query any more (schema or operators changed)
    ("state_schema_incompatible", ("STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE", "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
                                   "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
                                   "StateSchemaNotCompatible", "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION", "schema is not compatible")),
    ("out_of_memory", ("OutOfMemoryError", "Java heap space", "exceeding memory limits", "Container killed", "GC overhead limit")),
    ("checkpoint", ("CANNOT_LOAD_STATE_STORE", "CANNOT_READ_STREAMING_STATE_FILE", "CANNOT_READ_CHECKPOINT", "STREAMING_CHECKPOINT",
                    "checkpoint", "Checkpoint", "FileNotFoundException", "ChecksumException", "does not exist")),
    ("source_sink", ("kafka", "Kafka", "DATA_SOURCE", "SINK", "Sink", "offset", "Offset", "Source")),
)
CLASSES = tuple(name for name, _ in _RULES) + ("other",)


_EXCEPTION_LINE = re.compile(r"^\s*(Caused by: )?[\w.$]+(Exception|Error|Failed)\b")


def classify_exception(error_class: str | None, message: str | None) -> str:
    """One of ``CLASSES`` for a termination; ``error_class`` (Spark 3.5+) is checked before the message.

    Only the exception lines of the message count (its first line, ``Caused by:`` lines and lines that
    name an exception): Spark appends the query's plan, whose ``checkpointLocation=`` and source names
    would otherwise match every rule.
    """
    lines = (message or "").splitlines()
    relevant = [line for i, line in enumerate(lines) if i == 0 or _EXCEPTION_LINE.match(line)]
    for text in [error_class or ""] + relevant:
        if not text:
            continue
        for name, needles in _RULES:
            if any(n in text for n in needles):
                return name
    return "other"
