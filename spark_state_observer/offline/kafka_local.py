"""A local single-node Kafka broker (KRaft) on loopback and a producer at a known rate: the demo's, the tests'.

Spark's Kafka source keeps its offsets in the checkpoint, so seeing the observer's Kafka lag needs a real
broker. ``KafkaBroker`` runs one from the jars ``scripts/fetch_kafka.sh`` puts under
``SPARK_STATE_OBSERVER_KAFKA_DIR`` (default ``~/.cache/spark-state-observer/kafka``), in its own temp dir on
free loopback ports, and stops it by its own pid (SIGTERM, then SIGKILL). ``connector_jars()`` gives Spark's
Kafka connector for the installed PySpark (for ``spark.jars``). Without the jars or the Python client
(``pip install 'spark-state-observer[kafka]'``) every entry point raises ``MissingKafka`` saying how to get them.

``BurstProducer`` writes in small bursts, each flushed before the next: between bursts the broker's latest
offsets are exactly what the producer recorded, which is how a test knows the truth at a given time.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from typing import Any

from spark_state_observer.offline.local_process import free_port, stop_process

KAFKA_DIR = os.environ.get("SPARK_STATE_OBSERVER_KAFKA_DIR") or os.path.expanduser("~/.cache/spark-state-observer/kafka")
FETCH = "bash scripts/fetch_kafka.sh"


class MissingKafka(RuntimeError):
    """The broker jars, the connector jars or the Python client are not installed."""


def _complete(pattern: str) -> str | None:
    """Newest folder matching ``pattern`` that the fetch script finished (it writes manifest.json last)."""
    done = sorted(d for d in glob.glob(os.path.join(KAFKA_DIR, pattern)) if os.path.isfile(os.path.join(d, "manifest.json")))
    return done[-1] if done else None


def broker_dir() -> str:
    found = _complete("broker-*")
    if found is None:
        raise MissingKafka(f"no Kafka broker jars under {KAFKA_DIR}; run {FETCH}")
    return found


def connector_jars(pyspark_version: str | None = None) -> list[str]:
    """Local paths of Spark's Kafka connector for ``pyspark_version`` (default: the installed PySpark), for
    ``spark.jars``: a job run by another interpreter (``--python`` of the record scripts, an older PySpark)
    needs the connector of its own Spark and Scala version (``fetch_kafka.sh`` with ``PYTHON`` set to it)."""
    if pyspark_version is None:
        import pyspark

        pyspark_version = pyspark.__version__
    folder = os.path.join(KAFKA_DIR, f"connector-{pyspark_version}")
    if not os.path.isfile(os.path.join(folder, "manifest.json")):
        raise MissingKafka(f"no Spark Kafka connector for PySpark {pyspark_version} under {KAFKA_DIR}; run PYTHON=<its python> {FETCH}")
    with open(os.path.join(folder, "manifest.json")) as f:
        return [os.path.join(folder, name) for name in json.load(f)["jars"]]


def manifests() -> dict[str, Any]:
    """What was fetched (versions and jars), for reports."""
    out: dict[str, Any] = {}
    for folder in (broker_dir(), os.path.dirname(connector_jars()[0])):
        with open(os.path.join(folder, "manifest.json")) as f:
            out[os.path.basename(folder)] = json.load(f)
    return out


def new_cluster_id() -> str:
    """A random KRaft cluster id (16 bytes, URL-safe base64), as Kafka's own ``Uuid.randomUuid``: never one that
    starts with "-", which ``StorageTool format -t`` would read as an option (1 draw in 64 did, and failed)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaBroker:
    """One KRaft broker+controller process in a temp dir on two free loopback ports."""

    def __init__(self, jars: str | None = None, workdir: str | None = None, heap: str = "384m") -> None:
        try:
            import confluent_kafka  # noqa: F401
        except ImportError as exc:
            raise MissingKafka("the Python Kafka client is missing: pip install -e '.[kafka]'") from exc
        self.jars = jars or broker_dir()
        self._own_dir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="sso-kafka-")
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.heap = heap
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = os.path.join(self.workdir, "broker.log")

    def _java(self, *args: str) -> list[str]:
        java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else (shutil.which("java") or "java")
        return [java, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", os.path.join(self.jars, "*"), *args]

    def start(self, timeout: float = 120.0) -> KafkaBroker:
        props = os.path.join(self.workdir, "server.properties")
        with open(props, "w") as f:
            f.write(
                "\n".join(
                    [
                        "process.roles=broker,controller",
                        "node.id=1",
                        f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                        f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                        f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                        "controller.listener.names=CONTROLLER",
                        "inter.broker.listener.name=PLAINTEXT",
                        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                        f"log.dirs={os.path.join(self.workdir, 'data')}",
                        "num.partitions=1",
                        "auto.create.topics.enable=false",
                        "offsets.topic.replication.factor=1",
                        "offsets.topic.num.partitions=1",
                        "transaction.state.log.replication.factor=1",
                        "transaction.state.log.min.isr=1",
                        "share.coordinator.state.topic.replication.factor=1",
                        "share.coordinator.state.topic.min.isr=1",
                        "group.initial.rebalance.delay.ms=0",
                        "num.network.threads=1",
                        "num.io.threads=2",
                        "background.threads=2",
                        "log.retention.hours=1",
                    ]
                )
                + "\n"
            )
        # a KRaft log dir must be formatted with a cluster id first (what `kafka-storage.sh format` does)
        cluster_id = new_cluster_id()
        with open(self.log_path, "ab") as log:
            subprocess.run(
                self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", props),
                check=True,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
            self.proc = subprocess.Popen(
                self._java("kafka.Kafka", props), stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        admin = None
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"kafka broker exited with {self.proc.returncode}; see {self.log_path}:\n{self.log_tail()}")
            try:
                if admin is None:
                    # the client logs every refused connection: only start it once the port listens
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    admin = AdminClient({"bootstrap.servers": self.bootstrap})
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # not listening yet: try again until the deadline
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka broker not ready in {timeout}s; see {self.log_path}:\n{self.log_tail()}")
            time.sleep(0.5)

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def admin(self) -> Any:
        """An admin client of this broker (confluent_kafka's ``AdminClient``). Keep it while its futures are
        pending: a client collected before they resolve leaves them pending for ever."""
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
            future.result(60)
        deadline = time.monotonic() + 60
        while len(admin.list_topics(name, timeout=5).topics[name].partitions) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} has not got its {partitions} partitions")
            time.sleep(0.2)

    def latest_offsets(self, topic: str) -> dict[int, int]:
        """The broker's latest (high watermark) offset per partition, read with the client."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "sso-offsets", "enable.auto.commit": False})
        try:
            parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in sorted(parts)}
        finally:
            consumer.close()

    def sample_latest(self, topic: str, every: float, stop: threading.Event) -> list[tuple[float, float, dict[int, int]]]:
        """Read the topic's latest offsets from the broker every ``every`` seconds until ``stop``.

        Returns (time before, time after, offsets) per reading. A reading the broker answers with a retriable
        error (a partition whose leader is being elected, just after the topic is made) is left out and the next
        one tries again: the readings are the broker's truth, and one that failed says nothing of it.
        """
        from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

        transient = {
            KafkaError.NOT_LEADER_FOR_PARTITION,
            KafkaError.LEADER_NOT_AVAILABLE,
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError.REQUEST_TIMED_OUT,
            KafkaError._TIMED_OUT,
        }
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "sso-sampler", "enable.auto.commit": False})
        samples: list[tuple[float, float, dict[int, int]]] = []
        try:
            parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
            while not stop.wait(every):
                before = time.time()
                try:
                    offsets = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
                except KafkaException as exc:
                    error = exc.args[0] if exc.args else None
                    if not isinstance(error, KafkaError) or not (error.retriable() or error.code() in transient):
                        raise
                    continue
                samples.append((before, time.time(), offsets))
        finally:
            consumer.close()
        return samples

    def stop(self) -> None:
        """SIGTERM the broker by its pid, SIGKILL if it lingers, then remove its temp dir."""
        if self.proc is not None:
            stop_process(self.proc, 30)
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class BurstProducer:
    """Writes ``rate`` records per second to a topic in flushed bursts, round robin over partitions.

    Every record of a burst carries the burst's start time (ms) as its Kafka timestamp and value
    ``{"key": k, "ts": ms}``. ``bursts`` is the truth: per burst, its start and end (after flush, Unix
    seconds), timestamp and per partition the offsets it wrote ``[first, next)``.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: float,
        burst_seconds: float = 0.5,
        keys: int = 6,
        transactional: bool = False,
    ) -> None:
        from confluent_kafka import Producer

        self.topic, self.partitions, self.rate, self.burst_seconds, self.keys = topic, partitions, rate, burst_seconds, keys
        # transactional: each burst one committed transaction, so each partition it wrote gets a commit marker
        # after its records (an offset that is no record: what an exactly-once producer leaves in a topic)
        self.transactional = transactional
        config = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"}
        self._producer: Any = Producer({**config, "transactional.id": f"sso-burst-{topic}"} if transactional else config)
        if transactional:
            self._producer.init_transactions(60)
        self.bursts: list[dict[str, Any]] = []
        self._next = dict.fromkeys(range(partitions), 0)
        self._sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # a burst and a change of the partitions written, one at a time
        self.error: BaseException | None = None

    def add_partitions(self, partitions: int) -> None:
        """Write to ``partitions`` partitions from the next burst on (the topic has been given them), once the
        producer's metadata knows them (it refreshes every 5 minutes by itself; asking refreshes it now)."""
        deadline = time.monotonic() + 60
        while len(self._producer.list_topics(self.topic, timeout=10).topics[self.topic].partitions) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the producer does not see {partitions} partitions of {self.topic}")
            time.sleep(0.2)
        with self._lock:
            for p in range(self.partitions, partitions):
                self._next[p] = 0
            self.partitions = max(self.partitions, partitions)

    def burst(self, count: int) -> dict[str, Any]:
        """Write ``count`` records now and wait until the broker acknowledged them all."""
        start = time.time()
        ts = int(start * 1000)
        first = dict(self._next)
        acked: dict[int, list[int]] = {p: [] for p in range(self.partitions)}

        def ack(err: Any, msg: Any) -> None:
            if err is not None:
                raise RuntimeError(f"produce failed: {err}")
            acked[msg.partition()].append(msg.offset())

        if self.transactional:
            self._producer.begin_transaction()
        for _ in range(count):
            p = self._sent % self.partitions
            key = self._sent % self.keys
            self._producer.produce(
                self.topic,
                key=str(key).encode(),
                value=json.dumps({"key": key, "ts": ts}).encode(),
                partition=p,
                timestamp=ts,
                on_delivery=ack,
            )
            self._sent += 1
        if self.transactional:
            self._producer.commit_transaction(60)
        left = self._producer.flush(60)
        if left:
            raise RuntimeError(f"{left} records not acknowledged")
        for p, offsets in acked.items():
            if offsets:
                # offsets of one partition are contiguous and follow the previous burst's (one producer, acks=all)
                if min(offsets) != first[p] or max(offsets) != first[p] + len(offsets) - 1:
                    raise RuntimeError(f"partition {p}: offsets {min(offsets)}..{max(offsets)} do not follow {first[p]}")
                self._next[p] = max(offsets) + 1 + self.transactional  # the commit marker takes the next offset
        record = {
            "start": start,
            "end": time.time(),
            "timestamp_ms": ts,
            "offsets": {str(p): [first[p], self._next[p]] for p in range(self.partitions)},
        }
        self.bursts.append(record)
        return record

    def _run(self) -> None:
        per_burst = self.rate * self.burst_seconds
        owed = 0.0
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                owed += per_burst
                count = int(owed)
                owed -= count
                if count:
                    with self._lock:
                        self.burst(count)
                next_at += self.burst_seconds
                self._stop.wait(max(0.0, next_at - time.monotonic()))
        except BaseException as exc:  # surfaced by stop(); a producer thread must not die silently
            self.error = exc

    def start(self) -> BurstProducer:
        self._thread = threading.Thread(target=self._run, name="burst-producer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
        self._producer.flush(30)
        self._producer = None  # closes the client: no reconnect attempts (and their log lines) once the broker is gone
        if self.error is not None:
            raise RuntimeError("the producer failed") from self.error

    def latest(self) -> dict[int, int]:
        """Next offset per partition after the last acknowledged burst (the broker's latest, if nobody else writes)."""
        return dict(self._next)
