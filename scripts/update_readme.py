"""Regenerate the generated parts of the user documentation from the code.

The full settings and metric tables (47 settings, 175 metrics: over 220 lines) would take half of a README
meant to stay within ~400 lines, so they live in ``docs/reference.md``; the README gets a short summary of
each (settings by area, metrics by what a series is counted per), also generated, so neither can go stale.
``make check-generated`` and ``tests/unit/test_registry.py`` fail when a committed copy differs from ``render``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from spark_state_observer.metrics.catalog import CATALOG, SCOPE_LABELS, reference_table
from spark_state_observer.settings import ENV_PREFIX, Settings, settings_table

ROOT = os.path.join(os.path.dirname(__file__), "..")
README = os.path.join(ROOT, "README.md")
REFERENCE = os.path.join(ROOT, "docs", "reference.md")

# Each setting belongs to exactly one area of the README's summary: a name listed, or one starting with a
# prefix ending in "_". A new setting outside every area stops the generator (add it to an area here).
SETTING_AREAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("identity", ("labels",)),
    ("the `/metrics` endpoint", ("http_", "tls_", "basic_auth_")),
    ("Pushgateway", ("pushgateway_", "push_", "stop_flush_seconds")),
    ("history", ("history_",)),
    ("capture and memory bounds", ("queue_size", "fast_path", "max_queries", "partition_top_k")),
    (
        "signals",
        (
            "trigger_interval_seconds",
            "evaluate_seconds",
            "stall_",
            "lost_",
            "crash_loop_",
            "query_status_",
            "growth_",
            "state_",
            "restore_",
            "falling_behind_",
            "late_rows_",
            "snapshot_",
        ),
    ),
    ("placement and executors", ("placement", "placement_every", "poll_executors")),
    ("OpenTelemetry (OTLP)", ("otlp_",)),
)

# What a series of each catalog scope is counted per, in the README's words.
SCOPE_WORDS = {
    "query": "query",
    "sink": "query's sink",
    "source": "query's source",
    "operator": "state operator",
    "instance": "state store instance (top K)",
    "app": "application",
    "observer": "observer process",
}


def _area_of(name: str) -> str:
    for area, members in SETTING_AREAS:
        if any(name == m or (m.endswith("_") and name.startswith(m)) for m in members):
            return area
    raise SystemExit(f"setting {name} is in no area of SETTING_AREAS in scripts/update_readme.py: add it to one")


def settings_summary() -> str:
    """The README's table of settings by area; the full table with defaults is in docs/reference.md."""
    by_area: dict[str, list[str]] = {area: [] for area, _ in SETTING_AREAS}
    for f in dataclasses.fields(Settings):
        by_area[_area_of(f.name)].append(f"`{f.name}`")
    rows = [f"| area | settings (keyword argument; environment variable `{ENV_PREFIX}<NAME>`) |", "|---|---|"]
    rows += [f"| {area} | {', '.join(names)} |" for area, names in by_area.items() if names]
    return "\n".join(rows)


def metrics_summary() -> str:
    """The README's table of metrics by scope; the full reference is in docs/reference.md."""
    rows = ["| one series per | labels | some also | metrics | of which from | for example |", "|---|---|---|---|---|---|"]
    for scope, labels in SCOPE_LABELS.items():
        specs = [s for s in CATALOG if s.scope == scope]
        if not specs:
            continue
        shown_labels = ", ".join(f"`{label}`" for label in labels) or "-"
        own = ", ".join(f"`{label}`" for label in sorted({label for s in specs for label in s.labels})) or "-"
        sources = ", ".join(f"{source} {n}" for source, n in Counter(s.source for s in specs).most_common())
        examples = ", ".join(f"`{s.prometheus_name}`" for s in specs[:2])
        rows.append(f"| {SCOPE_WORDS.get(scope, scope)} | {shown_labels} | {own} | {len(specs)} | {sources} | {examples} |")
    rows.append(f"| **all** | | | **{len(CATALOG)}** | | |")
    return "\n".join(rows)


def replace(text: str, marker: str, body: str, where: str) -> str:
    pattern = re.compile(rf"(<!-- BEGIN {marker} -->\n).*?(<!-- END {marker} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{where} has no {marker} markers")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def render(readme: str, reference: str) -> tuple[str, str]:
    """``readme`` and ``reference`` with every generated section replaced by what the code generates now."""
    readme = replace(readme, "SETTINGS SUMMARY", settings_summary(), "README.md")
    readme = replace(readme, "METRICS SUMMARY", metrics_summary(), "README.md")
    reference = replace(reference, "SETTINGS", settings_table(), "docs/reference.md")
    reference = replace(reference, "METRICS", reference_table(), "docs/reference.md")
    return readme, reference


def main() -> int:
    with open(README) as f:
        readme = f.read()
    with open(REFERENCE) as f:
        reference = f.read()
    readme, reference = render(readme, reference)
    with open(README, "w") as f:
        f.write(readme)
    with open(REFERENCE, "w") as f:
        f.write(reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
