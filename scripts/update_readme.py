"""Regenerate the README's generated sections (settings and metric reference) from the code."""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from observer.metrics.catalog import reference_table
from observer.settings import settings_table

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def replace(text: str, marker: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- BEGIN {marker} -->\n).*?(<!-- END {marker} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"README.md has no {marker} markers")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def main() -> int:
    with open(README) as f:
        text = f.read()
    text = replace(text, "SETTINGS", settings_table())
    text = replace(text, "METRICS", reference_table())
    with open(README, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
