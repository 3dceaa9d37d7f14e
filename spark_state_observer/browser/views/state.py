"""State contents: what the stores hold, through Spark's state readers (``observer.state_reader``).

Each read loads the stores from the checkpoint in Spark tasks, so nothing is read until asked, and
results are cached per checkpoint version.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from spark_state_observer.browser import checkpoints, data, fmt
from spark_state_observer.browser.context import Context
from spark_state_observer.offline import state_reader


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
    version = data.checkpoint_version(path)
    try:
        ops = data.state_operators(path, version)
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
        st.code(data.state_schema(path, version, operator_id, store), language=None)
        rows = data.state_rows(path, version, operator_id, store)
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
    sample = data.state_sample(path, version, operator_id, store, key, partition, int(page))
    if not sample:
        st.info("No rows match." if key or partition is not None or page else "The store is empty.")
        return
    st.dataframe(
        pd.DataFrame([{"partition": r["partition_id"], "key": str(r["key"]), "value": str(r["value"])} for r in sample]),
        hide_index=True,
        width="stretch",
    )
    st.caption(f"rows {page * data.STATE_PAGE_SIZE + 1}-{page * data.STATE_PAGE_SIZE + len(sample)}")
