"""The identity of the application a listener is attached to, for the history's ``app`` columns.

Read once at attach time from the session (name and application id; under Spark Connect, where there is
no SparkContext, from the session's conf). Static labels (cluster, namespace, env) come from the
caller: the fleet-wide label setting of issue 13 is to be passed in as ``labels``.
"""

from __future__ import annotations

import logging
from typing import Any

from observer.history.rows import AppIdentity

log = logging.getLogger("observer")


def spark_app_identity(spark: Any, labels: dict[str, str] | None = None) -> AppIdentity:
    """Name and id of ``spark``'s application; unknown parts stay None (never raises)."""
    name = app_id = None
    try:
        context = spark.sparkContext
        name, app_id = context.appName, context.applicationId
    except Exception:  # Spark Connect has no SparkContext
        try:
            name = spark.conf.get("spark.app.name", None)
            app_id = spark.conf.get("spark.app.id", None)
        except Exception as exc:
            log.debug("spark-state-observer: application identity unavailable: %r", exc)
    return AppIdentity.of(name, labels, app_id)
