"""Series at their original timestamps: the event logs replayed on a simulated clock and the observer's
exposition written as OpenMetrics at every scrape of the original timeline (idle gaps skipped, scrapes capped)."""

from __future__ import annotations

from typing import Any

from spark_state_observer.mixin.config import MixinConfig, labels_satisfying, parse_matchers
from spark_state_observer.offline.backtest.settings import DEFAULT_IDLE_KEEP, DEFAULT_MAX_SCRAPES, BacktestError


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


TARGET_LABELS = {"job": "spark_state_observer", "instance": "backtest"}
# labels the observer's exposition carries itself: a scrape never adds them (a series would have them twice)
OWN_LABELS = frozenset({"app", "query", "query_id", "operator", "operator_index", "instance"})


def target_labels(config: MixinConfig) -> dict[str, str]:
    """The labels a scrape adds to every series so that the rules generated from ``config`` select them:
    those its ``selector`` needs (``test_labels`` for regex and negative matchers), the ``job`` from it or
    else from ``observer_selector``, and ``instance="backtest"``. Without them a configuration that selects
    ``job=~"spark-.*"`` would find nothing to alert on in any recording; ``MixinConfigError`` when a
    matcher has no value to satisfy it."""
    needed = labels_satisfying(parse_matchers(config.selector, "selector"), config.test_labels, "selector")
    labels = {k: v for k, v in needed.items() if k not in OWN_LABELS | {config.app_label}}
    if "job" not in labels:
        observer = labels_satisfying(parse_matchers(config.observer_selector, "observer_selector"), config.test_labels, "observer_selector")
        labels["job"] = observer.get("job", TARGET_LABELS["job"])
    return {"job": labels.pop("job"), **labels, "instance": TARGET_LABELS["instance"]}


class ScrapeRecorder:
    """Writes the observer's exposition as OpenMetrics samples stamped with the scrape time."""

    def __init__(
        self, path: str, interval: float, target_labels: dict[str, str] | None = None, max_scrapes: int = DEFAULT_MAX_SCRAPES
    ) -> None:
        self.path = path
        self.interval = interval
        self.max_scrapes = max_scrapes
        # the labels a scrape adds to every series (job, instance), so rules that aggregate by them work
        self._target = ",".join(f'{k}="{_escape(v)}"' for k, v in (target_labels or {}).items())
        self._out = open(path, "w", encoding="utf-8")
        self.next_at: float | None = None
        self.first: float | None = None
        self.last: float | None = None
        self.scrapes = 0
        self.segments: list[list[float]] = []  # [first, last] scrape of each stretch scraped without a gap
        self.gaps: list[tuple[float, float]] = []
        self.capped_at: float | None = None

    @property
    def full(self) -> bool:
        return self.scrapes >= self.max_scrapes

    def scrape(self, text: str, at: float) -> None:
        """Record one scrape: text format 0.0.4 sample lines are OpenMetrics sample lines once stamped."""
        stamp = f" {at:.3f}\n"
        write = self._out.write
        target = self._target
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            if target:
                brace, space = line.find("{"), line.find(" ")
                if 0 <= brace < space:
                    line = (
                        f"{line[: brace + 1]}{target},{line[brace + 1 :]}"
                        if line[brace + 1] != "}"
                        else f"{line[: brace + 1]}{target}{line[brace + 1 :]}"
                    )
                else:
                    line = f"{line[:space]}{{{target}}}{line[space:]}"
            write(line)
            write(stamp)
        if self.segments and at - self.segments[-1][1] <= self.interval * 1.5:
            self.segments[-1][1] = at
        else:
            if self.last is not None:
                self.gaps.append((self.last, at))
            self.segments.append([at, at])
        self.first = at if self.first is None else self.first
        self.last = at
        self.scrapes += 1

    def close(self) -> None:
        self._out.write("# EOF\n")
        self._out.close()


def _aligned(at: float, interval: float) -> float:
    return at - (at % interval)  # as a scraper's interval is


def record_series(
    paths: list[str],
    om_path: str,
    scrape_interval: float,
    tail_seconds: float = 0.0,
    settings: Any = None,
    max_scrapes: int = DEFAULT_MAX_SCRAPES,
    idle_keep: float = DEFAULT_IDLE_KEEP,
    scrape_labels: dict[str, str] | None = None,
) -> tuple[ScrapeRecorder, list[dict[str, Any]], int, list[str]]:
    """Replay ``paths`` on a simulated clock, scraping every ``scrape_interval`` of the original timeline,
    except more than ``idle_keep`` seconds after an event (resumed at the next one) and beyond ``max_scrapes``;
    every series gets ``scrape_labels`` (default ``TARGET_LABELS``) as a scrape target's labels."""
    from spark_state_observer.exporters.prometheus import StateCollector
    from spark_state_observer.offline.replay import replay
    from spark_state_observer.pipeline.runtime import Observer

    clock = [0.0]
    last_event: list[float] = []
    recorder = ScrapeRecorder(om_path, scrape_interval, scrape_labels or TARGET_LABELS, max_scrapes)
    signals: list[dict[str, Any]] = []
    subscribed: list[Observer] = []
    collectors: dict[int, StateCollector] = {}  # the replay's observer -> its Prometheus text, as a scrape would read it

    def scrape_to(observer: Observer, until: float) -> None:
        assert recorder.next_at is not None
        while recorder.next_at <= until:
            if recorder.full:
                recorder.capped_at = recorder.next_at if recorder.capped_at is None else recorder.capped_at
                return
            clock[0] = recorder.next_at
            observer.tick()
            collector = collectors.get(id(observer)) or collectors.setdefault(id(observer), StateCollector(observer.view))
            recorder.scrape(collector.exposition().decode("utf-8", "replace"), recorder.next_at)
            recorder.next_at += scrape_interval

    def scrape_until(observer: Observer, until: float) -> None:
        """Scrape up to the event at ``until``, skipping the idle time since the previous event."""
        if recorder.next_at is None:
            recorder.next_at = _aligned(until, scrape_interval)
        elif last_event and until > last_event[0] + idle_keep:
            scrape_to(observer, last_event[0] + idle_keep)
            recorder.next_at = max(recorder.next_at, _aligned(until, scrape_interval))
        scrape_to(observer, until)

    def before_event(observer: Observer, at: float) -> None:
        if not subscribed:
            observer.on(
                "*",
                lambda e: signals.append(
                    {
                        "kind": e.kind,
                        "time": e.timestamp,
                        "query": e.query,
                        "query_id": e.query_id,
                        "run_id": e.run_id,
                        "attributes": e.attributes,
                        **({"app": dict(e.app)} if e.app else {}),  # the recorded application's, from its log
                    }
                ),
            )
            subscribed.append(observer)
        scrape_until(observer, at)
        clock[0] = max(clock[0], at)
        last_event[:] = [max(last_event[0], at) if last_event else at]

    result = replay(paths, settings, clock=lambda: clock[0], before_event=before_event)
    if recorder.next_at is None:
        recorder.close()
        raise BacktestError("no streaming events in " + ", ".join(paths) + ": nothing to backtest")
    # the events after the last scrape, then the tail: scraped as a watcher would until the period ends
    # (no longer than idle_keep past the last event unless a tail is asked for)
    last = last_event[0] if last_event else clock[0]
    end = max(last + min(scrape_interval, idle_keep), (recorder.last or 0.0) + tail_seconds)
    scrape_to(result.observer, end)
    recorder.close()
    return recorder, signals, result.events, result.errors
