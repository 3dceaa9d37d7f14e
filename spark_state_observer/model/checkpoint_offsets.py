"""The state partition count the batches before a restart ran with, read from the checkpoint's offset log.

A checkpoint pins its state partitions: every ``offsets/<batch>`` entry (``v1``, then a metadata line whose
``conf`` holds ``spark.sql.shuffle.partitions``, then one line per source) says the count that batch ran with,
and a restart keeps it. Only an offline repartition (4.2+, ``StreamingCheckpointManager.repartition``) changes
it: it writes one batch of its own, after the stopped query's last, with the new count. So an observer that
sees a query's run start at batch ``B`` without having seen the run before (a restart as a new application)
learns the count before the repartition from the newest of the few entries below ``B`` whose count differs:
``B - 1`` is the repartition's batch (the new count) or the previous run's last (the old one). Everything
read is bounded (a few entries, each at most ``MAX_ENTRY_BYTES``) and nothing here raises on a bad file.
Standard library only, so the signal rules use it below the composition roots that know where a checkpoint is.
"""

from __future__ import annotations

import os

from spark_state_observer.model.bounded import loads

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
MAX_ENTRY_BYTES = 1 << 20  # an offset log entry: a conf of a few dozen keys and one line per source
ENTRIES_BACK = 2  # the repartition's own batch, then the previous run's last


def batch_partitions(root: str, batch: int) -> int | None:
    """The state partitions ``offsets/<batch>`` pins, or None (no such entry, unreadable, no such key)."""
    try:
        with open(os.path.join(root, "offsets", str(batch)), "rb") as f:
            head = f.read(MAX_ENTRY_BYTES)
        lines = head.decode("utf-8", errors="replace").split("\n")
        if len(lines) < 2 or not lines[0].startswith("v"):
            return None
        conf = loads(lines[1]).get("conf")
        value = conf.get(SHUFFLE_PARTITIONS) if isinstance(conf, dict) else None
        count = int(value) if isinstance(value, str) and value.isdigit() else None
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return count if count is not None and 0 < count < 1 << 31 else None


def partitions_before(root: str, first_batch: int, partitions: int) -> tuple[int, int] | None:
    """(batch, its partition count) of the newest offset log entry just below ``first_batch`` (a run's first
    batch) with a count other than ``partitions``; None when the entries there have ``partitions`` or cannot be read."""
    for batch in range(first_batch - 1, max(-1, first_batch - 1 - ENTRIES_BACK), -1):
        count = batch_partitions(root, batch)
        if count is not None and count != partitions:
            return batch, count
    return None
