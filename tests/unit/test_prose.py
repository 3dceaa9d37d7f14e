"""README, CONTRIBUTING and docs/ are written in plain sentences: short, one idea each.

A sentence here is prose outside code blocks, tables, headings and HTML, split after a full stop, a question
or an exclamation mark that starts the next sentence. Inline code and link targets count as one word, since a
reader takes them in at a glance. The limits are the project's: a mean under 20 words a page, none over 60."""

from __future__ import annotations

import glob
import os
import re
import statistics

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEAN_WORDS = 20
MAX_WORDS = 60
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"'*\[0-9])")
_LIST_ITEM = re.compile(r"^([-*+]|\d+\.)\s+")


def pages() -> list[str]:
    found = [os.path.join(ROOT, name) for name in ("README.md", "CONTRIBUTING.md", os.path.join("tests", "README.md"))]
    found += sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return [path for path in found if os.path.exists(path)]


def sentences(text: str) -> list[str]:
    """The prose sentences of a Markdown text, each with inline code and link targets folded to one word."""
    found: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            joined = re.sub(r"\]\([^)]*\)", "]", re.sub(r"`[^`]*`", "X", " ".join(paragraph)))
            found.extend(s for s in _SENTENCE_END.split(joined) if s.split())
            paragraph.clear()

    in_code = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            in_code = not in_code
            continue
        if in_code:
            continue
        if not stripped or stripped.startswith(("|", "#", "<")) or line.startswith("    "):
            flush()
            continue
        if _LIST_ITEM.match(stripped):
            flush()
            stripped = _LIST_ITEM.sub("", stripped)
        paragraph.append(stripped)
    flush()
    return found


def test_the_splitter_counts_prose_and_skips_code_and_tables() -> None:
    text = (
        "# Title\n\nOne two three. Four `a long code span` six.\n\n| a | b |\n|---|---|\n\n```sh\nnot prose here at all\n```\n- An item.\n"
    )
    assert [len(s.split()) for s in sentences(text)] == [3, 3, 2]


@pytest.mark.parametrize("path", pages(), ids=lambda p: os.path.relpath(p, ROOT))
def test_a_page_is_written_in_plain_sentences(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        found = sentences(f.read())
    if not found:
        return
    lengths = [len(s.split()) for s in found]
    long = [s[:120] + "..." for s in found if len(s.split()) > MAX_WORDS]
    assert not long, f"sentences over {MAX_WORDS} words: split them: {long}"
    assert statistics.mean(lengths) < MEAN_WORDS, f"mean sentence {statistics.mean(lengths):.1f} words (goal under {MEAN_WORDS})"
