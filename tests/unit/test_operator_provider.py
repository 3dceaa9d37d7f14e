"""An operator's provider, found once and kept (``OperatorProgress.provider``), against the reading it replaces
(the names read anew at every access) on every operator of every recorded run, through both builders."""

from __future__ import annotations

import dataclasses
import json

from recorded_progress import recorded_runs

from spark_state_observer.model.events import OperatorProgress
from spark_state_observer.model.fields import HDFS_CACHE_MISSES, HDFS_CURRENT_VERSION_SIZE, ROCKSDB_PREFIX
from spark_state_observer.model.parse import parse_event


def _named(custom: dict[str, float]) -> str:
    """The provider as the metric names tell it, read anew: the reference."""
    if any(key.startswith(ROCKSDB_PREFIX) for key in custom):
        return "rocksdb"
    return "hdfs" if HDFS_CACHE_MISSES in custom or HDFS_CURRENT_VERSION_SIZE in custom else "unknown"


def test_the_kept_provider_is_the_one_the_names_tell_on_every_recorded_operator() -> None:
    seen: set[str] = set()
    for _, events in recorded_runs():
        for event in events:
            fast = parse_event("progress", json.dumps(event.raw).encode())  # the fast decoder's assembled model
            for op in (*event.operators, *fast.operators):
                expected = _named(dict(op.custom))
                assert op.provider == expected and op.provider == expected  # the first read keeps it, the second reads it
                seen.add(expected)
                other = "unknown" if expected != "unknown" else "rocksdb"
                custom = {} if other == "unknown" else {ROCKSDB_PREFIX + "x": 1.0}
                changed = dataclasses.replace(op, custom=custom)  # a new operator finds its own, not the kept one
                assert changed.provider == other and changed == dataclasses.replace(op, custom=dict(custom))
                assert isinstance(op, OperatorProgress) and dataclasses.replace(changed, custom=op.custom) == op
    assert seen == {"rocksdb", "hdfs"}
