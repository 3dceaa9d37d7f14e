"""Choosing a checkpoint on a page: one found under the roots, or a typed path checked against them.

A checkpoint names its query in its ``metadata`` file; the query's own checkpoint is preferred, and a
checkpoint of another query is shown only with a warning naming that query.
"""

from __future__ import annotations

import os

import pandas as pd
import streamlit as st

from spark_state_observer.browser import data, fmt
from spark_state_observer.browser.config import AppConfig
from spark_state_observer.browser.paths import PathRefused, resolve_under_roots
from spark_state_observer.model.bounded import loads
from spark_state_observer.offline.checkpoint.files import read_text

OTHER = "other path..."


def query_id_of(checkpoint: str) -> str | None:
    """The query id a checkpoint's ``metadata`` file names."""
    try:
        meta = loads(read_text(os.path.join(checkpoint, "metadata")).split("\n", 1)[0])
    except (OSError, ValueError, RecursionError):  # a FIFO or a huge file is refused by read_text, not waited on
        return None
    value = meta.get("id") if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def _name(queries: pd.DataFrame | None, query_id: str | None) -> str:
    if not query_id:
        return "an unknown query (no readable metadata)"
    row = queries[queries.query_id == query_id] if queries is not None else pd.DataFrame()
    name = row["name"].iloc[0] if len(row) else None
    known = f"{name} ({fmt.short_id(query_id)})" if isinstance(name, str) and name else query_id
    return known if len(row) else f"query {query_id}, which is not in this history"


def choose(config: AppConfig, key: str, query_id: str | None = None, queries: pd.DataFrame | None = None) -> str | None:
    """A checkpoint path inside the roots, or None after saying why there is none; warns when the
    checkpoint belongs to another query than ``query_id``."""
    if not config.checkpoint_roots:
        st.info(
            "No checkpoint root is configured. Start the browser with `--checkpoint-root DIR` (repeatable) "
            "to inspect checkpoints under DIR."
        )
        return None
    candidates = data.checkpoints_under(config.checkpoint_roots)
    owners = {c: query_id_of(c) for c in candidates}
    mine = [c for c in candidates if query_id and owners[c] == query_id]
    options = candidates + [OTHER]
    if st.session_state.get(f"{key}_pick") not in options:
        st.session_state[f"{key}_pick"] = mine[0] if mine else options[0]
    picked = st.selectbox(
        "Checkpoint",
        options,
        key=f"{key}_pick",
        help="checkpoints found under the configured roots",
        format_func=lambda c: c if c == OTHER else f"{c} ({_name(queries, owners.get(c))})",
    )
    typed = (
        st.text_input("Checkpoint path", key=f"{key}_path", placeholder="a path under the checkpoint roots") if picked == OTHER else picked
    )
    if not typed:
        if not candidates:
            st.info(f"No streaming checkpoint found under {', '.join(fmt.code(r) for r in config.checkpoint_roots)}; type a path.")
        return None
    try:
        path = resolve_under_roots(typed, config.checkpoint_roots)
    except PathRefused as exc:
        st.error(fmt.md(exc))
        return None
    owner = query_id_of(path)
    if query_id and owner != query_id:
        hint = " None of the checkpoints under the roots belongs to it." if not mine else ""
        st.warning(
            f"This checkpoint belongs to {fmt.md(_name(queries, owner))}, not to the query shown "
            f"({fmt.md(_name(queries, query_id))}): its figures are not this query's.{hint}"
        )
    return path
