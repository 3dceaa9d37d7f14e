"""The backtest's settings: their defaults, the ranges a value must lie in, and the error that says why
a backtest cannot run."""

from __future__ import annotations

DEFAULT_SCRAPE_INTERVAL = 15.0
DEFAULT_EVAL_INTERVAL = 30.0
DEFAULT_MAX_SCRAPES = 20_000
DEFAULT_IDLE_KEEP = 3600.0
# intervals below a second, or above a day, are no scraper's or rule manager's; a tail of a week at most
INTERVAL_RANGE = (1.0, 86400.0)
TAIL_RANGE = (0.0, 7 * 86400.0)
IDLE_KEEP_RANGE = (60.0, 7 * 86400.0)
MAX_SCRAPES_RANGE = (1, 1_000_000)
# Prometheus answers at most 11,000 points per series and range query: evaluations are asked in chunks
QUERY_POINTS = 10_000


class BacktestError(RuntimeError):
    """The backtest cannot run (no events, unreadable rules, Prometheus missing); the message says why."""


def check_setting(name: str, value: float, bounds: tuple[float, float]) -> float:
    """``value`` as a float when it is a finite number within ``bounds``; a ``BacktestError`` naming ``name``
    otherwise (a zero or negative interval would loop forever, NaN never advances, inf never ends)."""
    low, high = bounds
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise BacktestError(f"{name} must be a number of seconds, got {str(value)[:40]!r}") from None
    if not low <= number <= high:  # also false for NaN
        raise BacktestError(f"{name} must be between {low:.15g} and {high:.15g}, got {str(value)[:40]}")
    return number
