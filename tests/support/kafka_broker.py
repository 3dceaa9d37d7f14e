"""Test helpers around the local Kafka broker (``spark_state_observer.offline.kafka_local``): the producer's truth and a fixture.

Without the jars the ``kafka_broker`` fixture skips, or fails when ``SPARK_STATE_OBSERVER_REQUIRE_REAL=1``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from spark_state_observer.offline.kafka_local import (  # noqa: F401 - re-exported for the tests and scripts/record_kafka.py
    FETCH,
    KAFKA_DIR,
    BurstProducer,
    KafkaBroker,
    MissingKafka,
    broker_dir,
    connector_jars,
    manifests,
)

REQUIRE_REAL = os.environ.get("SPARK_STATE_OBSERVER_REQUIRE_REAL") == "1"


def truth_at(bursts: list[dict[str, Any]], t: float, margin: float = 0.05) -> dict[int, int] | None:
    """The producer's latest offsets at Unix time ``t``, or None when a burst was in flight around ``t``."""
    latest: dict[int, int] = {}
    for b in bursts:
        if b["start"] - margin <= t <= b["end"] + margin:
            return None
        if b["end"] < t:
            for p, (_first, nxt) in b["offsets"].items():
                latest[int(p)] = nxt
    return latest


def broker_states_during(samples: list[tuple[float, float, dict[int, int]]], start: float, end: float) -> list[dict[int, int]]:
    """Every latest-offsets state the broker may have shown a batch run over [start, end].

    The last reading before ``start``, every reading overlapping the batch and the first after ``end``:
    Spark reads the latest offsets at one unknown moment inside the batch, so its view is one of these.
    Empty when the sampler did not cover the batch.
    """
    before = [s for s in samples if s[1] <= start]
    after = [s for s in samples if s[0] >= end]
    if not before or not after:
        return []
    during = [s for s in samples if s[1] > start and s[0] < end]
    states: list[dict[int, int]] = []
    for _a, _b, state in [before[-1], *during, after[0]]:
        if state not in states:
            states.append(state)
    return states


def record_timestamp(bursts: list[dict[str, Any]], partition: int, offset: int) -> float | None:
    """Unix time (seconds) the producer stamped on the record at ``offset`` of ``partition``."""
    for b in bursts:
        first, nxt = b["offsets"][str(partition)]
        if first <= offset < nxt:
            return float(b["timestamp_ms"]) / 1000.0
    return None


def missing(message: str) -> None:
    """Skip, or fail where real parts are required."""
    if REQUIRE_REAL:
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def kafka_broker() -> Iterator[KafkaBroker]:
    """A running broker for the module's tests; skips (or fails under REQUIRE_REAL) without the jars."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        missing("Java is not installed")
    try:
        broker = KafkaBroker()
    except MissingKafka as exc:
        missing(str(exc))
    with broker:
        yield broker
