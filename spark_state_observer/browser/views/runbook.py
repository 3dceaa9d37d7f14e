"""Runbook: the alerts' runbook rendered as one page, each section under a heading whose anchor is the alert's name
in lower case (the alerts' ``runbook_url`` and the verdicts link to it). ``?section=ANCHOR`` (what the verdicts
link) or ``#ANCHOR`` scrolls to the section.

The text is the package's own (``spark_state_observer.mixin.export.runbook``), rendered as Markdown with HTML off;
the anchors are given explicitly to ``st.header``, so they do not depend on how Streamlit slugs a heading.
"""

from __future__ import annotations

import json
import re

import streamlit as st
import streamlit.components.v1 as components

from spark_state_observer.browser.context import Context
from spark_state_observer.mixin.export import runbook
from spark_state_observer.signals.alerts import by_name

SECTION_PARAM = "section"
ANCHOR = re.compile(r"[a-z0-9-]{1,80}")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading (the verdicts' and the alerts' anchors): lower case, punctuation dropped,
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections(text: str) -> tuple[str, list[tuple[str, str, str]]]:
    """The runbook's introduction and its ``## `` sections as (anchor, heading, body)."""
    intro: list[str] = []
    found: list[tuple[str, str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
            found.append((slug(heading), heading, []))
        elif found:
            found[-1][2].append(line)
        elif not line.startswith("# "):
            intro.append(line)
    return "\n".join(intro).strip(), [(a, h, "\n".join(body).strip()) for a, h, body in found]


def _scroll_to(anchor: str) -> None:
    """Scroll the page to the element with id ``anchor`` (or, when empty, the address's ``#anchor``) once Streamlit
    has drawn it: the component runs in a same-origin frame and retries for a few seconds while the page is drawn."""
    components.html(
        "<script>(function(){var p=window.parent,id="
        + json.dumps(anchor)
        + ",n=0;if(!id){try{id=decodeURIComponent(p.location.hash.slice(1));}catch(x){return;}}"
        "if(!id)return;function go(){var e=p.document.getElementById(id);"
        "if(e){e.scrollIntoView({block:'start'});return;}if(++n<100)setTimeout(go,100);}go();})();</script>",
        height=0,
    )


def render(ctx: Context) -> None:
    st.header("Runbook", anchor="runbook")
    intro, parts = sections(runbook())
    st.markdown(intro)
    declared = by_name()
    for anchor, heading, body in parts:
        spec = declared.get(heading)
        st.subheader(heading, anchor=anchor)
        if spec is not None:
            st.caption(f"severity {spec.severity}, for {spec.for_} by default")
        st.markdown(body)
    wanted = st.query_params.get(SECTION_PARAM)
    known = bool(wanted and ANCHOR.fullmatch(wanted) and any(anchor == wanted for anchor, _, _ in parts))
    if wanted and not known:
        st.warning("No runbook section by that name; the sections are listed at the top.")
    _scroll_to(wanted if known and wanted else "")
