"""State contents: what the stores hold, through Spark's state readers (``observer.state_reader``).

Each read loads the stores from the checkpoint in Spark tasks, so nothing is read until asked, and
results are cached per checkpoint version.
"""

from __future__ import annotations

import os

import pandas as pd
import streamlit as st

from observer.offline import state_reader
from streamlit_app import checkpoints, fmt, spark
from streamlit_app.context import Context

PAGE_SIZE = 25


@st.cache_data(max_entries=32, show_spinner="Reading state metadata...")
def _operators(path: str, version: float) -> list[dict]:
    return state_reader.operators(spark.session(), path)


@st.cache_data(max_entries=32, show_spinner="Reading the store's schema...")
def _schema(path: str, version: float, operator_id: int, store: str) -> str:
    return state_reader.schema(spark.session(), path, operator_id, store)


@st.cache_data(max_entries=32, show_spinner="Counting rows per partition...")
def _rows(path: str, version: float, operator_id: int, store: str) -> dict[int, int]:
    return state_reader.rows_per_partition(spark.session(), path, operator_id, store)


@st.cache_data(max_entries=64, show_spinner="Reading a page of state rows...")
def _sample(path: str, version: float, operator_id: int, store: str, key: str, partition: int | None, page: int) -> list[dict]:
    return state_reader.sample(
        spark.session(), path, operator_id, store, key_contains=key or None, partition=partition, offset=page * PAGE_SIZE, limit=PAGE_SIZE
    )


def _version(path: str) -> float:
    """Changes when the query commits a batch, so cached reads follow the checkpoint."""
    commits = os.path.join(path, "commits")
    return os.path.getmtime(commits) if os.path.isdir(commits) else 0.0


def render(ctx: Context) -> None:
    st.header("State contents")
    st.caption(
        "Read through Spark's `state-metadata` and `statestore` sources: each read loads the stores from the "
        "checkpoint in batch tasks (a restore of its own), so it runs only when you ask."
    )
    path = checkpoints.choose(ctx.config, "state")
    if path is None:
        return
    if not st.toggle("Read state with Spark", key="state_enabled", help="starts a local Spark session on first use"):
        return
    version = _version(path)
    try:
        ops = _operators(path, version)
    except state_reader.StateReaderUnavailable as exc:
        st.warning(fmt.md(exc))
        return
    except Exception as exc:  # Spark's AnalysisException and friends: a message, not a traceback
        st.error(f"Spark could not read state metadata of {fmt.code(path)}: {fmt.md((str(exc).splitlines() or [''])[0])}")
        return
    if not ops:
        st.info("This checkpoint has no state operators.")
        return
    st.dataframe(pd.DataFrame(ops), hide_index=True, width="stretch")
    choices = sorted({(int(o["operatorId"]), o["stateStoreName"]) for o in ops})
    operator_id, store = st.selectbox(
        "Operator / store", choices, format_func=lambda c: f"operator {c[0]}, store {c[1]}", key="state_store"
    )
    try:
        st.code(_schema(path, version, operator_id, store), language=None)
        rows = _rows(path, version, operator_id, store)
    except Exception as exc:
        st.error(f"Spark could not read store {operator_id}/{fmt.md(store)}: {fmt.md((str(exc).splitlines() or [''])[0])}")
        return
    st.bar_chart(pd.DataFrame({"partition": list(rows), "rows": list(rows.values())}).set_index("partition"), height=180)
    st.caption(f"{sum(rows.values()):,} rows in {len(rows)} partitions")
    left, mid, right = st.columns([3, 1, 1])
    key = left.text_input("Key contains", key="state_key", help="matched against the key as JSON text")
    partition = mid.selectbox(
        "Partition", [None, *sorted(rows)], format_func=lambda p: "all" if p is None else str(p), key="state_partition"
    )
    page = right.number_input("Page", min_value=1, value=1, step=1, key="state_page") - 1
    sample = _sample(path, version, operator_id, store, key, partition, int(page))
    if not sample:
        st.info("No rows match." if key or partition is not None or page else "The store is empty.")
        return
    st.dataframe(
        pd.DataFrame([{"partition": r["partition_id"], "key": str(r["key"]), "value": str(r["value"])} for r in sample]),
        hide_index=True,
        width="stretch",
    )
    st.caption(f"rows {page * PAGE_SIZE + 1}-{page * PAGE_SIZE + len(sample)}")
