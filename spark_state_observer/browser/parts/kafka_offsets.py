"""The drilldown's Kafka offsets: where the newest batch read each partition from and to, how far the topic's
latest was, and how the newest restart came back (the backlog it found and when it caught up).

Lag charts say how far behind a query is; after a restart or a topic's new partitions the on-call engineer
also asks which partitions are behind and by how much, which only the offsets tell.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from spark_state_observer.browser import fmt
from spark_state_observer.browser.kafka_restart import KafkaRestart, describe
from spark_state_observer.signals.kafka_offsets import kafka_sources, parse_offsets

MAX_ROWS = 500  # partitions shown: a topic can have thousands


def offsets_table(progress: Mapping[str, Any] | None) -> pd.DataFrame:
    """One row per source, topic and partition of a batch: start, end, latest offset and records behind."""
    rows = []
    for index, source in kafka_sources(progress):
        start, end, latest = (parse_offsets(source.get(key)) for key in ("startOffset", "endOffset", "latestOffset"))
        for topic in sorted(set(end) | set(latest)):
            for partition in sorted(set(end.get(topic, {})) | set(latest.get(topic, {}))):
                e, la = end.get(topic, {}).get(partition), latest.get(topic, {}).get(partition)
                rows.append(
                    {
                        "source": index,
                        "topic": topic,
                        "partition": partition,
                        "start": start.get(topic, {}).get(partition),
                        "end": e,
                        "latest": la,
                        "behind": max(la - (e or 0), 0) if la is not None else None,
                    }
                )
                if len(rows) >= MAX_ROWS:
                    return pd.DataFrame(rows)
    return pd.DataFrame(rows)


def show(progress: list[dict[str, Any]], restart: KafkaRestart | None) -> None:
    """The section, only for a query with a Kafka source."""
    newest = progress[-1] if progress else None
    table = offsets_table(newest)
    if table.empty:
        return
    st.subheader("Kafka offsets")
    caption = f"Newest batch {fmt.md(newest.get('batchId') if newest else '-')}: where each partition was read from and to, and the topic's latest."
    if restart is not None:
        caption += " Newest restart: " + fmt.md(describe(restart).removeprefix("; ")) + "."
    st.caption(caption)
    shown = table.copy()
    for column in ("start", "end", "latest", "behind"):
        shown[column] = shown[column].map(fmt.number)
    st.dataframe(shown, hide_index=True, width="stretch")
