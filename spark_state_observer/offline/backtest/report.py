"""What a backtest found: each alert instance's pending, firing and resolved times, the signals, and what
of the period was not scraped."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from spark_state_observer.offline.backtest.settings import DEFAULT_MAX_SCRAPES


@dataclass
class Firing:
    """One alert instance (rule + label set) over one continuous active period."""

    alert: str
    labels: dict[str, str]
    severity: str
    summary: str
    runbook_url: str
    pending_at: float
    firing_at: float | None  # None: active, but never long enough for its ``for``
    resolved_at: float | None  # None: still active when the period ended
    value: float | None = None

    @property
    def fired(self) -> bool:
        return self.firing_at is not None

    def firing_seconds(self, end: float) -> float:
        if self.firing_at is None:
            return 0.0
        return (self.resolved_at if self.resolved_at is not None else end) - self.firing_at


@dataclass(frozen=True)
class QueryRun:
    """One start of a query in the logs: its query and run ids, the application it ran in, when it started."""

    query_id: str
    run_id: str
    app_id: str
    started: float


@dataclass
class BacktestReport:
    start: float
    end: float
    scrape_interval: float
    eval_interval: float
    rule_files: list[str]
    events: int
    scrapes: int
    firings: list[Firing] = field(default_factory=list)
    # idle periods not scraped (from the last scrape before to the first after), and where the scrape cap
    # stopped scraping (None: the whole period was scraped)
    gaps: list[tuple[float, float]] = field(default_factory=list)
    capped_at: float | None = None
    max_scrapes: int = DEFAULT_MAX_SCRAPES
    signals: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    runs: list[QueryRun] = field(default_factory=list)  # every query start, to tell which application an alert fired in

    def fired(self) -> list[Firing]:
        return [f for f in self.firings if f.fired]

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["firings"] = [dict(asdict(f), firing_seconds=f.firing_seconds(self.end)) for f in self.firings]
        return out
