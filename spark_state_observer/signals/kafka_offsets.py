"""The Kafka source's offsets as its progress reports them, read defensively: JSON from files and JVMs we do not
control yields fewer partitions, never an exception (``signals.kafka_lag`` judges the lag from them)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from spark_state_observer.model.bounded import loads
from spark_state_observer.model.parse import parse_timestamp

Offsets = dict[str, dict[int, int]]

MAX_OFFSET = 2**63 - 1  # Kafka offsets are Java longs
MAX_PARTITION = 2**31 - 1
MAX_TOPIC_CHARS = 249  # Kafka's own limit on topic names
MAX_JSON_CHARS = 8_000_000
DEFAULT_MAX_PARTITIONS = 10_000  # per source; more are ignored (and counted in KafkaSnapshot.dropped_partitions)


def as_offset(value: Any, upper: int = MAX_OFFSET) -> int | None:
    """A non-negative integer no larger than ``upper``, from an int, an integral float or a digit string; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        number = int(value)
    elif isinstance(value, str) and 0 < len(value) <= 20 and value.strip().isdigit():
        number = int(value.strip())
    else:
        return None
    return number if 0 <= number <= upper else None


def parse_offsets(value: Any, max_partitions: int = DEFAULT_MAX_PARTITIONS) -> Offsets:
    """Spark's Kafka offsets (``{"topic": {"0": 42}}``, as a dict or a JSON string) as ``{topic: {partition: offset}}``.

    Never raises: entries that are not a topic name with non-negative integer partitions and offsets are
    left out (Spark's own ``-1``/``-2`` markers for latest/earliest included), and at most ``max_partitions``
    are kept, so a hostile document costs bounded memory.
    """
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value[:MAX_JSON_CHARS]).decode("utf-8", errors="replace")
    if isinstance(value, str):
        if len(value) > MAX_JSON_CHARS:
            return {}
        try:
            value = loads(value)
        except (ValueError, RecursionError):
            return {}
    out: Offsets = {}
    if not isinstance(value, Mapping):
        return out
    kept = 0
    try:
        for topic, partitions in value.items():
            if not isinstance(topic, str) or not topic or len(topic) > MAX_TOPIC_CHARS or not isinstance(partitions, Mapping):
                continue
            for partition, offset in partitions.items():
                p = as_offset(partition, MAX_PARTITION)
                o = as_offset(offset)
                if p is None or o is None:
                    continue
                if kept >= max_partitions:
                    return out
                out.setdefault(topic, {})[p] = o
                kept += 1
    except Exception:
        return out
    return out


KAFKA_PREFIX = "Kafka"  # Spark's Kafka sources describe themselves as KafkaV2[...] or KafkaSource[...]


def is_kafka_source(source: Any) -> bool:
    """Whether a progress ``sources[]`` entry is Spark's Kafka source (``KafkaV2[...]``, or ``KafkaSource[...]`` for DSv1)."""
    return isinstance(source, Mapping) and isinstance(source.get("description"), str) and source["description"].startswith(KAFKA_PREFIX)


def kafka_sources(progress: Any) -> list[tuple[int, Mapping[str, Any]]]:
    """The Kafka sources of a progress (its ``sources[]`` index and entry)."""
    sources = progress.get("sources") if isinstance(progress, Mapping) else None
    if not isinstance(sources, list):
        return []
    return [(i, s) for i, s in enumerate(sources) if is_kafka_source(s)]


def progress_time(progress: Any) -> float | None:
    """When the batch's latest offsets were read, Unix seconds: the end of its ``latestOffset`` phase.

    The progress ``timestamp`` is the trigger's start; the source asks the broker for the latest offsets
    during the ``latestOffset`` phase right after it, which takes seconds on a run's first batch (the consumer
    is created then). Counting from the phase's end keeps that start-up time out of the lag in seconds.
    """
    if not isinstance(progress, Mapping):
        return None
    start = parse_timestamp(progress.get("timestamp"))
    if start is None:
        return None
    durations = progress.get("durationMs")
    phase = durations.get("latestOffset") if isinstance(durations, Mapping) else None
    if isinstance(phase, (int, float)) and not isinstance(phase, bool) and math.isfinite(phase) and 0 <= phase <= 86_400_000:
        return start + phase / 1000.0
    return start


def lag_records(end: Offsets, latest: Offsets) -> dict[tuple[str, int], int]:
    """Records not yet read per (topic, partition): ``latest - end``, 0 when end is at or past latest.

    A partition known to ``latest`` but not to ``end`` (just added, not read yet) lags by its whole latest offset.
    """
    out: dict[tuple[str, int], int] = {}
    for topic, partitions in latest.items():
        ends = end.get(topic, {})
        for p, top in partitions.items():
            out[(topic, p)] = max(0, top - ends.get(p, 0))
    return out


def topic_totals(lags: Mapping[tuple[str, int], int]) -> dict[str, int]:
    """Lag in records summed per topic."""
    totals: dict[str, int] = {}
    for (topic, _p), lag in lags.items():
        totals[topic] = totals.get(topic, 0) + lag
    return totals
