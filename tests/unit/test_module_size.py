"""No module of the package grows over the project's limit: one job per module keeps each one short enough to read."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT

LIMIT = 600  # lines per module (the developers' guide)


def line_counts() -> dict[str, int]:
    """Lines per module of the package, by path from the repository's root (``/`` separated)."""
    root = Path(ROOT)
    return {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted((root / "spark_state_observer").rglob("*.py"))
    }


def test_no_module_over_the_limit() -> None:
    over = {path: n for path, n in line_counts().items() if n > LIMIT}
    assert not over, "modules over {} lines (split them by job): {}".format(
        LIMIT, ", ".join(f"{path} ({n})" for path, n in sorted(over.items()))
    )


def test_the_count_sees_every_module() -> None:
    """The walk finds the package's modules (a wrong root would pass the limit with nothing to count)."""
    counts = line_counts()
    assert "spark_state_observer/pipeline/runtime.py" in counts and len(counts) > 200
    assert max(counts.values()) > LIMIT / 2
