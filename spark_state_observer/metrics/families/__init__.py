"""The metric families: where the specs are written, one module per family; ``spark_state_observer.metrics.catalog``
assembles and checks them and is the module emitters import."""

from __future__ import annotations

from types import ModuleType

from spark_state_observer.metrics.families import capacity, instances, kafka, lifecycle, observer, placement, query, signals, state

MODULES: tuple[ModuleType, ...] = (query, state, instances, lifecycle, signals, kafka, placement, capacity, observer)
"""Every family module, for the catalog's check that each spec written in one is assembled."""
