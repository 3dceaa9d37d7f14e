"""End to end: a real KRaft broker, a producer at a known rate, Spark's Kafka source with a stateful query.

The lag the observer computes from the query's progress (``observer.signals.kafka_lag``) must equal what the
broker holds: per partition, exactly, in records, at every batch where the broker's latest offsets (read with
the client ten times a second) did not move while Spark read them; within one trigger interval, in seconds,
of the age the producer stamped on the oldest unread record.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from kafka_broker import (
    BurstProducer,
    KafkaBroker,
    MissingKafka,
    broker_truth_at,
    connector_jars,
    kafka_broker,
    missing,
    record_timestamp,
)

from conftest import ROOT, progress_lines, run_script
from observer.model.parse import parse_timestamp
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
    # one burst a second: most batches read the latest offsets while nothing is being written, so the truth is exact
    producer = BurstProducer(kafka_broker.bootstrap, topic, partitions, rate=15, burst_seconds=1.0).start()
    out = os.path.join(str(tmp_path), "run")
    # the broker's own latest offsets, read with the client all along the run
    stop, samples = threading.Event(), []
    sampler = threading.Thread(target=lambda: samples.extend(kafka_broker.sample_latest(topic, 0.1, stop)), daemon=True)
    sampler.start()
    try:
        time.sleep(2)
        # the rate limit (60 per batch, 30 produced per trigger) makes the query start behind and catch up batch by batch
        run_script([os.path.join(ROOT, "scripts", "scenario_job.py"), "--checkpoint", os.path.join(str(tmp_path), "checkpoint"),
                    "--out", out, "--source", "kafka", "--bootstrap", kafka_broker.bootstrap, "--topic", topic,
                    "--kafka-jars", ",".join(jars), "--trigger-seconds", str(TRIGGER), "--max-offsets-per-trigger", "60",
                    "--until-caught-up"], timeout=600)
    finally:
        stop.set()
        sampler.join(60)
        producer.stop()
    # the producer's account of what it wrote is the broker's
    assert kafka_broker.latest_offsets(topic) == producer.latest()
    assert samples

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
        truth = broker_truth_at(samples, start, t)
        if truth is not None:
            exact += 1
            assert {row.partition: row.records for row in snap.partitions} == {p: truth[p] - end[p] for p in truth}
        for row in snap.partitions:
            if row.seconds_kind in (CAUGHT_UP, LOWER_BOUND):
                continue
            written = record_timestamp(producer.bursts, row.partition, row.end)
            assert written is not None and row.seconds is not None
            assert abs(row.seconds - (t - written)) <= TRIGGER, (progress["batchId"], row)
            behind += 1
    assert exact >= len(progress_lines(out)) // 2 and behind >= 3, (exact, behind)
    assert snap is not None and snap.topic_records[topic] == 0  # it caught up
