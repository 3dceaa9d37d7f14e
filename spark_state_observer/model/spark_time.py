"""Spark's time settings read from an application's configuration (its event log's environment update).

Why here: a rule judges a query on the cadence its application was given, and the configuration comes as text
(``"10s"``, ``"500ms"``, a bare number of milliseconds), as Spark's ``timeConf`` accepts it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

NO_DATA_PROGRESS_CONF = "spark.sql.streaming.noDataProgressEventInterval"
NO_DATA_PROGRESS_SECONDS = 10.0  # its default: a live idle query logs an idle event this often

_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(us|ms|s|sec|m|min|h|d)?\s*$")
_UNIT_SECONDS = {"us": 1e-6, "ms": 0.001, None: 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def time_conf_seconds(value: object, default: float) -> float:
    """A Spark time setting in seconds (a bare number is milliseconds); ``default`` when absent or unreadable."""
    m = _DURATION.match(str(value)) if value is not None else None
    if not m:
        return default
    seconds = float(m[1]) * _UNIT_SECONDS[m[2]]
    return seconds if 0 < seconds < 1e9 else default


def no_data_progress_seconds(conf: Mapping[str, str]) -> float:
    """How often a live idle query of this application logs an idle event (``NO_DATA_PROGRESS_CONF``)."""
    return time_conf_seconds(conf.get(NO_DATA_PROGRESS_CONF), NO_DATA_PROGRESS_SECONDS)
