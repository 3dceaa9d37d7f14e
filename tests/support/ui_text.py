"""The text a person sees of the state browser's markdown (the pages escape every text that comes from data,
``spark_state_observer.browser.fmt``), for tests that read Streamlit's elements rather than a browser's."""

from __future__ import annotations

import re


def as_shown(markdown: object) -> str:
    """The text a markdown source shows: code spans without their fences, backslash escapes resolved."""
    text = re.sub(r"(`+) (.*?) \1", lambda m: m.group(2), str(markdown))
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)
