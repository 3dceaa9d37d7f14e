"""Moved to ``observer.metrics.catalog``; these names stay importable for code written against the old path.

New code imports from ``observer.metrics.catalog``. This module holds no names of its own and goes
once no caller is left.
"""

from observer.metrics.catalog import COUNTER, CUMULATIVE_PER_RUN, GAUGE, MS, MetricSpec

__all__ = ["COUNTER", "CUMULATIVE_PER_RUN", "GAUGE", "MS", "MetricSpec"]
