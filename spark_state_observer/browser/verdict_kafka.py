"""The Kafka verdicts: input lost or read twice, and a lag that keeps growing, from the Kafka signals.

They read the same facts as the other rules (``spark_state_observer.browser.verdict``), which orders them by severity.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from spark_state_observer.browser import fmt
from spark_state_observer.browser.verdict_facts import Facts, Verdict, run_outcome, say
from spark_state_observer.model import signal_kinds as k
from spark_state_observer.signals.kafka_offsets import kafka_sources, lag_records, parse_offsets, topic_totals

# the Kafka findings that say input was lost or read twice, and how the verdict tells each
KAFKA_DATA_LOSS = {
    k.KAFKA_OFFSETS_SKIPPED: "Kafka input lost: records not read",
    k.KAFKA_LATEST_WENT_BACK: "Kafka input lost: latest offsets went back",
    k.KAFKA_OFFSETS_REWOUND: "Kafka input read twice: offsets rewound",
}


def kafka_lag_of(progress: Mapping[str, Any] | None) -> dict[str, float]:
    """Records behind the latest per topic at a batch (``latestOffset`` minus ``endOffset`` over its Kafka sources'
    partitions), as the observer's lag gauges read it; empty without a Kafka source or offsets."""
    out: dict[str, float] = {}
    for _, source in kafka_sources(progress):
        totals = topic_totals(lag_records(parse_offsets(source.get("endOffset")), parse_offsets(source.get("latestOffset"))))
        for topic, lag in totals.items():
            out[topic] = out.get(topic, 0.0) + float(lag)
    return out


def kafka_lag(f: Facts) -> Verdict | None:
    """The newest ``kafka_lag_growing`` of the running newest run, while its newest batch is still at least as far
    behind as when the lag began to grow (SparkStreamingKafkaLagGrowing's state); a lag read back below it is over."""
    if not f.runs or run_outcome(f.runs[-1]) is not None:
        return None
    newest_run = f.runs[-1]["run_id"]
    found = [e for e in f.events if e["kind"] == k.KAFKA_LAG_GROWING and e.get("run_id") == newest_run]
    if not found:
        return None
    signal = found[-1]
    a = signal.get("attributes") or {}
    topic, then = a.get("topic"), a.get("lag_records")
    now = f.kafka_lag.get(topic) if isinstance(topic, str) else None
    if now is None or not isinstance(then, (int, float)) or not math.isfinite(then) or now < then:
        return None
    rate = a.get("records_per_second")
    growing = f", growing {float(rate):,.1f} records/s then" if isinstance(rate, (int, float)) and math.isfinite(rate) else ""
    text = say("kafka_lag", topic=topic, records=fmt.number(now), then=fmt.number(then), since=fmt.clock(signal["ts"]), rate=growing)
    return Verdict("kafka_lag", text, signal["ts"], run_id=newest_run)


def kafka_data_loss(f: Facts) -> Verdict | None:
    """The newest Kafka finding of lost (or twice read) input in the query's newest run: the records are gone
    whatever the query does next, so the verdict stays for as long as that run is the newest."""
    newest_run = f.runs[-1]["run_id"] if f.runs else None
    found = [e for e in f.events if e["kind"] in KAFKA_DATA_LOSS and (newest_run is None or e.get("run_id") == newest_run)]
    if not found:
        return None
    signal = found[-1]
    a = signal.get("attributes") or {}
    where = f"{a.get('topic')}" + (f" partitions {', '.join(map(str, a['partitions']))}" if a.get("partitions") else "")
    text = say("kafka_data_loss", finding=KAFKA_DATA_LOSS[signal["kind"]], where=where, at=fmt.clock(signal["ts"]))
    if signal["kind"] == k.KAFKA_OFFSETS_SKIPPED and a.get("records") is not None:
        text += f", {fmt.number(a['records'])} records (deleted before the query read them)"
    elif signal["kind"] == k.KAFKA_OFFSETS_REWOUND and a.get("records") is not None:
        text += f", {fmt.number(a['records'])} records (an older checkpoint, or offsets set back)"
    elif signal["kind"] == k.KAFKA_LATEST_WENT_BACK:
        text += " (the topic deleted and made again, or truncated)"
    if len(found) > 1:
        text += f"; {len(found)} such findings in this run"
    return Verdict("kafka_data_loss", text, found[0]["ts"], run_id=signal.get("run_id"))
