"""What a restart of a Kafka query left to read: the backlog at restart, the catch-up, the partitions added.

After a restart the on-call engineer asks how far behind the query came back and when it will have caught
up. The answer is in the new run's first batches: the records between its offsets and the topic's latest
(``latestOffset``; a batch planned by the run before has none, so the first batch that has one counts), then
how that lag falls batch by batch. A topic that gained partitions while the query was down (4 → 6) shows
more partitions in ``latestOffset`` than in ``startOffset``; the ``kafka_partitions_added`` signal names
them when the observer saw them appear.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spark_state_observer.model.parse import parse_timestamp
from spark_state_observer.signals.kafka_offsets import kafka_sources, lag_records, parse_offsets

CAUGHT_UP_BATCHES = 1.0  # caught up once a batch ends less than one batch's input behind the latest


@dataclass(frozen=True)
class KafkaRestart:
    backlog: float  # records behind the latest at the restart's first batch that read it
    lag: float  # records behind after the newest batch of the run
    caught_up_after: float | None  # seconds from the restart's first batch to the batch that caught up
    eta_seconds: float | None  # not caught up yet: the time left at the rate the lag fell
    partitions: dict[str, tuple[int, int]]  # topic -> (partitions read before, partitions now) where they differ


def kafka_restart(progress: Sequence[Mapping[str, Any]]) -> KafkaRestart | None:
    """The restart's Kafka figures from the run's batches oldest first (None: no Kafka source with offsets)."""
    rows: list[tuple[float, float, float, dict[str, tuple[int, int]]]] = []  # time, behind at start, behind at end, partitions
    for p in progress:
        ts = parse_timestamp(p.get("timestamp"))
        sources = kafka_sources(p)
        if ts is None or not sources:
            continue
        behind_start = behind_end = 0
        partitions: dict[str, tuple[int, int]] = {}
        found = False
        for _, source in sources:
            end, latest = parse_offsets(source.get("endOffset")), parse_offsets(source.get("latestOffset"))
            start = parse_offsets(source.get("startOffset")) or end
            if not latest or not end:
                continue
            found = True
            behind_start += sum(lag_records(start, latest).values())  # a partition new since the start lags by all it holds
            behind_end += sum(lag_records(end, latest).values())
            for topic, parts in latest.items():
                before = len(start.get(topic, {}))
                if before and len(parts) != before:
                    partitions[topic] = (before, len(parts))
        if found:
            rows.append((ts, float(behind_start), float(behind_end), partitions))
    if not rows:
        return None
    t0, backlog, _, _ = rows[0]
    changed: dict[str, tuple[int, int]] = {}
    for row in rows:
        for topic, (was, grown) in row[3].items():
            changed[topic] = (changed.get(topic, (was, grown))[0], grown)
    caught = None
    for ts, at_start, at_end, _ in rows:
        if at_end <= max(at_start - at_end, 1.0) * CAUGHT_UP_BATCHES:  # less than this batch's own read behind
            caught = ts - t0
            break
    tn, _, lag, _ = rows[-1]
    eta = None
    if caught is None and len(rows) > 1 and tn > t0:
        falling = (rows[0][2] - lag) / (tn - t0)
        eta = lag / falling if falling > 0 and math.isfinite(falling) else math.inf
    return KafkaRestart(backlog, lag, caught, eta, changed)


def describe(restart: KafkaRestart, added: Mapping[str, Sequence[int]] | None = None) -> str:
    """``; Kafka backlog 1,480 records at restart, caught up in 42 s; events partitions 4 → 6 (4, 5 new)``."""
    text = f"; Kafka backlog {restart.backlog:,.0f} records at restart"
    if restart.caught_up_after is not None:
        text += f", caught up in {restart.caught_up_after:,.0f} s"
    elif restart.eta_seconds is not None and math.isfinite(restart.eta_seconds):
        text += f", {restart.lag:,.0f} behind now: caught up in about {restart.eta_seconds:,.0f} s at this pace"
    elif restart.eta_seconds is not None:
        text += f", {restart.lag:,.0f} behind now and not catching up"
    topics = sorted(set(restart.partitions) | set(added or {}))
    for topic in topics:
        before_now = restart.partitions.get(topic)
        new = sorted((added or {}).get(topic, ()))
        if before_now is not None:
            text += f"; {topic} partitions {before_now[0]} → {before_now[1]}"
        else:
            text += f"; {topic} partitions added"
        if new:
            text += f" ({', '.join(str(n) for n in new[:8])}{', ...' if len(new) > 8 else ''} new)"
    return text
