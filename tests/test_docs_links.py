"""Relative links in the README, CONTRIBUTING and docs/ resolve, and their anchors name a heading that exists.

The README sends readers to docs/ pages and anchors for everything but the basics, so a moved section or a
renamed heading must fail here rather than leave a dead link. External links (http, https, mailto) are not
fetched.
"""

from __future__ import annotations

import glob
import os
import re
from collections import Counter
from pathlib import Path

from conftest import ROOT

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def pages(root: str) -> list[str]:
    """The Markdown files whose links are checked."""
    found = [os.path.join(root, name) for name in ("README.md", "CONTRIBUTING.md") if os.path.exists(os.path.join(root, name))]
    return found + sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks: a link-like text in a code sample is no link."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens and underscores dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: str) -> set[str]:
    """Every anchor GitHub gives the headings of a Markdown file (a repeated heading gets -1, -2, ...)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    seen: Counter[str] = Counter()
    result = set()
    for line in prose_lines(text):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(1))
            result.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
            seen[base] += 1
    return result


def broken_links(path: str) -> list[str]:
    """The relative links of one Markdown file whose target file or anchor does not exist."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    problems = []
    for line in prose_lines(text):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            target = match.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue
            file_part, _, fragment = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(resolved):
                problems.append(f"{target}: no such file")
            elif fragment and (not resolved.endswith(".md") or fragment not in anchors(resolved)):
                problems.append(f"{target}: no heading with anchor #{fragment}")
    return problems


def test_every_relative_link_and_anchor_resolves() -> None:
    checked = pages(ROOT)
    assert os.path.join(ROOT, "README.md") in checked and len(checked) > 10
    problems = {os.path.relpath(p, ROOT): broken_links(p) for p in checked}
    assert not {page: found for page, found in problems.items() if found}


def test_a_missing_file_or_anchor_is_reported(tmp_path: Path) -> None:
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "docs"))
    with open(os.path.join(root, "docs", "a.md"), "w") as f:
        f.write("# A page\n\n## Usage, `run` and more\n\n## Usage, `run` and more\n")
    with open(os.path.join(root, "README.md"), "w") as f:
        f.write(
            "# Title\n\n[ok](docs/a.md#usage-run-and-more) [ok](docs/a.md#usage-run-and-more-1) [ok](#title)\n"
            "[gone](docs/b.md) [bad anchor](docs/a.md#usage) `[in code](nowhere.md)` [web](https://example.com/x)\n"
            "```\n[in a fence](nowhere.md)\n```\n![picture](docs/missing.png)\n"
        )
    assert broken_links(os.path.join(root, "README.md")) == [
        "docs/b.md: no such file",
        "docs/a.md#usage: no heading with anchor #usage",
        "docs/missing.png: no such file",
    ]
