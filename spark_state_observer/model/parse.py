"""Parse captured listener events into the model (``spark_state_observer.model.events``), the same across Spark 3.5 to 4.3.

Spark's JSON differs between versions only in which keys appear (``customMetrics`` grew from 26 to 36
RocksDB metrics, instance metrics arrived in 4.1, ``jobTags`` in 4.1). Parsing is strict about what
identifies an event (query id, run id, batch id) and lenient about everything else: a value of the wrong
type becomes ``None`` and is listed in ``problems``, so one odd field never costs the whole event.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Mapping

from spark_state_observer.model import decode, kinds
from spark_state_observer.model.bounded import clean_label, clean_text, epoch_seconds, finite, loads
from spark_state_observer.model.events import (
    Event,
    InstanceMetric,
    OperatorProgress,
    QueryIdle,
    QueryProgress,
    QueryStarted,
    QueryTerminated,
    SinkProgress,
    SourceProgress,
)
from spark_state_observer.model.fields import CUSTOM_METRICS, OPERATOR_FIELDS, OPERATOR_NAME
from spark_state_observer.model.phases import TRIGGER_EXECUTION

INSTANCE_METRIC_RE = re.compile(r"^(?P<prefix>[A-Za-z]+)\.partition_(?P<partition>\d+)_(?P<store>.+)$")
MAX_OPERATORS = 64
MAX_SOURCES = 64
MAX_MAP_ENTRIES = 256
MAX_LONG = 2**63 - 1  # Spark's batch ids are longs; SQLite's integers are too
MAX_INSTANCE_METRICS = 20_000  # per-partition metrics: 4 stores x 5,000 partitions; the exporter keeps top-K


class MalformedEvent(ValueError):
    """The event cannot be used: not JSON, not an object, or without the fields that identify it."""


def parse_event(kind: str, payload: str | bytes | Mapping[str, Any]) -> Event:
    """Turn one captured event (its JSON text or decoded object) into the model.

    ``kind`` is one of ``spark_state_observer.model.kinds.EVENT_KINDS``. Raises ``MalformedEvent`` with a message that says what is wrong.
    """
    if kind == kinds.PROGRESS:  # the common case, decoded fast when nothing in it needs this module's care
        fast = decode.progress(payload, _FAST_RULES)
        if fast is not None:
            return fast
    obj = _load(payload)
    if kind == kinds.PROGRESS:
        text = clean_text(payload, len(payload)) if isinstance(payload, str) else None
        return parse_progress(obj, raw_text=text)
    if kind == kinds.STARTED:
        return QueryStarted(
            query_id=_required_str(obj, "id"),
            run_id=_required_str(obj, "runId"),
            name=_opt_label(obj.get("name")),
            timestamp=parse_timestamp(obj.get("timestamp")),
            job_tags=_job_tags(obj.get("jobTags")),
        )
    if kind == kinds.IDLE:
        return QueryIdle(_required_str(obj, "id"), _required_str(obj, "runId"), parse_timestamp(obj.get("timestamp")))
    if kind == kinds.TERMINATED:
        return QueryTerminated(
            query_id=_required_str(obj, "id"),
            run_id=_required_str(obj, "runId"),
            exception=_exception_text(obj.get("exception")),
            error_class=_opt_label(obj.get("errorClassOnException")),
        )
    raise MalformedEvent(f"unknown event kind {kind!r}; expected one of {', '.join(kinds.EVENT_KINDS)}")


def parse_progress(obj: Mapping[str, Any], raw_text: str | None = None) -> QueryProgress:
    """Parse one ``StreamingQueryProgress`` object (``progress.json`` or an event log's ``progress``)."""
    if not isinstance(obj, Mapping):
        raise MalformedEvent(f"progress must be a JSON object, got {type(obj).__name__}")
    problems: list[str] = []
    batch_id = obj.get("batchId")
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or not 0 <= batch_id <= MAX_LONG:
        raise MalformedEvent(f"progress field 'batchId' must be a non-negative integer, got {batch_id!r}")
    operators = []
    raw_ops = obj.get("stateOperators") or []
    if not isinstance(raw_ops, list):
        problems.append("stateOperators is not a list")
        raw_ops = []
    if len(raw_ops) > MAX_OPERATORS:
        problems.append(f"stateOperators truncated from {len(raw_ops)} to {MAX_OPERATORS}")
    for index, op in enumerate(raw_ops[:MAX_OPERATORS]):
        if isinstance(op, Mapping):
            operators.append(_parse_operator(index, op, problems))
        else:
            problems.append(f"stateOperators[{index}] is not an object")
    sources = []
    raw_sources = obj.get("sources") or []
    if not isinstance(raw_sources, list):
        problems.append("sources is not a list")
        raw_sources = []
    for index, src in enumerate(raw_sources[:MAX_SOURCES]):
        if isinstance(src, Mapping):
            sources.append(
                SourceProgress(
                    index=index,
                    description=_label(src.get("description") or "", 200),
                    input_rows=_num(src, "numInputRows", problems),
                    input_rows_per_second=_rate(_num(src, "inputRowsPerSecond", problems)),
                    processed_rows_per_second=_rate(_num(src, "processedRowsPerSecond", problems)),
                    metrics=_num_map(src.get("metrics"), f"sources[{index}].metrics", problems),
                )
            )
    raw_sink = obj.get("sink")
    sink = None
    if isinstance(raw_sink, Mapping):
        sink = SinkProgress(
            description=_label(raw_sink.get("description") or "", 200),
            output_rows=_num(raw_sink, "numOutputRows", problems, sentinel=True),
            metrics=_num_map(raw_sink.get("metrics"), "sink.metrics", problems),
        )
    event_time: dict[str, float] = {}
    raw_et = obj.get("eventTime") or {}
    if isinstance(raw_et, Mapping):
        for key in ("avg", "max", "min", "watermark"):
            if key in raw_et:
                ts = parse_timestamp(raw_et[key])
                if ts is None:
                    problems.append(f"eventTime.{key} is not a timestamp")
                else:
                    event_time[key] = ts
    return QueryProgress(
        query_id=_required_str(obj, "id"),
        run_id=_required_str(obj, "runId"),
        name=_opt_label(obj.get("name")),
        timestamp=parse_timestamp(obj.get("timestamp")),
        batch_id=batch_id,
        # Spark 3.5's JSON has no batchDuration; its trigger execution time is the same span
        batch_duration_ms=_num(obj, "batchDuration", problems)
        if "batchDuration" in obj
        else finite((obj.get("durationMs") or {}).get(TRIGGER_EXECUTION) if isinstance(obj.get("durationMs"), Mapping) else None),
        input_rows=_num(obj, "numInputRows", problems) if "numInputRows" in obj else _sum_sources(raw_sources, "numInputRows"),
        input_rows_per_second=_rate(
            _num(obj, "inputRowsPerSecond", problems) if "inputRowsPerSecond" in obj else _sum_sources(raw_sources, "inputRowsPerSecond")
        ),
        processed_rows_per_second=_rate(
            _num(obj, "processedRowsPerSecond", problems)
            if "processedRowsPerSecond" in obj
            else _sum_sources(raw_sources, "processedRowsPerSecond")
        ),
        duration_ms=_num_map(obj.get("durationMs"), "durationMs", problems),
        event_time=event_time,
        operators=tuple(operators),
        sources=tuple(sources),
        sink=sink,
        problems=tuple(problems),
        raw=obj,
        raw_text=raw_text,
    )


def _parse_operator(index: int, op: Mapping[str, Any], problems: list[str]) -> OperatorProgress:
    custom: dict[str, float] = {}
    instances: list[InstanceMetric] = []
    raw_custom = op.get(CUSTOM_METRICS) or {}
    if not isinstance(raw_custom, Mapping):
        problems.append(f"stateOperators[{index}].customMetrics is not an object")
        raw_custom = {}
    truncated = False
    for n, (key, value) in enumerate(raw_custom.items()):
        if n >= MAX_MAP_ENTRIES + MAX_INSTANCE_METRICS:
            truncated = True
            break
        number = finite(value)
        if number is None:
            problems.append(f"stateOperators[{index}].customMetrics.{_label(key, 80)} is not a finite number")
            continue
        if type(key) is str and ".partition_" not in key and len(key) <= 200:
            if len(custom) < MAX_MAP_ENTRIES:
                custom[clean_label(key, 200)] = number
            else:
                truncated = True
            continue
        match = INSTANCE_METRIC_RE.match(key) if isinstance(key, str) else None
        if match:
            if len(instances) < MAX_INSTANCE_METRICS:
                instances.append(
                    InstanceMetric(
                        prefix=match["prefix"],
                        partition=int(match["partition"][:18]),
                        store=clean_label(match["store"], 100),
                        value=None if number < 0 else number,
                    )
                )
            else:
                truncated = True
        elif len(custom) < MAX_MAP_ENTRIES:
            custom[_label(key, 200)] = number
        else:
            truncated = True
    if truncated:
        problems.append(
            f"stateOperators[{index}].customMetrics truncated to {MAX_MAP_ENTRIES} metrics and {MAX_INSTANCE_METRICS} instance metrics"
        )
    name = op.get(OPERATOR_NAME)
    return OperatorProgress(
        index=index,
        name=clean_label(name, 100) if isinstance(name, str) and name else "unknown",
        **{attr: _num(op, key, problems) for key, attr in OPERATOR_FIELDS.items()},
        custom=custom,
        instances=tuple(instances),
    )


def _sum_sources(raw_sources: list[Any], key: str) -> float | None:
    """Spark's definition of the query-level figures, for event logs, whose JSON (Jackson) omits them."""
    values = [finite(s.get(key)) for s in raw_sources if isinstance(s, Mapping)]
    values = [v for v in values if v is not None]
    return finite(sum(values)) if values else None  # two doubles near the maximum sum to infinity


def _rate(value: float | None) -> float | None:
    """Rates as ``progress.json`` gives them: rounded half-up to 0.1 (event logs carry the raw double).

    The same figure as ``_rate_decimal`` (tests/unit/test_decode.py compares them on every recorded rate and on
    edge cases), without a ``Decimal`` or a ``repr`` per rate. The rounding reads the double's shortest decimal
    text d, as ``Decimal(repr(value))`` does. ``x = |value| * 10`` is within ~3e-15 x of ``10 d``, so when x's
    fraction is farther than ``1e-12 x`` from 0, 0.5 and 1, the tenths and the half-up step are x's own. Else
    (ties, values on the 0.1 grid, zero, huge or odd values) the digits of ``repr`` decide, as before. Either way
    the result is ``tenths / 10``, an exactly rounded division of integers: the double nearest the rounded decimal.
    """
    if value is None:
        return None
    x = abs(value) * 10
    if 1e-9 < x < 1e12:
        tenths = int(x)
        fraction = x - tenths
        margin = x * 1e-12
        if margin < fraction < 1 - margin and abs(fraction - 0.5) > margin:
            if fraction > 0.5:
                tenths += 1
            return -(tenths / 10) if value < 0 else tenths / 10
    return _rate_digits(value)


def _rate_digits(value: float) -> float:
    """``_rate`` read from the digits of ``repr(value)``: the tenths as an integer, plus one when the next digit
    is 5 or more (half-up, away from zero)."""
    if abs(value) >= 1e15:  # beyond a double's decimal precision there is nothing to round
        return value
    text = repr(value)
    dot = text.find(".")
    if dot < 0 or "e" in text:  # an int, an exponent (below 1e-4), a NaN: the rare cases, read by the reference
        return _rate_decimal(value)
    if len(text) - dot <= 2:  # one decimal at most: already on the 0.1 grid
        return value
    negative = text[0] == "-"
    tenths = int(text[negative:dot] + text[dot + 1])
    if text[dot + 2] >= "5":
        tenths += 1
    return -(tenths / 10) if negative else tenths / 10


def _rate_decimal(value: float) -> float:
    """The reference rounding of ``_rate``: half-up to 0.1 on the double's shortest decimal text."""
    return float(Decimal(repr(value)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def _load(payload: str | bytes | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(payload, Mapping):
        return payload
    if not isinstance(payload, (str, bytes, bytearray)):
        raise MalformedEvent(f"event payload must be JSON text or an object, got {type(payload).__name__}")
    try:
        obj = loads(payload)
    except (ValueError, RecursionError) as exc:
        text = payload[:60] if isinstance(payload, str) else bytes(payload[:60])
        raise MalformedEvent(f"event is not valid JSON ({exc}); starts with {text!r}") from None
    if not isinstance(obj, Mapping):
        raise MalformedEvent(f"event JSON must be an object, got {type(obj).__name__}")
    return obj


def _required_str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value or len(value) > 200:
        raise MalformedEvent(f"event field {key!r} must be a non-empty string, got {clean_text(repr(value), 80)}")
    return clean_label(value, 200)


# an exception's root cause sits deep in it (a Python traceback inside a JVM wrapper, the innermost
# "Caused by:" near its end): keep its head and tail, bounded, for spark_state_observer.signals.classify
_EXCEPTION_EDGE_CHARS = 32 * 1024


def _exception_text(value: Any) -> str | None:
    """An exception's text, bounded to its first and last ``_EXCEPTION_EDGE_CHARS`` and encodable."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) > 2 * _EXCEPTION_EDGE_CHARS:
        value = value[:_EXCEPTION_EDGE_CHARS] + "\n[...]\n" + value[-_EXCEPTION_EDGE_CHARS:]
    return clean_text(value, len(value))


def _opt_label(value: Any) -> str | None:
    """A string that becomes a label value (a query name): bounded, encodable, no control characters."""
    return clean_label(value, 200) if isinstance(value, str) and value else None


def _label(value: Any, limit: int) -> str:
    """Any JSON value (a description, a map key) as a clean label value."""
    return clean_label(value if isinstance(value, str) else str(value)[:limit], limit)


def _job_tags(value: Any) -> tuple[str, ...]:
    """Spark 4.1's job tags: a list of strings; anything else is no tags."""
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(clean_label(str(t), 200) for t in value[:64] if isinstance(t, str) or type(t) is int)


def _num(obj: Mapping[str, Any], key: str, problems: list[str], sentinel: bool = False) -> float | None:
    """A numeric field, or None when absent, non-numeric, non-finite, or (``sentinel``) Spark's -1."""
    if key not in obj or obj[key] is None:
        return None
    number = finite(obj[key])
    if number is None:
        problems.append(f"{key} is not a finite number")
        return None
    if sentinel and number < 0:
        return None
    return number


def _num_map(raw: Any, where: str, problems: list[str]) -> dict[str, float]:
    """Numeric entries of a string map (durationMs, source metrics); non-numeric entries are skipped."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{where} is not an object")
        return {}
    out: dict[str, float] = {}
    for n, (key, value) in enumerate(raw.items()):
        if n >= MAX_MAP_ENTRIES:
            problems.append(f"{where} truncated to {MAX_MAP_ENTRIES} entries")
            break
        number = finite(value)
        if number is not None:
            out[_label(key, 100)] = number
    return out


def parse_timestamp(value: Any) -> float | None:
    """Spark's ISO-8601 UTC timestamps ("2026-11-21T22:19:17.166Z") as epoch seconds, else None."""
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
        return epoch_seconds((parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp())
    except (ValueError, OverflowError):  # year 1 or 9999 shifted out of range by its offset
        return None


_FAST_RULES = decode.Rules(
    MAX_OPERATORS, MAX_SOURCES, MAX_MAP_ENTRIES, MAX_INSTANCE_METRICS, INSTANCE_METRIC_RE, parse_timestamp, _rate, MAX_LONG
)
"""This module's bounds and readings, for ``spark_state_observer.model.decode``'s fast path (which declines whatever they would touch)."""


def parse_timestamp_memo(value: str | None) -> float | None:
    """``parse_timestamp`` through the memo the fast decoder reads times with: a replay reads each progress event's
    trigger time to place it, then the decoder reads the same text, and finds it parsed (~1 µs an event saved)."""
    return None if value is None else _FAST_RULES.cached_timestamp(value)
