"""``StateObserverListener``: the capture listener bound to an ``Observer`` (one with its Prometheus exporter is
built and started here unless one is given)."""

from __future__ import annotations

from typing import Any

from spark_state_observer.assembly import assemble
from spark_state_observer.capture.listener import QueryListener
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.pipeline.runtime import Observer


class StateObserverListener(QueryListener):
    """The observer's listener; usable directly with ``spark.streams.addListener(...)``.

    ``StateObserverListener(**settings)`` starts its own ``Observer`` (endpoint and worker); pass
    ``observer=`` to share one. ``observer.attach(spark)`` does both steps and returns the observer.
    """

    def __init__(self, observer: Observer | None = None, **settings: Any) -> None:
        if observer is None:
            from spark_state_observer.settings import Settings

            observer = assemble(Settings.from_env(**settings), observer_type=PrometheusObserver).start()
        self.observer = observer
        super().__init__(observer.submit, fast_path=observer.settings.fast_path)
