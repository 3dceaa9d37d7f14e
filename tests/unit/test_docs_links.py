"""Relative links in the README, CONTRIBUTING and docs/ resolve, and their anchors name a heading that exists.

The README sends readers to docs/ pages and anchors for everything but the basics, so a moved section or a
renamed heading must fail here rather than leave a dead link. The pages are parsed by a real CommonMark +
GFM parser (markdown-it-py, a test extra), so links in code, in tables and in images count as a reader
sees them. External links (http, https, mailto) are not fetched.
"""

from __future__ import annotations

import glob
import os
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from conftest import REQUIRE_REAL, ROOT


@cache
def markdown() -> Any:
    if not REQUIRE_REAL:
        pytest.importorskip("markdown_it")
    from markdown_it import MarkdownIt

    return MarkdownIt("gfm-like")


def pages(root: str) -> list[str]:
    """The Markdown files whose links are checked."""
    found = [os.path.join(root, name) for name in ("README.md", "CONTRIBUTING.md") if os.path.exists(os.path.join(root, name))]
    return found + sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: lower case, punctuation but hyphens and underscores dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def parse(path: str) -> tuple[list[str], set[str]]:
    """The link and image targets of a Markdown file, and the anchors of its headings (a repeated one gets -1, -2, ...)."""
    with open(path, encoding="utf-8") as f:
        tokens = markdown().parse(f.read())
    targets: list[str] = []
    anchors: set[str] = set()
    seen: Counter[str] = Counter()
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            base = slug("".join(child.content for child in tokens[i + 1].children or [] if child.type in ("text", "code_inline")))
            anchors.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
            seen[base] += 1
        for child in token.children or []:
            if child.type == "link_open":
                targets.append(str(child.attrs["href"]))
            elif child.type == "image":
                targets.append(str(child.attrs["src"]))
    return targets, anchors


def broken_links(path: str) -> list[str]:
    """The relative links of one Markdown file whose target file or anchor does not exist."""
    problems = []
    for target in parse(path)[0]:
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue
        file_part, _, fragment = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(resolved):
            problems.append(f"{target}: no such file")
        elif fragment and (not resolved.endswith(".md") or fragment not in parse(resolved)[1]):
            problems.append(f"{target}: no heading with anchor #{fragment}")
    return problems


def test_every_relative_link_and_anchor_resolves() -> None:
    checked = pages(ROOT)
    assert os.path.join(ROOT, "README.md") in checked and len(checked) > 10
    problems = {os.path.relpath(p, ROOT): broken_links(p) for p in checked}
    assert not {page: found for page, found in problems.items() if found}


def test_a_missing_file_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Usage, `run` and more\n\n## Usage, `run` and more\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Title\n\n[ok](docs/a.md#usage-run-and-more) [ok](docs/a.md#usage-run-and-more-1) [ok](#title)\n"
        "[gone](docs/b.md) [bad anchor](docs/a.md#usage) `[in code](nowhere.md)` [web](https://example.com/x)\n\n"
        "```\n[in a fence](nowhere.md)\n```\n\n| a | b |\n|---|---|\n| ![picture](docs/missing.png) | [row](docs/a.md#a-page) |\n"
    )
    assert broken_links(str(readme)) == [
        "docs/b.md: no such file",
        "docs/a.md#usage: no heading with anchor #usage",
        "docs/missing.png: no such file",
    ]
