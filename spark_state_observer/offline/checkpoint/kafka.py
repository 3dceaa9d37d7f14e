"""The backlog a stopped query faces on Kafka, and when it will be back at the head after a restart.

Spark keeps a Kafka source's offsets in the checkpoint (``offsets/N``: one JSON line per source after the
batch metadata), not in a consumer group, so no Kafka tool knows how far behind a stopped query is. This
module reads the offsets of the last *committed* batch (a planned but uncommitted batch is re-run from them
on restart), asks the broker for each partition's latest offset, read-only (``AdminClient.list_offsets``:
no consumer group joined, nothing committed), and reads the latest offsets again ``sample_seconds`` later for
the topic's produce rate. With the restore estimate and the query's read rate (observed in the history, or
given) it forecasts the catch-up with ``spark_state_observer.signals.kafka_lag.catch_up_seconds``: the backlog grows at
the produce rate during the restore, then shrinks at the read rate minus the produce rate.

The read rate from a history is, by preference, the one the observer measured while the query was behind (the
``read_records_per_second`` of its ``kafka_catch_up_forecast`` signals), else the pace of the batches that
read about as much as the run's largest ones (capped by ``maxOffsetsPerTrigger``: the query had work queued).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import time
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import asdict, dataclass, field
from typing import Any

from spark_state_observer.model.bounded import stored_json
from spark_state_observer.offline.checkpoint.report import CheckpointError, CheckpointReport
from spark_state_observer.signals.kafka_lag import catch_up_seconds
from spark_state_observer.signals.kafka_offsets import Offsets, parse_offsets

LatestReader = Callable[[Mapping[str, list[int]]], Offsets]
"""Reads the broker's latest offset of each (topic, partitions)."""


@dataclass
class TopicBacklog:
    """One topic of one Kafka source: committed vs latest offsets per partition."""

    source_index: int
    topic: str
    committed: dict[int, int]
    latest: dict[int, int]
    backlog: dict[int, int]  # latest - committed, per partition (0 when the committed offset is past the latest)
    produce_rate: float | None  # records/s written to the topic while sampled
    read_rate: float | None  # records/s the query reads while behind
    read_rate_basis: str
    catch_up_seconds: float | None  # from now, restore included; None: never at these rates (or no read rate)

    @property
    def total(self) -> int:
        return sum(self.backlog.values())


@dataclass
class KafkaCatchUp:
    """The inspector's Kafka section: per topic the backlog and the forecast."""

    bootstrap: str
    committed_batch: int | None
    restore_seconds: float
    sampled_seconds: float
    topics: list[TopicBacklog] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for topic, raw in zip(self.topics, out["topics"], strict=True):
            raw["total"] = topic.total
        return out


def committed_offsets(report: CheckpointReport) -> tuple[int | None, dict[int, Offsets]]:
    """The last committed batch and its Kafka offsets per source index (``{}`` when nothing was committed)."""
    batch = report.last_committed_batch
    if batch is None:
        return None, {}
    root = report.path.removeprefix("file:")
    path = os.path.join(root, "offsets", str(batch))
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise CheckpointError(f"{path}: unreadable ({exc})") from None
    out: dict[int, Offsets] = {}
    for index, line in enumerate(lines[2:]):
        offsets = parse_offsets(line)
        if offsets:
            out[index] = offsets
    return batch, out


class _LastMessage(logging.Handler):
    """Keeps the client's last log line (for the error message) instead of letting librdkafka print them all."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


def admin_latest(bootstrap: str, timeout: float = 15.0) -> LatestReader:
    """A reader of the broker's latest offsets through the admin API (read-only: no group, no commit).

    The client's own log lines (one per failed connection attempt, every second) are silenced; a broker
    that does not answer within ``timeout`` is one ``CheckpointError`` line naming the bootstrap and the
    client's last word."""
    try:
        from confluent_kafka import KafkaError, KafkaException, TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]
    except ImportError as exc:
        raise CheckpointError("--kafka-bootstrap needs the Kafka client: pip install 'spark-state-observer[kafka]'") from exc
    name = _one_line(bootstrap) or "(empty)"
    messages = _LastMessage()
    client_log = logging.Logger("spark-state-observer.kafka-client")  # not registered: reaches no other handler
    client_log.addHandler(messages)
    try:
        config: dict[str, Any] = {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000), "logger": client_log}
        admin = AdminClient(config)
    except KafkaException as exc:
        raise CheckpointError(f"Kafka bootstrap {name}: {_reason(exc)}") from None

    def said() -> str:
        admin.poll(0)  # hands the client's queued log lines to the logger
        last = _one_line(messages.last)
        return f"; the client's last message: {last}" if last else ""

    def read(partitions: Mapping[str, list[int]]) -> Offsets:
        request = {TopicPartition(topic, p): OffsetSpec.latest() for topic, ps in partitions.items() for p in ps}  # type: ignore[no-untyped-call]
        deadline = time.monotonic() + timeout
        out: Offsets = {}
        try:
            for tp, future in admin.list_offsets(request, request_timeout=timeout).items():
                result = future.result(max(deadline - time.monotonic(), 0.0) + 1.0)
                out.setdefault(tp.topic, {})[tp.partition] = int(result.offset)
        except (TimeoutError, concurrent.futures.TimeoutError):
            raise CheckpointError(f"no answer from Kafka bootstrap {name} within {timeout:g} s (timeout){said()}") from None
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError._TIMED_OUT:
                raise CheckpointError(f"no answer from Kafka bootstrap {name} within {timeout:g} s (timeout){said()}") from None
            reason = error.str() if isinstance(error, KafkaError) else _reason(exc)
            raise CheckpointError(f"Kafka bootstrap {name}: {_one_line(reason)}{said()}") from None
        return out

    return read


def _one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line (whitespace and control characters collapsed), at most ``limit`` characters."""
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _reason(exc: BaseException) -> str:
    """One line saying what went wrong, never empty (a client timeout's text is)."""
    return _one_line(str(exc)) or type(exc).__name__


def read_rate_from_history(history_path: str, query_id: str) -> tuple[float | None, str]:
    """The query's read rate (records/s) observed in a history, and how it was obtained."""
    from spark_state_observer.history.store import connect
    from spark_state_observer.model.signal_kinds import KAFKA_CATCH_UP_FORECAST

    with closing(connect(history_path, readonly=True)) as conn:
        events = conn.execute(
            "SELECT attributes FROM events WHERE query_id = ? AND kind = ? ORDER BY ts", (query_id, KAFKA_CATCH_UP_FORECAST)
        ).fetchall()
        batches = conn.execute("SELECT run_id, ts, input_rows FROM batches WHERE query_id = ? ORDER BY run_id, ts", (query_id,)).fetchall()
    attributes = [stored_json(text, None) for (text,) in events]
    measured = [
        float(r)
        for r in (a.get("read_records_per_second") for a in attributes if isinstance(a, dict))
        if isinstance(r, (int, float)) and r > 0
    ]
    if measured:
        return measured[-1], "history: read rate measured while behind"
    # batches that read about as much as the run's largest ones were capped by the rate limit: the query had
    # more to read then, so their pace is its read rate: their rows over the seconds each ran (from its start to
    # the next batch's), summed as the live tracker sums them (a median of each batch's pace is skewed by
    # overran triggers, which fire the next batch at once). A run's first batch is left out: it spans the start-up.
    rows_read, seconds = 0.0, 0.0
    for run in sorted({b[0] for b in batches}):
        rows = [(ts, n) for r, ts, n in batches if r == run and n is not None]
        cap = max((n for _ts, n in rows), default=0.0)
        for (ts, n), (next_ts, _n) in zip(rows[1:], rows[2:], strict=False):
            if cap > 0 and n >= 0.9 * cap and next_ts > ts:
                rows_read, seconds = rows_read + n, seconds + (next_ts - ts)
    if seconds > 0:
        return rows_read / seconds, "history: pace of the batches that read the most (rate-limited), their rows over their seconds"
    return None, "history: no batches to measure the read rate"


def forecast(
    report: CheckpointReport,
    bootstrap: str,
    read_rate: float | None = None,
    read_rate_basis: str = "--rate",
    sample_seconds: float = 5.0,
    latest: LatestReader | None = None,
    timeout: float = 15.0,
    sleep: Callable[[float], None] = time.sleep,
) -> KafkaCatchUp:
    """The Kafka backlog of the checkpoint's sources and the catch-up forecast, restore estimate included."""
    batch, sources = committed_offsets(report)
    restore = report.estimate.seconds if report.estimate is not None else 0.0
    result = KafkaCatchUp(bootstrap, batch, restore, sample_seconds)
    if batch is None:
        result.problems.append("no committed batch: a restart reads from the query's startingOffsets")
        return result
    if not sources:
        result.problems.append(f"offsets/{batch} names no Kafka source offsets")
        return result
    reader = latest or admin_latest(bootstrap, timeout)
    topics: dict[str, set[int]] = {}
    for offsets in sources.values():
        for topic, partitions in offsets.items():
            topics.setdefault(topic, set()).update(partitions)
    wanted = {topic: sorted(partitions) for topic, partitions in topics.items()}
    try:
        first = reader(wanted)
        t0 = time.monotonic()
        if sample_seconds > 0:
            sleep(sample_seconds)
        second = reader(wanted) if sample_seconds > 0 else first
        elapsed = max(time.monotonic() - t0, 1e-9)
    except CheckpointError:
        raise
    except Exception as exc:  # any client failure becomes a clear error naming the broker
        raise CheckpointError(f"cannot read the latest offsets from {bootstrap}: {_reason(exc)}") from None
    for index, offsets in sorted(sources.items()):
        for topic, committed in sorted(offsets.items()):
            now = second.get(topic, {})
            backlog = {p: max(0, now.get(p, o) - o) for p, o in sorted(committed.items())}
            produced = sum(now.get(p, 0) - first.get(topic, {}).get(p, 0) for p in committed)
            produce = produced / elapsed if sample_seconds > 0 else None
            total = sum(backlog.values())
            eta = catch_up_seconds(total, read_rate, produce, restore)
            result.topics.append(
                TopicBacklog(
                    index,
                    topic,
                    dict(committed),
                    {p: now.get(p, 0) for p in committed},
                    backlog,
                    produce,
                    read_rate,
                    read_rate_basis if read_rate is not None else "unknown",
                    eta,
                )
            )
            missing = sorted(set(now) - set(committed))
            if missing:
                result.problems.append(
                    f"topic {topic}: partitions {missing} are not in the checkpoint (added since; read from startingOffsets)"
                )
    return result


def render_text(c: KafkaCatchUp) -> str:
    """The Kafka section for a terminal."""
    lines = [f"kafka ({c.bootstrap}), offsets of committed batch {c.committed_batch}:"]
    for t in c.topics:
        lines.append(
            f"  source {t.source_index} topic {t.topic}: backlog {t.total} records ({', '.join(f'p{p}={n}' for p, n in t.backlog.items())})"
        )
        produce = f"{t.produce_rate:.1f} records/s" if t.produce_rate is not None else "not sampled"
        read = f"{t.read_rate:.1f} records/s ({t.read_rate_basis})" if t.read_rate is not None else "unknown (give --rate or --history)"
        lines.append(f"    produced {produce} over {c.sampled_seconds:g} s; read rate {read}")
        if t.catch_up_seconds is not None:
            lines.append(
                f"    back at the head about {t.catch_up_seconds:.0f} s after a restart (restore {c.restore_seconds:.1f} s included)"
            )
        elif t.read_rate is not None:
            lines.append("    never back at the head at these rates: the topic grows as fast as the query reads")
    for problem in c.problems:
        lines.append(f"  problem: {problem}")
    return "\n".join(lines)
