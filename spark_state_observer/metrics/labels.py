"""Bounded label sets per query: a query whose names change every batch cannot grow the exposition.

A phase, source, operator or metric key becomes a label value. Spark's own names are a handful per query
and stable, but a query whose names change every batch (a source description with a timestamp in it, a
custom operator naming itself per batch, hostile input) would add series at every batch: 1,000 batches
made 960,000 series. So each query keeps at most ``limit`` values per label, with the batch that last
used each: a new value takes the place of the one unused longest, whose series are then dropped, and a
value that finds every place taken by the current batch is refused. Both are counted as problems
(``spark_state_observer_event_problems_total``: a field of an otherwise usable event ignored).
"""

from __future__ import annotations

from collections import OrderedDict

from spark_state_observer.metrics.updates import Labels

# the labels whose values come from the job (the rest come from the code: index, kind, status, stat)
PHASE = "phase"
SOURCE = "source"
OPERATOR = "operator"
METRIC = "metric"
DEFAULT_LIMITS: dict[str, int] = {PHASE: 32, SOURCE: 32, OPERATOR: 64, METRIC: 256}
"""Per query. Spark has 7 phases, a few sources, one operator per stateful step and ~40 custom metric keys."""


class LabelBudget:
    """The label values one query may use, least recently used first.

    Two shortcuts keep it off the ingest profile (it was ~12 % of it), both exact: ``allows`` answers from a
    memo that any change to the kept values clears, and a batch that uses the same values in the same order
    as the previous one (the common case) is not admitted value by value: after a batch with nothing refused
    that order is already the kept one, so only the batch each value was last used in would change, and that
    is written when it is next read (the next different batch, or a copy).
    """

    def __init__(self, limits: dict[str, int] | None = None) -> None:
        self._limits = dict(DEFAULT_LIMITS if limits is None else limits)
        self._values: dict[str, OrderedDict[str, int]] = {name: OrderedDict() for name in self._limits}
        self.dropped = 0  # values forgotten or refused
        self._allowed: dict[Labels, bool] = {}  # allows() per label set, while the kept values stay the same
        self._repeat: list[tuple[str, str]] | None = None  # the last batch's uses, when repeating it changes nothing...
        self._repeat_batch = 0  # ...and the latest batch that used exactly those (not yet written to ``_values``)
        self.generation = 0  # moves whenever the kept values change: what ``allows`` says may differ after

    def admit(self, label: str, value: str, batch: int) -> tuple[bool, str | None]:
        """Use ``value`` of ``label`` in ``batch``: (admitted, the value it displaced, if any)."""
        self._catch_up()
        self._repeat = None
        return self._admit(label, value, batch)

    def admit_batch(self, uses: list[tuple[str, str]], batch: int) -> list[tuple[str, str]]:
        """``admit`` every ``(label, value)`` of one batch, in order; the ``(label, value)`` pairs displaced."""
        if uses == self._repeat:
            self._repeat_batch = batch
            return []
        self._catch_up()
        displaced: list[tuple[str, str]] = []
        refused = False
        for label, value in uses:
            admitted, evicted = self._admit(label, value, batch)
            refused = refused or not admitted
            if evicted is not None:
                displaced.append((label, evicted))
        self._repeat, self._repeat_batch = (None if refused else uses), batch
        return displaced

    def _admit(self, label: str, value: str, batch: int) -> tuple[bool, str | None]:
        values = self._values.get(label)
        if values is None:
            return True, None
        if value in values:
            values[value] = batch
            values.move_to_end(value)
            return True, None
        evicted = None
        if len(values) >= self._limits[label]:
            oldest, used = next(iter(values.items()))
            self.dropped += 1
            if used >= batch:  # every value is in use by this batch: refuse the newcomer
                return False, None
            del values[oldest]
            evicted = oldest
        values[value] = batch
        self._allowed.clear()
        self.generation += 1
        return True, evicted

    def _catch_up(self) -> None:
        """Write the batch a repeated use list was last used in (the values are in place and in order already)."""
        if self._repeat is not None:
            for label, value in self._repeat:
                values = self._values.get(label)
                if values is not None:
                    values[value] = self._repeat_batch

    def allows(self, labels: Labels) -> bool:
        """Whether every bounded label of ``labels`` holds an admitted value (series to keep or render)."""
        known = self._allowed.get(labels)
        if known is None:
            known = self._allowed[labels] = self._allows(labels)
            if len(self._allowed) > 4096:  # label sets of series long gone: start over rather than grow
                self._allowed = {labels: known}
        return known

    def _allows(self, labels: Labels) -> bool:
        for name, value in labels:
            values = self._values.get(name)
            if values is not None and value not in values:
                return False
        return True

    def size(self, label: str) -> int:
        """How many values of ``label`` the query keeps now."""
        return len(self._values.get(label, ()))

    def copy(self) -> LabelBudget:
        """An independent copy, for a snapshot exporters read while the worker goes on."""
        self._catch_up()
        clone = LabelBudget(self._limits)
        clone._values = {name: OrderedDict(values) for name, values in self._values.items()}
        clone.dropped = self.dropped
        return clone
