"""The RocksDB capacity what-if and per-executor view, shared by the Checkpoint and Placement pages (issue 31).

The history keeps no Spark configuration, so the page asks for the settings that matter (``KEY=VALUE``
lines, as ``spark-state-observer size --conf`` takes them) and starts from Spark's defaults; the shape
(partitions, operators, stores, executors) comes from the checkpoint or the placement the page shows.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from spark_state_observer.browser import fmt
from spark_state_observer.model.capacity import PROVIDER_CONF, ROCKSDB_PROVIDER, StateConf, Workload, estimate, instance_bytes, read_conf
from spark_state_observer.offline.size_advice import rocksdb_advice

CONF_HELP = (
    "One KEY=VALUE per line, e.g. spark.executor.memoryOverhead=2g or "
    "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage=true; empty: Spark's defaults."
)


def conf_input(key: str) -> StateConf:
    """The application's settings as typed (a line that is not KEY=VALUE is said, not fatal)."""
    text = st.text_area("Spark configuration (what-if)", key=f"{key}_conf", help=CONF_HELP, height=90)
    conf = {PROVIDER_CONF: ROCKSDB_PROVIDER}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if not line.strip():
            continue
        if not sep or not k.strip():
            st.warning(f"Not KEY=VALUE, ignored: {fmt.code(line[:80])}")
            continue
        conf[k.strip()] = v.strip()
    return read_conf(conf)


def what_if(key: str, partitions: int, operators: int, stores: int, executors: int, rows: int | None, bytes_per_row: float | None) -> None:
    """Inputs seeded with the page's query, and the estimate as ``size`` prints it."""
    st.subheader("RocksDB capacity what-if")
    cols = st.columns(4)
    p = int(cols[0].number_input("partitions", min_value=0, value=max(partitions, 0), key=f"{key}_partitions"))
    o = int(cols[1].number_input("operators", min_value=0, value=max(operators, 0), key=f"{key}_operators"))
    s = int(cols[2].number_input("stores per operator", min_value=1, value=max(stores, 1), key=f"{key}_stores"))
    e = int(cols[3].number_input("executors", min_value=1, value=max(executors, 1), key=f"{key}_executors"))
    state = conf_input(key)
    est = estimate(state, Workload(p, o, s, e, rows, bytes_per_row))
    cols = st.columns(4)
    cols[0].metric("instances per executor", f"{est.instances_per_executor:,}")
    cols[1].metric("memory per executor", fmt.size(est.memory_bound_bytes_per_executor if est.bounded else est.memory_bytes_per_executor))
    cols[2].metric("expected with this data", fmt.size(est.memory_expected_bytes_per_executor))
    share = est.budget_share
    expected = est.memory_expected_bytes_per_executor / est.budget_bytes if est.budget_bytes > 0 else None
    cols[3].metric(
        "budget (memoryOverhead)",
        fmt.size(est.budget_bytes),
        f"{expected:.0%} expected, {share:.0%} at the ceiling" if share is not None and expected is not None else None,
        delta_color="off",
        help="the expected use (what this data fills) and the ceiling (every write buffer and cache full) as shares of the budget",
    )
    if state.provider == "rocksdb":  # what to set, in words, as `spark-state-observer size` says it
        st.markdown("\n".join(f"- {fmt.md(line)}" for line in rocksdb_advice(est, state)))
    st.caption(
        "Per instance: write buffers x their number (RocksDB's 64 MiB x 2 where Spark passes -1) + block cache (8 MiB) + index and "
        "filters; bounded mode caps the executor at maxMemoryUsageMB. Formula and sources: docs/capacity.md."
    )
    for note in est.notes:
        st.warning(f"Estimate marked as assumed: {fmt.md(note)}")


def per_executor(latest: pd.DataFrame, stores_of: dict[int, int], state: StateConf) -> pd.DataFrame:
    """Per executor in the newest placed batch: store instances, Spark's reported memory, the ceiling estimate and its budget share."""
    rows = []
    for executor, held in latest.groupby("executor"):
        instances = int(sum(stores_of.get(int(op), 1) for op in held.op_index))
        ceiling = instances * instance_bytes(state, None, None)[0]
        held_bytes = min(ceiling, state.max_memory_bytes) if state.bounded else ceiling
        reported = held.memory_bytes.dropna()
        rows.append(
            {
                "executor": str(executor),
                "instances": instances,
                "reported memory": fmt.size(float(reported.sum())) if len(reported) else "-",
                "estimate (ceiling)": fmt.size(held_bytes),
                "share of budget": f"{held_bytes / state.overhead_bytes:.0%}",
            }
        )
    return pd.DataFrame(rows)
