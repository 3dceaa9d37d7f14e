"""Record Kafka incidents from a real broker, a real producer and real Spark: the Kafka signals' ground truth.

    bash scripts/fetch_kafka.sh && python scripts/record_kafka_incidents.py [NAME ...] [--list]
    PYTHON=/work/venvs/ps40/bin/python bash scripts/fetch_kafka.sh     # an older PySpark's connector, then
    python scripts/record_kafka_incidents.py --python /work/venvs/ps40/bin/python --suffix _40 [NAME ...]

Each scenario starts a KRaft broker on loopback, a 3-partition topic and ``BurstProducer`` (records in
flushed bursts every 0.5 s, round robin over the partitions), runs ``scripts/scenario_job.py --source kafka``
(a windowed count on RocksDB, 2 s trigger) in fresh processes, and does to the topic what the incident is:
a producer faster than the query's rate limit, partitions added, records deleted before the query read them
(``failOnDataLoss`` false and true), the topic deleted and made again under a running query. Kept under
``tests/fixtures/incidents/<name>/``, as ``scripts/record_incidents.py`` keeps its runs; ``truth.json`` says
what the script did and when (``kafka``: each finding a Kafka signal must give, with the time window it is
due in), from the producer's and the broker's own figures, never from the observer.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from record_incidents import SLIMMED_EVENTS, Recorder, compress_progress, record_scenarios, restart_facts, slim_event_log  # noqa: E402

from spark_state_observer.offline.kafka_local import BurstProducer, KafkaBroker, connector_jars  # noqa: E402

TOPIC = "events"
PARTITIONS = 3
TRIGGER_SECONDS = 2.0
STATE_PARTITIONS = 4  # spark.sql.shuffle.partitions: the state store instances of each batch
LEAD_SECONDS = 4.0  # the producer writes this long before the first run starts


@contextmanager
def kafka(rate: float, transactional: bool = False) -> Iterator[tuple[KafkaBroker, BurstProducer]]:
    """A broker with the topic, and a producer writing ``rate`` records a second to it."""
    with KafkaBroker() as broker:
        broker.create_topic(TOPIC, PARTITIONS)
        producer = BurstProducer(broker.bootstrap, TOPIC, PARTITIONS, rate, transactional=transactional).start()
        try:
            time.sleep(LEAD_SECONDS)
            yield broker, producer
        finally:
            producer.stop()


@functools.cache
def job_connector(python: str) -> str:
    """Spark's Kafka connector jars for the PySpark of ``python``, the interpreter that runs the jobs
    (``--python``): an older PySpark needs its own connector (Spark and Scala version), not this one's."""
    version = subprocess.run([python, "-c", "import pyspark; print(pyspark.__version__)"], check=True, capture_output=True, text=True)
    return ",".join(connector_jars(version.stdout.strip()))


def job_args(rec: Recorder, broker: KafkaBroker, *extra: str, limit: int = 0, options: dict[str, str] | None = None) -> list[str]:
    args = [
        "--source",
        "kafka",
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        TOPIC,
        "--kafka-jars",
        job_connector(rec.python),
        "--trigger-seconds",
        str(TRIGGER_SECONDS),
        "--partitions",
        str(STATE_PARTITIONS),
        "--name",
        rec.name,
        "--max-offsets-per-trigger",
        str(limit),
        *extra,
    ]
    for key, value in (options or {}).items():
        args += ["--kafka-option", f"{key}={value}"]
    return args


def at(seconds: float, action: Callable[[], None]) -> threading.Thread:
    """Run ``action`` ``seconds`` from now, beside the job (which ``Recorder.run`` waits for)."""
    thread = threading.Thread(target=lambda: (time.sleep(seconds), action()), daemon=True)
    thread.start()
    return thread


def producer_truth(producer: BurstProducer, broker: KafkaBroker) -> dict[str, Any]:
    return {
        "topic": TOPIC,
        "rate_per_second": producer.rate,
        "burst_seconds": producer.burst_seconds,
        "bursts": len(producer.bursts),
        "broker_latest_after_job": {str(p): o for p, o in broker.latest_offsets(TOPIC).items()},
    }


def steady(seconds: float, rate: float, limit: int, transactional: bool = False) -> Callable[[Recorder], dict[str, Any]]:
    """A query that keeps up: its rate limit above the producer's rate. Nothing may fire. ``transactional``:
    each burst a transaction, so the topic's offsets are not all records (a commit marker per partition)."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        with kafka(rate, transactional) as (broker, producer):
            facts = rec.run(*job_args(rec, broker, "--duration", str(seconds), limit=limit))
            produced = producer_truth(producer, broker)
        return {
            "clean": True,
            "duration_seconds": facts["process_ended"] - facts["process_started"],
            "source": "kafka",
            "max_offsets_per_trigger": limit,
            "read_capacity_per_second": limit / TRIGGER_SECONDS if limit else None,
            "transactional_producer": transactional,
            "partitions": STATE_PARTITIONS,
            **produced,
            "expected_events": [],
            "note": "the rate limit is above the producer's rate: the lag stays within a burst or two; nothing may fire",
        }

    return scenario


def lag_growing(seconds: float, rate: float, limit: int) -> Callable[[Recorder], dict[str, Any]]:
    """The producer writes faster than the query may read (its rate limit): the lag grows all run long."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        with kafka(rate) as (broker, producer):
            facts = rec.run(*job_args(rec, broker, "--duration", str(seconds), limit=limit))
            produced = producer_truth(producer, broker)
        capacity = limit / TRIGGER_SECONDS
        return {
            "clean": False,
            "source": "kafka",
            "max_offsets_per_trigger": limit,
            "read_capacity_per_second": capacity,
            **produced,
            "kafka": [
                {
                    "kind": "kafka_lag_growing",
                    "topic": TOPIC,
                    "from": facts["process_started"],
                    "until": facts["process_ended"],
                    "records_per_second": rate - capacity,
                }
            ],
            "expected_events": [f"kafka_lag_growing: {rate:g} records a second written, at most {capacity:g} read"],
        }

    return scenario


def partitions_added(seconds: float, rate: float, after: float, to: int) -> Callable[[Recorder], dict[str, Any]]:
    """Partitions added to the topic under a running query; the producer writes to them from then on."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        added: dict[str, float] = {}

        def add() -> None:
            from confluent_kafka.admin import NewPartitions  # type: ignore[attr-defined]

            admin = broker.admin()
            for future in admin.create_partitions([NewPartitions(TOPIC, to)]).values():
                future.result(60)
            added["at"] = time.time()
            producer.add_partitions(to)

        with kafka(rate) as (broker, producer):
            at(after, add)
            facts = rec.run(*job_args(rec, broker, "--duration", str(seconds)))
            produced = producer_truth(producer, broker)
        return {
            "clean": False,
            "source": "kafka",
            **produced,
            "partitions_added_at": added["at"],
            "kafka": [
                {
                    "kind": "kafka_partitions_added",
                    "topic": TOPIC,
                    "partitions": list(range(PARTITIONS, to)),
                    "from": added["at"],
                    "until": facts["process_ended"],
                }
            ],
            "expected_events": [f"kafka_partitions_added: partitions {PARTITIONS}..{to - 1} of {TOPIC}"],
        }

    return scenario


def records_deleted(fail_on_data_loss: bool, gap: float = 30.0) -> Callable[[Recorder], dict[str, Any]]:
    """The query stopped; while it is down the producer goes on and the records it has not read are deleted
    (what retention does to a query down too long); then it restarts on its checkpoint."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        from confluent_kafka import TopicPartition

        with kafka(20.0) as (broker, producer):
            first = rec.run(*job_args(rec, broker, "--duration", "40"))
            committed = broker.latest_offsets(TOPIC)  # at most this was read: the run read up to the latest it saw
            time.sleep(gap)
            latest = broker.latest_offsets(TOPIC)
            # keep the newest 10 records of each partition: everything the stopped query had not read before them is gone
            upto = {p: max(o - 10, 0) for p, o in latest.items()}
            admin = broker.admin()
            for future in admin.delete_records([TopicPartition(TOPIC, p, o) for p, o in upto.items()]).values():
                future.result(60)
            deleted_at = time.time()
            options = {"failOnDataLoss": "true" if fail_on_data_loss else "false"}
            if fail_on_data_loss:
                second = rec.run(*job_args(rec, broker, options=options), expect_failure=True)
            else:
                second = rec.run(*job_args(rec, broker, "--duration", "40", options=options))
            produced = producer_truth(producer, broker)
        truth: dict[str, Any] = {
            "clean": False,
            "source": "kafka",
            **produced,
            "fail_on_data_loss": fail_on_data_loss,
            "latest_when_first_run_ended": {str(p): o for p, o in committed.items()},
            "deleted_before": {str(p): o for p, o in upto.items()},
            "deleted_at": deleted_at,
            # the first run read at most up to the latest when it ended: at least this many were deleted unread
            "records_deleted_unread_at_least": sum(max(0, o - committed[p]) for p, o in upto.items()),
            "restarts": [restart_facts(first, second)],
        }
        if fail_on_data_loss:
            truth["failure"] = {
                "expected_class": "source",
                "where": "the Kafka source: offsets it must read were deleted (failOnDataLoss=true)",
                # the innermost cause (the root cause keeps Spark's error class, KAFKA_DATA_LOSS, before it)
                "expected_root_cause": "OffsetOutOfRangeException",
                "every_run": False,
                "failing_run": second["run_dir"],
            }
        else:
            truth["kafka"] = [
                {
                    "kind": "kafka_offsets_skipped",
                    "topic": TOPIC,
                    "partitions": sorted(int(p) for p in upto),
                    "from": second["process_started"],
                    "until": second["process_ended"],
                }
            ]
        return truth

    return scenario


def checkpoint_restored_from_backup(rec: Recorder) -> dict[str, Any]:
    """Run 1, a copy of its checkpoint (a backup), run 2 on from there, then the backup put back and run 3 on
    it: run 3 starts from run 1's offsets and state, so it reads again what run 2 read."""
    with kafka(20.0) as (broker, producer):
        first = rec.run(*job_args(rec, broker, "--duration", "30"))
        backup = rec.checkpoint + ".backup"
        shutil.copytree(rec.checkpoint, backup)
        second = rec.run(*job_args(rec, broker, "--duration", "30"))
        shutil.rmtree(rec.checkpoint)
        shutil.copytree(backup, rec.checkpoint)
        restored_at = time.time()
        third = rec.run(*job_args(rec, broker, "--duration", "30"))
        produced = producer_truth(producer, broker)
    return {
        "clean": False,
        "source": "kafka",
        **produced,
        "checkpoint_restored_at": restored_at,
        "restarts": [restart_facts(first, second), restart_facts(second, third)],
        "kafka": [
            {
                "kind": "kafka_offsets_rewound",
                "topic": TOPIC,
                "partitions": list(range(PARTITIONS)),
                "from": third["process_started"],
                "until": third["process_ended"],
            }
        ],
        "expected_events": ["kafka_offsets_rewound at run 3's first batch: what run 2 read is read again"],
    }


def topic_recreated(seconds: float, after: float, fail_on_data_loss: bool) -> Callable[[Recorder], dict[str, Any]]:
    """The topic deleted and made again under a running query (its offsets start from 0 again)."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        state: dict[str, Any] = {}

        def recreate() -> None:
            producer = state["producer"]
            producer.stop()
            state["before"] = producer
            admin = broker.admin()
            for future in admin.delete_topics([TOPIC]).values():
                future.result(60)
            while TOPIC in admin.list_topics(timeout=10).topics:
                time.sleep(0.2)
            broker.create_topic(TOPIC, PARTITIONS)
            state["recreated_at"] = time.time()
            state["producer"] = BurstProducer(broker.bootstrap, TOPIC, PARTITIONS, 20.0).start()

        options = {"failOnDataLoss": "true" if fail_on_data_loss else "false"}
        with KafkaBroker() as broker:
            broker.create_topic(TOPIC, PARTITIONS)
            state["producer"] = BurstProducer(broker.bootstrap, TOPIC, PARTITIONS, 20.0).start()
            try:
                time.sleep(LEAD_SECONDS)
                at(after, recreate)
                if fail_on_data_loss:
                    facts = rec.run(*job_args(rec, broker, options=options), expect_failure=True)
                else:
                    facts = rec.run(*job_args(rec, broker, "--duration", str(seconds), options=options))
            finally:
                state["producer"].stop()
            latest_before = state["before"].latest()
            truth: dict[str, Any] = {
                "clean": False,
                "source": "kafka",
                "topic": TOPIC,
                "fail_on_data_loss": fail_on_data_loss,
                "recreated_at": state["recreated_at"],
                "latest_before_delete": {str(p): o for p, o in latest_before.items()},
                "broker_latest_at_end": {str(p): o for p, o in broker.latest_offsets(TOPIC).items()},
            }
        if fail_on_data_loss:
            truth["failure"] = {
                "expected_class": "source",
                "where": "the Kafka source: its topic was deleted and made again (failOnDataLoss=true)",
                "expected_root_cause": "offset was changed from",  # Spark's reason line: the partition's offsets went back
                "every_run": True,
            }
        else:
            truth["kafka"] = [
                {
                    "kind": "kafka_latest_went_back",
                    "topic": TOPIC,
                    "partitions": list(range(PARTITIONS)),
                    "from": state["recreated_at"],
                    "until": facts["process_ended"],
                }
            ]
        return truth

    return scenario


def slimmed(scenario: Callable[[Recorder], dict[str, Any]]) -> Callable[[Recorder], dict[str, Any]]:
    """``scenario``, its runs kept small as the other recordings are: the event log of each run that did not fail
    without ``SLIMMED_EVENTS`` and stateless task ends (``slim_event_log``: Spark 3.5 and 4.0 log two to three
    times what 4.3 does), the progress lines compressed. A failed run keeps its whole log (its task failures)."""

    def scenario_slimmed(rec: Recorder) -> dict[str, Any]:
        truth = scenario(rec)
        for facts in rec.runs:
            run_dir = os.path.join(rec.target, facts["run_dir"])
            if not facts.get("exception"):
                slim_event_log(os.path.join(run_dir, "eventlog"))
            compress_progress(run_dir)
        truth["kept"] = (
            f"progress lines (zstd); the event log without {', '.join(sorted(SLIMMED_EVENTS))} and stateless task ends,"
            " but a failed run's whole"
        )
        return truth

    return scenario_slimmed


SCENARIOS = {
    "kafka_steady_rate_limited": steady(300, rate=20.0, limit=50),
    "kafka_steady_transactional": steady(180, rate=20.0, limit=0, transactional=True),
    "kafka_checkpoint_restored_from_backup": checkpoint_restored_from_backup,
    "kafka_lag_growing": lag_growing(180, rate=30.0, limit=40),
    "kafka_partitions_added": partitions_added(150, rate=20.0, after=60, to=6),
    "kafka_records_deleted_tolerated": records_deleted(fail_on_data_loss=False),
    "kafka_records_deleted_fails": records_deleted(fail_on_data_loss=True),
    "kafka_topic_recreated_tolerated": topic_recreated(150, after=60, fail_on_data_loss=False),
    "kafka_topic_recreated_fails": topic_recreated(150, after=60, fail_on_data_loss=True),
}


def main() -> int:
    return record_scenarios(
        {name: slimmed(scenario) for name, scenario in SCENARIOS.items()},
        recorded_by="scripts/record_kafka_incidents.py",
        errors=(TimeoutError, RuntimeError),
    )


if __name__ == "__main__":
    sys.exit(main())
