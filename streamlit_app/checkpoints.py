"""Choosing a checkpoint on a page: one found under the roots, or a typed path checked against them."""

from __future__ import annotations

import json
import os

import streamlit as st

from observer.offline.checkpoint.files import read_text
from streamlit_app.config import AppConfig
from streamlit_app.paths import PathRefused, list_checkpoints, resolve_under_roots


@st.cache_data(ttl=30, show_spinner=False)
def found(roots: tuple[str, ...]) -> list[str]:
    return list_checkpoints(roots)


def query_id_of(checkpoint: str) -> str | None:
    """The query id a checkpoint's ``metadata`` file names."""
    try:
        meta = json.loads(read_text(os.path.join(checkpoint, "metadata")).split("\n", 1)[0])
    except (OSError, ValueError, RecursionError):  # a FIFO or a huge file is refused by read_text, not waited on
        return None
    value = meta.get("id") if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def choose(config: AppConfig, key: str, query_id: str | None = None) -> str | None:
    """A checkpoint path inside the roots, or None after saying why there is none."""
    if not config.checkpoint_roots:
        st.info("No checkpoint root is configured. Start the browser with `--checkpoint-root DIR` (repeatable) "
                "to inspect checkpoints under DIR.")
        return None
    candidates = found(config.checkpoint_roots)
    preferred = next((c for c in candidates if query_id and query_id_of(c) == query_id), None)
    options = candidates + ["other path..."]
    picked = st.selectbox("Checkpoint", options, index=options.index(preferred) if preferred else 0, key=f"{key}_pick",
                          help="checkpoints found under the configured roots")
    typed = st.text_input("Checkpoint path", key=f"{key}_path", placeholder="a path under the checkpoint roots") \
        if picked == "other path..." else picked
    if not typed:
        if not candidates:
            st.info(f"No streaming checkpoint found under {', '.join(config.checkpoint_roots)}; type a path.")
        return None
    try:
        return resolve_under_roots(typed, config.checkpoint_roots)
    except PathRefused as exc:
        st.error(str(exc))
        return None
