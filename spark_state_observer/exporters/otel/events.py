"""Signals as OpenTelemetry log records, micro-batches as spans.

A signal (restart, restore, executor lost, stall, termination with its exception class, ...) becomes
one log record with ``event.name`` ``spark.streaming.<kind>``, the signal's time, a severity and its
figures as attributes. With ``otlp_traces`` each micro-batch becomes a span from the progress timestamp
(trigger start) to ``timestamp + batchDuration``, with one child span per phase of ``durationMs`` laid
out one after another in Spark's order, and each state operator's figures of that batch as attributes.
Both run on the observer's worker thread and only hand data to the SDK's bounded batch processors.
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry._logs import Logger, SeverityNumber
from opentelemetry.trace import SpanKind, Tracer, set_span_in_context

from spark_state_observer.exporters.otel.naming import attribute_name, otel_metric
from spark_state_observer.metrics import catalog
from spark_state_observer.model.events import OperatorProgress, QueryProgress
from spark_state_observer.model.fields import operator_field
from spark_state_observer.model.kinds import EXCEPTION
from spark_state_observer.model.phases import PHASES, TRIGGER_EXECUTION
from spark_state_observer.model.signal_kinds import QUERY_TERMINATED, RESTORE_FINISHED, WARNING_KINDS, SignalEvent


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def attribute_value(value: Any) -> Any:
    """A value OpenTelemetry accepts as an attribute (primitives, homogeneous lists), or None to skip it."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if (
        isinstance(value, (list, tuple))
        and value
        and all(type(v) is type(value[0]) and isinstance(v, (bool, int, float, str)) for v in value)
    ):
        return list(value)
    return str(value)


def signal_severity(signal: SignalEvent) -> tuple[SeverityNumber, str]:
    if signal.kind == QUERY_TERMINATED and signal.attributes.get("outcome") == EXCEPTION:
        return SeverityNumber.ERROR, "ERROR"
    if signal.kind in WARNING_KINDS:
        return SeverityNumber.WARN, "WARN"
    return SeverityNumber.INFO, "INFO"


def emit_signal(logger: Logger, signal: SignalEvent) -> None:
    """One log record for one signal."""
    attrs: dict[str, Any] = {"spark.query.name": signal.query, "spark.query.id": signal.query_id}
    if signal.run_id:
        attrs["spark.query.run_id"] = signal.run_id
    for key, value in signal.attributes.items():
        converted = attribute_value(value)
        if converted is not None:
            attrs[attribute_name(key)] = converted
    severity, text = signal_severity(signal)
    logger.emit(
        timestamp=_ns(signal.timestamp),
        observed_timestamp=time.time_ns(),
        severity_number=severity,
        severity_text=text,
        body=signal.describe(),
        attributes=attrs,
        event_name=f"spark.streaming.{signal.kind}",
    )


def record_restore(tracer: Tracer, signal: SignalEvent) -> None:
    """A finished restore (``restore_finished``) as a span from its job's start to its last partition, with a child
    span per listed partition (its task, launch to finish: the slowest ones); nothing for other signals."""
    duration = signal.attributes.get("duration_seconds")
    if signal.kind != RESTORE_FINISHED or not isinstance(duration, (int, float)):
        return
    attrs: dict[str, Any] = {"spark.query.name": signal.query, "spark.query.id": signal.query_id}
    if signal.run_id:
        attrs["spark.query.run_id"] = signal.run_id
    for key, value in signal.attributes.items():
        converted = attribute_value(value) if key != "slowest_partitions" else None
        if converted is not None:
            attrs["spark.restore." + key] = converted
    end = _ns(signal.timestamp)
    span = tracer.start_span(
        f"restore {signal.query} {signal.attributes.get('operator')}",
        kind=SpanKind.INTERNAL,
        start_time=end - _ns(duration),
        attributes=attrs,
    )
    context = set_span_in_context(span)
    for part in signal.attributes.get("slowest_partitions") or []:
        if isinstance(part.get("launch"), (int, float)) and isinstance(part.get("finish"), (int, float)):
            child = tracer.start_span(
                f"partition {part.get('partition')}",
                context=context,
                kind=SpanKind.INTERNAL,
                start_time=_ns(part["launch"]),
                attributes={
                    "spark.state.partition": part.get("partition"),
                    "spark.restore.operator": str(signal.attributes.get("operator")),
                },
            )
            child.end(end_time=_ns(part["finish"]))
    span.end(end_time=end)


def operator_attributes(op: OperatorProgress) -> dict[str, Any]:
    """One operator's figures of one batch, in base units, under ``spark.state.operator.<index>.``."""
    prefix = f"spark.state.operator.{op.index}."
    attrs: dict[str, Any] = {prefix + "name": op.name, prefix + "provider": op.provider}
    figures = [(spec, operator_field(op, spec.key)) for spec in catalog.OPERATOR_METRICS]
    figures += [(catalog.CUSTOM_BY_KEY[key], value) for key, value in op.custom.items() if key in catalog.CUSTOM_BY_KEY]
    for spec, raw in figures:
        if raw is not None:
            attrs[prefix + otel_metric(spec).name.removeprefix("spark.state.")] = raw * spec.scale
    return attrs


def record_batch(tracer: Tracer, p: QueryProgress) -> None:
    """A span for one micro-batch and a child span per phase; nothing without a timestamp."""
    if p.timestamp is None:
        return
    start = _ns(p.timestamp)
    duration_ms = p.batch_duration_ms if p.batch_duration_ms is not None else p.duration_ms.get(TRIGGER_EXECUTION, 0.0)
    attrs: dict[str, Any] = {
        "spark.query.name": p.name or p.query_id,
        "spark.query.id": p.query_id,
        "spark.query.run_id": p.run_id,
        "spark.batch.id": p.batch_id,
    }
    for key, value in (
        ("spark.streaming.input.rows", p.input_rows),
        ("spark.streaming.input.rows.rate", p.input_rows_per_second),
        ("spark.streaming.processed.rows.rate", p.processed_rows_per_second),
        ("spark.streaming.sink.output.rows", p.sink.output_rows if p.sink else None),
        ("spark.streaming.watermark.timestamp", p.event_time.get("watermark")),
    ):
        if value is not None:
            attrs[key] = value
    for op in p.operators:
        attrs.update(operator_attributes(op))
    batch = tracer.start_span(f"batch {p.name or p.query_id}", kind=SpanKind.INTERNAL, start_time=start, attributes=attrs)
    context = set_span_in_context(batch)
    at = start
    for phase in PHASES:
        ms = p.duration_ms.get(phase)
        if ms is None:
            continue
        child = tracer.start_span(
            phase,
            context=context,
            kind=SpanKind.INTERNAL,
            start_time=at,
            attributes={"spark.batch.phase": phase, "spark.batch.id": p.batch_id},
        )
        at += _ns(ms / 1000.0)
        child.end(end_time=at)
    batch.end(end_time=start + _ns(duration_ms / 1000.0))
