"""End to end: a real KRaft broker, a producer at a known rate, Spark's Kafka source with a stateful query.

The lag the observer computes from the query's progress (``observer.signals.kafka_lag``) must equal what the
broker holds: per partition, exactly, in records; within one trigger interval, in seconds.
"""

from __future__ import annotations

import os
import time

import pytest
from conftest import ROOT, progress_lines, run_script
from kafka_broker import (
    BurstProducer,
    KafkaBroker,
    MissingKafka,
    connector_jars,
    kafka_broker,
    missing,
    record_timestamp,
    truth_at,
)

from observer.model import parse_timestamp
from observer.signals.kafka_lag import (
    CAUGHT_UP,
    LOWER_BOUND,
    KafkaLagTracker,
    kafka_sources,
    parse_offsets,
    progress_time,
)

__all__ = ["kafka_broker"]  # the fixture, used by name below

TRIGGER = 2.0


@pytest.mark.slow
def test_lag_matches_the_broker(kafka_broker: KafkaBroker, tmp_path: object) -> None:
    try:
        jars = connector_jars()
    except MissingKafka as exc:
        missing(str(exc))
    topic, partitions = "e2e", 3
    kafka_broker.create_topic(topic, partitions)
    producer = BurstProducer(kafka_broker.bootstrap, topic, partitions, rate=15).start()
    out = os.path.join(str(tmp_path), "run")
    try:
        time.sleep(2)
        # the rate limit (60 per batch, 30 produced per trigger) makes the query start behind and catch up batch by batch
        run_script([os.path.join(ROOT, "scripts", "scenario_job.py"), "--checkpoint", os.path.join(str(tmp_path), "checkpoint"),
                    "--out", out, "--source", "kafka", "--bootstrap", kafka_broker.bootstrap, "--topic", topic,
                    "--kafka-jars", ",".join(jars), "--trigger-seconds", str(TRIGGER), "--max-offsets-per-trigger", "60",
                    "--until-caught-up"], timeout=600)
    finally:
        producer.stop()
    # the producer's account of what it wrote is the broker's, read with the client
    assert kafka_broker.latest_offsets(topic) == producer.latest()

    tracker = KafkaLagTracker()
    exact = behind = 0
    snap = None
    for progress in progress_lines(out):
        (_i, source), = kafka_sources(progress)
        t, start = progress_time(progress), parse_timestamp(progress["timestamp"])
        assert t is not None and start is not None
        snap = tracker.update(source, t)
        assert snap is not None
        end = parse_offsets(source["endOffset"])[topic]
        truth = truth_at(producer.bursts, start)
        if truth is not None and truth == truth_at(producer.bursts, t):
            exact += 1
            assert {row.partition: row.records for row in snap.partitions} == {p: truth[p] - end[p] for p in truth}
        for row in snap.partitions:
            if row.seconds_kind in (CAUGHT_UP, LOWER_BOUND):
                continue
            written = record_timestamp(producer.bursts, row.partition, row.end)
            assert written is not None and row.seconds is not None
            assert abs(row.seconds - (t - written)) <= TRIGGER, (progress["batchId"], row)
            behind += 1
    assert exact >= 3 and behind >= 3
    assert snap is not None and snap.topic_records[topic] == 0  # it caught up
