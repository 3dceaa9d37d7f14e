"""Kafka incidents recorded from a real broker, a real producer and real Spark, judged against what was done.

``scripts/record_kafka_incidents.py`` deleted records a stopped query had not read (``failOnDataLoss`` false,
then true), added partitions under a running query, deleted and made its topic again, wrote faster than its
rate limit, and ran clean queries on a plain and on a transactional topic; each ``truth.json`` says what it
did and when. ``tests/unit/test_precision.py`` holds every recording to "every incident found, nothing false"
with the rest of the corpus; these tests hold the figures the signals carry to the recordings' own.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench import precision
from spark_state_observer.metrics import catalog
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.offline.kafka_local import new_cluster_id
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings
from spark_state_observer.signals.kafka_lag import UNREAD_GAPPED_TOPIC_SHARE, KafkaLagTracker, metric_samples
from spark_state_observer.signals.kafka_offsets import kafka_sources, parse_offsets, progress_time

INCIDENTS = precision.INCIDENTS
# each scenario recorded again with the older Sparks the package supports (record_kafka_incidents.py --python of
# their virtualenv, --suffix): the Kafka source reports the same offsets there, and the tests hold them alike
OLDER = ("_40", "_35")


def recordings(name: str) -> list[str]:
    """``name`` as recorded with PySpark 4.3 and with each older Spark (``OLDER``)."""
    return [name] + [name + suffix for suffix in OLDER]


def _truth(name: str) -> dict[str, Any]:
    with open(os.path.join(INCIDENTS, name, "truth.json")) as f:
        return json.load(f)


def _progress(name: str, run: str) -> list[dict[str, Any]]:
    return precision.progress_of(os.path.join(INCIDENTS, name, run))


def _offsets_and_read(progress: dict[str, Any]) -> tuple[int, int]:
    """What a batch's Kafka source spans in offsets, and the records it read, as Spark reported them."""
    ((_index, source),) = kafka_sources(progress)
    start, end = parse_offsets(source["startOffset"]), parse_offsets(source["endOffset"])
    ((topic, ends),) = end.items()
    return sum(o - start[topic][p] for p, o in ends.items()), int(source["numInputRows"])


def _anomalies(exposition: str, kind: str) -> float:
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == "spark_streaming_kafka_offset_anomalies_total" and sample.labels.get("kind") == kind:
                return sample.value
    raise AssertionError(f"no spark_streaming_kafka_offset_anomalies_total{{kind={kind!r}}}")


def _replay(paths: list[str]) -> tuple[list[SignalEvent], str]:
    signals: list[SignalEvent] = []
    result = replay(paths, Settings(http_enabled=False, history_enabled=False), on_signal=signals.append)
    return signals, result.exposition()


def _runs(name: str) -> list[str]:
    return [precision.recording(r) for r in precision.run_dirs(os.path.join(INCIDENTS, name))]


@pytest.mark.parametrize("name", recordings("kafka_records_deleted_tolerated"))
def test_records_deleted_while_the_query_was_down_are_offsets_skipped(name: str) -> None:
    """Spark plans the restarted run's batches from the checkpoint's offsets, so the offsets look continuous;
    the batches read fewer records than they span: the batch the first run had planned (re-run, all its
    records gone) and the next one (from there to the latest). A finding for each, with the records Spark did
    not read; the data-loss counter the critical alert reads counts them, and nothing else does."""
    truth = _truth(name)
    (restart,) = truth["restarts"]
    signals, exposition = _replay(_runs(name))
    skipped = [e for e in signals if e.kind == kinds.KAFKA_OFFSETS_SKIPPED]
    gaps = {p["batchId"]: o - r for p in _progress(name, "run2") for o, r in [_offsets_and_read(p)] if o != r}
    assert min(gaps) == restart["first_batch_id"]  # the records were gone when the restarted run read them
    assert skipped and all(e.run_id == restart["run_id"] and e.attributes["partitions"] == [0, 1, 2] for e in skipped)
    assert [e.attributes["records"] for e in skipped] == [gaps[b] for b in sorted(gaps)]
    assert sum(gaps.values()) >= truth["records_deleted_unread_at_least"]
    assert _anomalies(exposition, "skipped") == len(skipped)
    # every batch of the first run read every offset it spanned
    assert all(o == r for o, r in map(_offsets_and_read, [p for p in _progress(name, "run1") if p["sources"][0]["startOffset"]]))


@pytest.mark.parametrize("name", recordings("kafka_records_deleted_fails"))
def test_the_deleted_records_fail_the_query_with_failOnDataLoss_and_the_failure_names_them(name: str) -> None:  # noqa: N802
    truth = _truth(name)
    signals, _ = _replay(_runs(name))
    failed = [e for e in signals if e.kind == kinds.QUERY_TERMINATED and e.attributes.get("outcome") == "exception"]
    assert [e.run_id for e in failed] == [truth["run_facts"][1]["run_id"]]
    assert failed[0].attributes["exception_class"] == truth["failure"]["expected_class"]
    assert truth["failure"]["expected_root_cause"] in failed[0].attributes["root_cause"]


@pytest.mark.parametrize("name", recordings("kafka_steady_transactional"))
def test_a_transactional_topic_reads_fewer_records_than_offsets_and_nothing_is_lost(name: str) -> None:
    """An exactly-once producer leaves a commit marker after each transaction's records: an offset that is
    no record. Every batch of the recording reads fewer records than it spans; none of it is data loss."""
    batches = [p for p in _progress(name, "run1") if p.get("sources") and p["sources"][0].get("startOffset")]
    shares = [(o - r) / o for o, r in map(_offsets_and_read, batches) if o]
    assert len(shares) >= 20 and sum(s > 0 for s in shares) >= 0.9 * len(shares)  # the markers are there
    signals, exposition = _replay(_runs(name))
    assert not [e for e in signals if e.kind in kinds.KAFKA_DATA_LOSS_KINDS]
    assert _anomalies(exposition, "skipped") == 0.0


@pytest.mark.parametrize("kept", [0.2, 0.0])
def test_records_deleted_from_a_transactional_topic_still_count(tmp_path, kept: float) -> None:
    """The same recording with one batch's records read cut to ``kept`` of what Spark read (what retention
    does to a query behind it): above the topic's usual share of unread offsets and above half, so it counts,
    once, at that batch."""
    name = "kafka_steady_transactional"
    lines = _progress(name, "run1")
    index = len(lines) // 2
    varied = [dict(p) for p in lines]
    sources = [dict(s) for s in varied[index]["sources"]]
    offsets, read = _offsets_and_read(varied[index])
    sources[0]["numInputRows"] = int(read * kept)
    varied[index]["sources"] = sources
    assert (offsets - int(read * kept)) / offsets > UNREAD_GAPPED_TOPIC_SHARE
    path = tmp_path / "progress.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in varied))
    signals, exposition = _replay([str(path)])
    (skipped,) = [e for e in signals if e.kind == kinds.KAFKA_OFFSETS_SKIPPED]
    assert skipped.attributes["records"] == offsets - int(read * kept)
    assert skipped.timestamp == progress_time(varied[index])
    assert _anomalies(exposition, "skipped") == 1.0


def test_a_late_batch_or_a_backlog_below_one_batch_is_no_lag_growing(tmp_path) -> None:
    """A query that keeps up reads to the latest offsets (lag 0) at nearly every batch; one batch that found a
    backlog (it started late: a GC pause, a busy executor) ends a window of zeros with a rise, a positive slope
    over the window and a rising recent half. The clean rate-limited recording with one batch's latest offsets
    raised by what one more trigger interval writes: no lag_growing; the lag grown as long as the real
    incident's is one."""
    lines = _progress("kafka_steady_rate_limited", "run1")
    index = 100

    def with_backlog(p: dict[str, Any], extra: int) -> dict[str, Any]:
        varied = dict(p)
        sources = [dict(s) for s in p["sources"]]
        latest = parse_offsets(sources[0]["latestOffset"])
        sources[0]["latestOffset"] = {t: {str(q): o + extra for q, o in ps.items()} for t, ps in latest.items()}
        varied["sources"] = sources
        return varied

    def growing(varied: list[dict[str, Any]]) -> list[SignalEvent]:
        path = tmp_path / "progress.jsonl"
        path.write_text("".join(json.dumps(p) + "\n" for p in varied))
        signals, _ = _replay([str(path)])
        return [e for e in signals if e.kind == kinds.KAFKA_LAG_GROWING]

    assert not growing(lines)
    one_late = [with_backlog(p, 14) if i == index else p for i, p in enumerate(lines)]
    assert not growing(one_late)
    # a backlog that appears and stays below what a batch reads (a query at its rate limit, the producer's
    # bursts coming and going: 6-15 records behind for 80 s) is a step, not growth
    plateau = [with_backlog(p, 2 + (i - index) % 4) if index <= i < index + 40 else p for i, p in enumerate(lines)]
    assert not growing(plateau)
    # the same backlog, grown batch after batch for 80 s (40 batches) from that batch on: lag growing, once
    rising = [with_backlog(p, 14 * (i - index + 1)) if index <= i < index + 40 else p for i, p in enumerate(lines)]
    (found,) = growing(rising)
    assert progress_time(lines[index + 20]) <= found.timestamp <= progress_time(lines[index + 39])


def _growing_gauge(lines: list[dict[str, Any]]) -> str:
    """Per batch: the spark_streaming_kafka_lag_growing value, 'F' before it where lag_growing was found."""
    tracker, told = KafkaLagTracker(growth_window_seconds=Settings().growth_window_seconds), ""
    for p in lines:
        ((_index, source),) = kafka_sources(p)
        snap = tracker.update(source, progress_time(p) or 0.0)
        if snap is not None:
            told += "F" if any(f.kind == "lag_growing" for f in snap.findings) else ""
            (value,) = [v for spec, _labels, v in metric_samples(snap) if spec is catalog.KAFKA_LAG_GROWING]
            told += str(int(value))
    return told


@pytest.mark.parametrize(
    "name", recordings("kafka_lag_growing") + recordings("kafka_steady_rate_limited") + recordings("kafka_steady_transactional")
)
def test_the_lag_growing_gauge_is_1_from_the_signal_on_and_0_on_queries_that_keep_up(name: str) -> None:
    """SparkStreamingKafkaLagGrowing reads this gauge: 1 from the batch that found the growth for as long as the
    lag grows (to the recording's end here), 0 before it and on the steady recordings, where no signal comes."""
    told = _growing_gauge(_progress(name, "run1"))
    if _truth(name)["clean"]:
        assert set(told) == {"0"}, told
    else:
        assert re.fullmatch(r"0+F1+", told), told


def test_the_lag_growing_gauge_returns_to_0_when_the_backlog_is_read() -> None:
    """The steady rate-limited recording with a backlog grown for 80 s, then read (the latest offsets back to the
    recorded ones): the gauge is 1 from the lag_growing finding, and 0 again once the lag stops growing."""
    lines, index = _progress("kafka_steady_rate_limited", "run1"), 100

    def raised(p: dict[str, Any], extra: int) -> dict[str, Any]:
        sources = [dict(s) for s in p["sources"]]
        latest = parse_offsets(sources[0]["latestOffset"])
        sources[0]["latestOffset"] = {t: {str(q): o + extra for q, o in ps.items()} for t, ps in latest.items()}
        return {**p, "sources": sources}

    told = _growing_gauge([raised(p, 14 * (i - index + 1)) if index <= i < index + 40 else p for i, p in enumerate(lines)])
    assert re.fullmatch(r"0+F1+0+", told), told


@pytest.mark.parametrize("name", recordings("kafka_partitions_added"))
def test_partitions_added_under_a_running_query_are_named(name: str) -> None:
    """The finding names the partitions that appeared (its count of the topic's partitions used to overwrite
    them in the signal's attributes), once, after they were added."""
    truth = _truth(name)
    (finding,) = truth["kafka"]
    signals, exposition = _replay(_runs(name))
    (added,) = [e for e in signals if e.kind == kinds.KAFKA_PARTITIONS_ADDED]
    assert added.attributes["partitions"] == finding["partitions"] == [3, 4, 5]
    assert added.attributes["topic_partitions"] == 6.0 and added.timestamp >= truth["partitions_added_at"]
    samples = [
        s.value
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
        if s.name == "spark_streaming_kafka_partitions_added_total"
    ]
    assert samples == [3.0]
    assert not [e for e in signals if e.kind in kinds.KAFKA_DATA_LOSS_KINDS]  # new partitions are read from their start


def test_a_broker_cluster_id_never_reads_as_an_option() -> None:
    """The local broker's storage is formatted with ``-t <cluster id>``: an id starting with "-" (1 in 64 of
    random ones) made the tool fail and a recording or an end-to-end test with it."""
    ids = [new_cluster_id() for _ in range(5000)]
    assert not [i for i in ids if i.startswith("-")]
    assert len(set(ids)) == len(ids) and {len(i) for i in ids} == {22}


@pytest.mark.parametrize("name", recordings("kafka_topic_recreated_fails"))
def test_a_topic_made_again_under_a_query_with_failOnDataLoss_fails_with_the_reason_as_root_cause(name: str) -> None:  # noqa: N802
    """Spark's exception has no cause; its first line says only that data may have been lost, its "Reason:"
    line which partition's offsets went where. The root cause is both (it was the first line alone). Spark 3.5
    has no error class there: its first line is the reason ("Partition events-2's offset was changed from 416 to
    23, some data may have been missed."), thrown as a bare IllegalStateException."""
    truth = _truth(name)
    signals, _ = _replay(_runs(name))
    (failed,) = [e for e in signals if e.kind == kinds.QUERY_TERMINATED]
    cause = failed.attributes["root_cause"]
    assert failed.attributes["exception_class"] == truth["failure"]["expected_class"] == "source"
    assert truth["failure"]["expected_root_cause"] in cause
    if truth["spark_version"].startswith("3."):
        assert cause.startswith("java.lang.IllegalStateException: Partition events-")
    else:
        assert cause.startswith("[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] ")
    # the offsets it names: where the query had read to in the topic before it was deleted (at most its latest
    # then), and the new topic's, lower
    ((before, after),) = ((int(a), int(b)) for a, b in re.findall(r"changed from (\d+) to (\d+)", cause))
    assert after < before <= max(int(o) for o in truth["latest_before_delete"].values())


@pytest.mark.parametrize("name", recordings("kafka_checkpoint_restored_from_backup"))
def test_a_checkpoint_restored_from_a_backup_reads_again_what_the_run_before_read(name: str) -> None:
    """Run 3 starts on a copy of run 1's checkpoint: its first batch starts from run 1's end offsets, below
    where run 2 stopped. One rewound finding, at that batch, with what run 2 read since (read twice); its batch
    ids going back (run 3 repeats run 2's) make nothing else fire."""
    truth = _truth(name)
    signals, exposition = _replay(_runs(name))
    (rewound,) = [e for e in signals if e.kind == kinds.KAFKA_OFFSETS_REWOUND]
    run2, run3 = _progress(name, "run2"), _progress(name, "run3")
    ((_i, last2),) = kafka_sources(run2[-1])
    ((_j, first3),) = kafka_sources(run3[0])
    end2, start3 = parse_offsets(last2["endOffset"])["events"], parse_offsets(first3["startOffset"])["events"]
    assert rewound.run_id == truth["restarts"][1]["run_id"] and rewound.timestamp == progress_time(run3[0])
    assert rewound.attributes["records"] == sum(end2[p] - start3[p] for p in end2) > 0
    assert run3[0]["batchId"] <= run2[-1]["batchId"]  # the restored checkpoint's batch ids repeat run 2's
    assert _anomalies(exposition, "rewound") == 1.0
    incidents = {kinds.QUERY_RESTARTED, kinds.RESTORE, kinds.KAFKA_OFFSETS_REWOUND, *precision.INFORMATIONAL, kinds.QUERY_TERMINATED}
    assert {e.kind for e in signals} <= incidents
