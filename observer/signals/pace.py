"""Whether a query keeps up: watermark lag, and falling behind (input faster than processing for long)."""

from __future__ import annotations

from dataclasses import dataclass

from observer.metrics import catalog
from observer.metrics.tracker import QueryRecord
from observer.model.events import QueryProgress
from observer.settings import Settings
from observer.signals import kinds
from observer.signals.facts import Facts


@dataclass
class _Pace:
    behind_since: float | None = None
    behind: bool = False


class Pace:
    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self._queries: dict[str, _Pace] = {}

    def new_run(self, query_id: str) -> None:
        """A new run starts with a clean slate: Spark's rates restart with it."""
        self._queries[query_id] = _Pace()

    def forget(self, query_id: str) -> None:
        self._queries.pop(query_id, None)

    def batch(self, record: QueryRecord, p: QueryProgress, ts: float, facts: Facts) -> None:
        q = self._queries.setdefault(record.query_id, _Pace())
        wm = p.watermark
        if wm is not None and wm > 0 and p.timestamp is not None:
            facts.set(record, catalog.WATERMARK_LAG, (), max(0.0, p.timestamp - wm))
        inp, proc = p.input_rows_per_second, p.processed_rows_per_second
        if inp is not None and proc is not None and (p.input_rows or 0) > 0 and inp > proc:
            q.behind_since = q.behind_since if q.behind_since is not None else ts
            if not q.behind and ts - q.behind_since >= self.s.falling_behind_window_seconds:
                q.behind = True
                facts.signal(kinds.FALLING_BEHIND, record, p.run_id, ts, input_rows_per_second=inp, processed_rows_per_second=proc)
        elif inp is not None and proc is not None:
            if q.behind:
                facts.signal(kinds.CAUGHT_UP, record, p.run_id, ts)
            q.behind_since, q.behind = None, False
        facts.set(record, catalog.FALLING_BEHIND, (), 1.0 if q.behind else 0.0)
