"""The verdict as the pages show it: a coloured sentence with its start time and runbook link, the root
cause first and the full trace folded away."""

from __future__ import annotations

import streamlit as st

from spark_state_observer.browser import fmt
from spark_state_observer.browser.context import Context
from spark_state_observer.browser.verdict import Verdict


def line(v: Verdict, runbook_url: str) -> str:
    """Markdown: the sentence, when it started, and the runbook link."""
    parts = [f"**{fmt.md(v.text)}**"]
    if v.since is not None and v.kind not in ("healthy", "stopped"):
        parts.append(f"since {fmt.when(v.since)}")
    link = v.runbook(runbook_url)
    if link:
        parts.append(f"[runbook]({link})")
    return " · ".join(parts)


def show(ctx: Context, found: list[Verdict]) -> None:
    """The most severe verdict as a banner, the others below it, the trace in an expander."""
    if not found:
        return
    top = found[0]
    box = {"error": st.error, "warning": st.warning, "info": st.info}.get(top.level, st.success)
    box(line(top, ctx.config.runbook_url), icon=top.icon)
    for other in found[1:]:
        st.markdown(f"{other.icon} " + line(other, ctx.config.runbook_url))
    traced = next((v for v in found if v.trace), None)
    if traced is not None:
        with st.expander(f"Full exception of run {fmt.md(fmt.short_id(traced.run_id))}"):
            st.code(traced.trace, language=None)
