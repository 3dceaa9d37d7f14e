"""State skewed by key: one partition of an operator holds far more of the state's bytes than the others.

A hot key stays in one state partition however many partitions there are: that partition's store is the
slowest to load, to snapshot and to compact, and its executor's disk fills first. Rows and memory do not show
it: a key with a megabyte value is one row, and RocksDB's memory is mostly fixed per store instance. The
state's bytes do: RocksDB's SST size per partition, from the per-task state metrics of the event log
(``spark_state_observer.placement.tasks``), which the placement feed hands to this rule batch by batch.

``state_skewed`` fires when, in ``PERSIST_BATCHES`` batches in a row of one operator, the heaviest partition
holds at least ``RATIO`` times the median partition's bytes and at least ``MIN_BYTES``: small states, where a
few kilobytes of SST overhead make one partition look several times another, are noise. It names the operator,
the heaviest partition and its share of the operator's bytes, once per episode: it fires again only after the
skew went away for a batch, or in a new run of the query.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import median

from spark_state_observer.model.alert_spec import WARNING, AlertSpec
from spark_state_observer.model.signal_kinds import STATE_SKEWED, SignalEvent

RATIO = 4.0  # the heaviest partition over the median one
MIN_BYTES = 64 * 1024  # the heaviest partition's bytes: below, the state is too small for skew to matter
PERSIST_BATCHES = 3  # batches in a row: a one-off (a compaction that has not run yet) is not skew
MAX_OPERATORS = 1024  # (query, operator) pairs remembered; the least recently seen is forgotten first


@dataclass
class _Streak:
    run_id: str | None
    batches: int = 0
    told: bool = False


class StateSkew:
    """Judges each operator's per-partition state bytes; thread-confined to the observer's worker."""

    def __init__(self, ratio: float = RATIO, min_bytes: int = MIN_BYTES, persist: int = PERSIST_BATCHES) -> None:
        self.ratio = ratio
        self.min_bytes = min_bytes
        self.persist = max(1, persist)
        self._streaks: OrderedDict[tuple[str, int], _Streak] = OrderedDict()

    def on_batch(
        self,
        query_id: str,
        query: str,
        run_id: str | None,
        batch_id: int,
        operator: int,
        operator_name: str,
        sizes: Mapping[int, int],
        ts: float,
    ) -> SignalEvent | None:
        """One batch of one operator with its partitions' bytes (partition -> bytes); the signal when it is due."""
        key = (query_id, operator)
        streak = self._streaks.get(key)
        if streak is None or streak.run_id != run_id:
            streak = self._streaks[key] = _Streak(run_id)
            while len(self._streaks) > MAX_OPERATORS:
                self._streaks.popitem(last=False)
        self._streaks.move_to_end(key)
        if len(sizes) < 2:
            return None  # one partition cannot be skewed against the others
        heaviest = max(sizes, key=lambda p: (sizes[p], -p))
        top, mid, total = sizes[heaviest], median(sizes.values()), sum(sizes.values())
        ratio = top / mid if mid > 0 else float("inf")
        if top < self.min_bytes or ratio < self.ratio:
            streak.batches, streak.told = 0, False
            return None
        streak.batches += 1
        if streak.told or streak.batches < self.persist:
            return None
        streak.told = True
        return SignalEvent(
            STATE_SKEWED,
            query_id,
            query,
            run_id,
            ts,
            {
                "batch_id": batch_id,
                "operator_id": operator,
                "operator_name": operator_name,
                "partition": heaviest,
                "partition_bytes": top,
                "median_bytes": mid,
                "ratio": ratio if mid > 0 else None,
                "share": top / total,
                "partitions": len(sizes),
                "batches": streak.batches,
            },
        )


# the alert of the signal this module raises (placement feeds it task figures; no engine rule raises it)
ALERTS = (
    AlertSpec(
        "SparkStateSkewed",
        "state",
        "1m",  # the gauges hold batch after batch; the signal asks three in a row
        WARNING,
        (STATE_SKEWED,),
        ("state_skewed",),
        ("state_skew_ratio", "state_skew_min_bytes"),
        "One partition holds far more of the state's bytes than the others.",
        verdict_text=(("state_skewed", "State skewed by key: {operator} partition {partition}"),),
    ),
)
