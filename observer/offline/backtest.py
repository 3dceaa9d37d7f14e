"""Alert backtest: which of the shipped alerts would have fired on a past run, when, and for how long.

Prometheus rule unit tests run on hand-written series; this runs the real rules over real history:

1. The event logs are replayed through the observer as if it had been running then (a simulated clock,
   so time-driven signals such as stalls are derived at the ticks a live worker would have made), and
   the exposition is taken at every ``scrape_interval`` of the original timeline: the series Prometheus
   would have scraped, at their original timestamps (written as OpenMetrics).
2. ``promtool tsdb create-blocks-from openmetrics`` turns them into TSDB blocks, served by a real
   Prometheus on loopback.
3. Recording rules are backfilled first with ``promtool tsdb create-blocks-from rules``, one dependency
   level at a time (a rule that reads another recorded series waits until that series exists).
4. Every alerting rule's expression is evaluated with a range query at ``eval_interval``; an alert is
   pending from the first evaluation its expression returns a series and firing once it has been
   pending for its ``for`` (as Prometheus' rule manager does), resolved at the first evaluation without it.

Work is bounded whatever the logs' timeline: a log whose events lie far apart (two batches a year
apart) is not scraped through the idle time between them. Scraping stops ``idle_keep`` seconds after an
event (long enough for every shipped alert's window and ``for``) and resumes at the next event: the
skipped gaps are listed in the report, and no alert is evaluated inside them. At most ``max_scrapes``
scrapes are taken; the report says where the cap cut the period off.

What differs from a live server, by construction: scrapes follow the watcher's view (the endpoint is
scraped from the first to the last event of the logs, also while a job is down between runs); backfilled
series carry no staleness markers, so a series that stops is still seen for the 5-minute lookback instead
of vanishing at the next scrape (``promtool test rules`` has the same semantics for its ``_`` gaps,
which is what the tests compare against).
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

import yaml

from observer.offline.prometheus_server import PrometheusError, PrometheusServer, promtool

DEFAULT_SCRAPE_INTERVAL = 15.0
DEFAULT_EVAL_INTERVAL = 30.0
DEFAULT_MAX_SCRAPES = 20_000
DEFAULT_IDLE_KEEP = 3600.0
# intervals below a second, or above a day, are no scraper's or rule manager's; a tail of a week at most
INTERVAL_RANGE = (1.0, 86400.0)
TAIL_RANGE = (0.0, 7 * 86400.0)
IDLE_KEEP_RANGE = (60.0, 7 * 86400.0)
MAX_SCRAPES_RANGE = (1, 1_000_000)
# Prometheus answers at most 11,000 points per series and range query: evaluations are asked in chunks
QUERY_POINTS = 10_000
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_TEMPLATE = re.compile(r"{{\s*(\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)|\$value)(\s*\|\s*\w+)?\s*}}")


class BacktestError(RuntimeError):
    """The backtest cannot run (no events, unreadable rules, Prometheus missing); the message says why."""


def check_setting(name: str, value: float, bounds: tuple[float, float]) -> float:
    """``value`` as a float when it is a finite number within ``bounds``; a ``BacktestError`` naming ``name``
    otherwise (a zero or negative interval would loop forever, NaN never advances, inf never ends)."""
    low, high = bounds
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise BacktestError(f"{name} must be a number of seconds, got {str(value)[:40]!r}") from None
    if not low <= number <= high:  # also false for NaN
        raise BacktestError(f"{name} must be between {low:.15g} and {high:.15g}, got {str(value)[:40]}")
    return number


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    for_seconds: float
    labels: dict[str, str]
    annotations: dict[str, str]


@dataclass(frozen=True)
class RecordingRule:
    record: str
    expr: str
    labels: dict[str, str]


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

    def fired(self) -> list[Firing]:
        return [f for f in self.firings if f.fired]

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["firings"] = [dict(asdict(f), firing_seconds=f.firing_seconds(self.end)) for f in self.firings]
        return out


# --- rules --------------------------------------------------------------------------------------------
MAX_RULE_FILE_BYTES = 16 << 20
MAX_RULE_FILE_VALUES = 1_000_000


def load_rules(paths: Iterable[str]) -> tuple[list[RecordingRule], list[AlertRule]]:
    """The recording and alerting rules of Prometheus rule files; a clear ``BacktestError`` if unreadable
    (also for a file whose YAML aliases would expand without bound, or whose shape is not a rule file's)."""
    from observer.mixin.config import bounded_yaml

    recording: list[RecordingRule] = []
    alerting: list[AlertRule] = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_RULE_FILE_BYTES + 1)
            doc = bounded_yaml(raw.decode("utf-8"), MAX_RULE_FILE_BYTES, MAX_RULE_FILE_VALUES) or {}
        except OSError as exc:
            raise BacktestError(f"cannot read rule file {path}: {exc.strerror}") from None
        except ValueError as exc:  # UnicodeDecodeError included
            raise BacktestError(f"cannot read rule file {path}: {str(exc)[:300]}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("groups"), list):
            raise BacktestError(f"{path}: not a Prometheus rule file (no 'groups' list)")
        try:
            for group in doc["groups"]:
                for rule in (group or {}).get("rules") or []:
                    labels = {str(k): str(v) for k, v in (rule.get("labels") or {}).items()}
                    if "record" in rule:
                        recording.append(RecordingRule(str(rule["record"]), str(rule["expr"]), labels))
                    elif "alert" in rule:
                        annotations = {str(k): str(v) for k, v in (rule.get("annotations") or {}).items()}
                        for_seconds = parse_duration(str(rule.get("for", "0s")))
                        alerting.append(AlertRule(str(rule["alert"]), str(rule["expr"]), for_seconds, labels, annotations))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise BacktestError(f"{path}: not a Prometheus rule file ({type(exc).__name__} {str(exc)[:100]})") from None
    return recording, alerting


def parse_duration(text: str) -> float:
    """Prometheus duration (``1h30m``, ``90s``, ``0m``) in seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text.strip())
    if not parts or "".join(a + b for a, b in parts) != text.strip():
        raise BacktestError(f"not a Prometheus duration: {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


def dependency_levels(rules: list[RecordingRule]) -> list[list[RecordingRule]]:
    """Recording rules grouped so that each level only reads series of earlier levels (or raw ones)."""
    records = {r.record for r in rules}
    needs = {r.record: {n for n in _NAME.findall(r.expr) if n in records and n != r.record} for r in rules}
    levels: list[list[RecordingRule]] = []
    done: set[str] = set()
    remaining = list(rules)
    while remaining:
        level = [r for r in remaining if needs[r.record] <= done]
        if not level:
            raise BacktestError("recording rules depend on each other in a cycle: " + ", ".join(r.record for r in remaining))
        levels.append(level)
        done |= {r.record for r in level}
        remaining = [r for r in remaining if r not in level]
    return levels


# --- series at their original timestamps ---------------------------------------------------------------
def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


TARGET_LABELS = {"job": "spark_state_observer", "instance": "backtest"}


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
) -> tuple[ScrapeRecorder, list[dict[str, Any]], int, list[str]]:
    """Replay ``paths`` on a simulated clock, scraping every ``scrape_interval`` of the original timeline,
    except more than ``idle_keep`` seconds after an event (resumed at the next one) and beyond ``max_scrapes``."""
    from observer.offline.replay import replay
    from observer.pipeline.runtime import Observer

    clock = [0.0]
    last_event: list[float] = []
    recorder = ScrapeRecorder(om_path, scrape_interval, TARGET_LABELS, max_scrapes)
    signals: list[dict[str, Any]] = []
    subscribed: list[Observer] = []

    def scrape_to(observer: Observer, until: float) -> None:
        assert recorder.next_at is not None
        while recorder.next_at <= until:
            if recorder.full:
                recorder.capped_at = recorder.next_at if recorder.capped_at is None else recorder.capped_at
                return
            clock[0] = recorder.next_at
            observer.tick()
            recorder.scrape(observer.exposition().decode("utf-8", "replace"), recorder.next_at)
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


# --- evaluation ---------------------------------------------------------------------------------------
def _labels_of(metric: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in metric.items() if k != "__name__"}


def render_template(text: str, labels: dict[str, str], value: float | None) -> str:
    """``{{ $labels.x }}`` and ``{{ $value }}`` filled in; other template code is left as written."""

    def fill(m: re.Match[str]) -> str:
        if m.group(2):
            return labels.get(m.group(2), "")
        return "" if value is None else f"{value:g}"

    return _TEMPLATE.sub(fill, text)


def evaluate_alert(rule: AlertRule, matrix: list[dict[str, Any]], steps: list[float]) -> list[Firing]:
    """Pending/firing/resolved periods of ``rule`` from its expression's values at each evaluation step."""
    firings: list[Firing] = []
    for series in matrix:
        labels = _labels_of(series.get("metric", {}))
        active = {round(float(t), 3): float(v) for t, v in series.get("values", [])}
        current: Firing | None = None
        for t in steps:
            value = active.get(round(t, 3))
            if value is not None:
                if current is None:
                    all_labels = {**labels, **rule.labels}
                    current = Firing(
                        rule.name,
                        all_labels,
                        rule.labels.get("severity", ""),
                        render_template(rule.annotations.get("summary", ""), all_labels, value),
                        rule.annotations.get("runbook_url", ""),
                        pending_at=t,
                        firing_at=None,
                        resolved_at=None,
                    )
                    firings.append(current)
                current.value = value
                if current.firing_at is None and t - current.pending_at >= rule.for_seconds:
                    current.firing_at = t
            elif current is not None:
                current.resolved_at = t
                current = None
    return firings


def run_backtest(
    paths: list[str],
    rule_files: list[str],
    *,
    scrape_interval: float = DEFAULT_SCRAPE_INTERVAL,
    eval_interval: float = DEFAULT_EVAL_INTERVAL,
    tail_seconds: float = 0.0,
    max_scrapes: int = DEFAULT_MAX_SCRAPES,
    idle_keep: float = DEFAULT_IDLE_KEEP,
    settings: Any = None,
    work_dir: str | None = None,
    prometheus: str | None = None,
    promtool_binary: str | None = None,
) -> BacktestReport:
    """Replay ``paths``, load the series into a real Prometheus, evaluate ``rule_files`` over the period."""
    scrape_interval = check_setting("--scrape-interval", scrape_interval, INTERVAL_RANGE)
    eval_interval = check_setting("--eval-interval", eval_interval, INTERVAL_RANGE)
    tail_seconds = check_setting("--tail", tail_seconds, TAIL_RANGE)
    idle_keep = check_setting("--idle-keep", idle_keep, IDLE_KEEP_RANGE)
    max_scrapes = int(check_setting("--max-scrapes", max_scrapes, MAX_SCRAPES_RANGE))
    recording, alerting = load_rules(rule_files)
    own_dir = work_dir is None
    work = work_dir or tempfile.mkdtemp(prefix="sso-backtest-")
    os.makedirs(work, exist_ok=True)
    try:
        om_path = os.path.join(work, "series.om")
        recorder, signals, events, errors = record_series(
            paths, om_path, scrape_interval, tail_seconds, settings, max_scrapes=max_scrapes, idle_keep=idle_keep
        )
        start, end = float(recorder.first or 0.0), float(recorder.last or 0.0)
        segments = [(a, b) for a, b in recorder.segments]
        data = os.path.join(work, "data")
        promtool(["tsdb", "create-blocks-from", "openmetrics", om_path, data], promtool_binary)
        report = BacktestReport(
            start,
            end,
            scrape_interval,
            eval_interval,
            list(rule_files),
            events,
            recorder.scrapes,
            signals=signals,
            errors=errors,
            gaps=list(recorder.gaps),
            capped_at=recorder.capped_at,
            max_scrapes=max_scrapes,
        )
        server = PrometheusServer(data, work, prometheus).start()
        try:
            for n, level in enumerate(dependency_levels(recording)):
                server = _backfill(server, level, n, segments, eval_interval, work, promtool_binary, prometheus)
            for seg_start, seg_end in segments:
                steps = _steps(seg_start, seg_end, eval_interval)
                for rule in alerting:
                    matrix = _query_steps(server, rule.expr, steps, eval_interval)
                    firings = evaluate_alert(rule, matrix, steps)
                    if seg_end != end:  # the data stops at a gap: what was active ends with it
                        for f in firings:
                            f.resolved_at = seg_end if f.resolved_at is None else f.resolved_at
                    report.firings.extend(firings)
        finally:
            server.stop()
        report.firings.sort(key=lambda f: (f.firing_at if f.firing_at is not None else f.pending_at, f.alert))
        return report
    finally:
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)


def _steps(start: float, end: float, step: float) -> list[float]:
    count = int((end - start) // step) + 1
    return [start + i * step for i in range(max(count, 1))]


def _query_steps(server: PrometheusServer, expr: str, steps: list[float], step: float) -> list[dict[str, Any]]:
    """``query_range`` over ``steps`` in chunks Prometheus accepts, the values of each series merged."""
    merged: dict[str, dict[str, Any]] = {}
    for i in range(0, len(steps), QUERY_POINTS):
        chunk = steps[i : i + QUERY_POINTS]
        for series in server.query_range(expr, chunk[0], chunk[-1], step):
            key = json.dumps(series.get("metric", {}), sort_keys=True)
            merged.setdefault(key, {"metric": series.get("metric", {}), "values": []})["values"].extend(series.get("values", []))
    return list(merged.values())


def _backfill(
    server: PrometheusServer,
    rules: list[RecordingRule],
    level: int,
    segments: list[tuple[float, float]],
    step: float,
    work: str,
    promtool_binary: str | None,
    prometheus: str | None,
) -> PrometheusServer:
    """Write one level of recording rules as blocks (for each scraped stretch, never the gaps between),
    then restart the server so it serves them."""
    rules_path = os.path.join(work, f"recording-{level}.yml")
    with open(rules_path, "w") as f:
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": f"backtest-level-{level}",
                        "rules": [{"record": r.record, "expr": r.expr, **({"labels": r.labels} if r.labels else {})} for r in rules],
                    }
                ]
            },
            f,
        )
    outs = []
    for n, (start, end) in enumerate(segments):
        out = os.path.join(work, f"blocks-{level}-{n}")
        promtool(
            [
                "tsdb",
                "create-blocks-from",
                "rules",
                f"--start={int(start)}",
                f"--end={int(end) + 1}",
                f"--url={server.url}",
                f"--output-dir={out}",
                f"--eval-interval={step:g}s",
                rules_path,
            ],
            promtool_binary,
        )
        outs.append(out)
    server.stop()
    for out in outs:
        if os.path.isdir(out):
            for block in os.listdir(out):
                shutil.move(os.path.join(out, block), os.path.join(server.data_dir, block))
    return PrometheusServer(server.data_dir, work, prometheus).start()


# --- promtool unit test from the same series ------------------------------------------------------------
def read_series(om_path: str, names: set[str]) -> dict[str, dict[float, float]]:
    """The samples of the metrics named ``names`` in an OpenMetrics file: series text -> {time: value}."""
    series: dict[str, dict[float, float]] = {}
    with open(om_path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                continue
            name_end = min((i for i in (line.find("{"), line.find(" ")) if i >= 0), default=-1)
            if name_end < 0 or line[:name_end] not in names:
                continue
            head, value, stamp = line.rstrip("\n").rsplit(" ", 2)
            series.setdefault(head, {})[float(stamp)] = float(value)
    return series


def write_promtool_test(report: BacktestReport, om_path: str, rule_files: list[str], out_dir: str, eval_times: list[float]) -> str:
    """A ``promtool test rules`` file with the backtest's own input series and, at each of ``eval_times``,
    the alerts the backtest says were firing then: promtool passing it means both evaluations agree.

    The rules are copied without annotations (promtool would compare their rendered templates too,
    which says nothing about when an alert fires). Returns the test file's path.
    """
    recording, alerting = load_rules(rule_files)
    exprs = [r.expr for r in alerting] + [r.expr for r in recording]
    wanted = {n for expr in exprs for n in _NAME.findall(expr)}
    series = read_series(om_path, wanted)
    base = report.start
    n_points = int(round((report.end - base) / report.scrape_interval)) + 1
    input_series = []
    for head, points in sorted(series.items()):
        values = []
        for i in range(n_points):
            v = points.get(round(base + i * report.scrape_interval, 3))
            values.append("_" if v is None else repr(v).replace("inf", "Inf").replace("nan", "NaN"))
        input_series.append({"series": head, "values": " ".join(values)})
    copies = []
    for n, path in enumerate(rule_files):
        with open(path) as f:
            doc = yaml.safe_load(f)
        for group in doc.get("groups", []):
            for rule in group.get("rules", []):
                rule.pop("annotations", None)
        copy = os.path.join(out_dir, f"rules-{n}.yml")
        with open(copy, "w") as f:
            yaml.safe_dump(doc, f)
        copies.append(copy)
    tests = []
    for t in eval_times:
        for rule in alerting:
            firing = [
                f
                for f in report.firings
                if f.alert == rule.name and f.firing_at is not None and f.firing_at <= t and (f.resolved_at is None or t < f.resolved_at)
            ]
            tests.append(
                {"eval_time": f"{int(round(t - base))}s", "alertname": rule.name, "exp_alerts": [{"exp_labels": f.labels} for f in firing]}
            )
    doc = {
        "rule_files": copies,
        "evaluation_interval": f"{report.eval_interval:g}s",
        "tests": [{"interval": f"{report.scrape_interval:g}s", "input_series": input_series, "alert_rule_test": tests}],
    }
    test_path = os.path.join(out_dir, "backtest_test.yml")
    with open(test_path, "w") as f:
        yaml.safe_dump(doc, f, width=1 << 20)
    return test_path


# --- rendering ----------------------------------------------------------------------------------------
def _time(t: float | None) -> str:
    if t is None:
        return "-"
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def _short_labels(labels: dict[str, str]) -> str:
    keep = [f"{k}={v}" for k, v in labels.items() if k not in ("severity", "query_id")]
    return ", ".join(keep)


def bounds_notes(report: BacktestReport) -> list[str]:
    """What of the period was not scraped, hence not evaluated: idle gaps skipped, the scrape cap."""
    notes = []
    if report.gaps:
        skipped = sum(b - a for a, b in report.gaps)
        longest = max(report.gaps, key=lambda g: g[1] - g[0])
        notes.append(
            f"Idle gaps compressed: {len(report.gaps)} gap(s) without events, {_duration(skipped)} in all, were not scraped "
            f"and no alert is evaluated inside them (longest {_time(longest[0])} to {_time(longest[1])})."
        )
    if report.capped_at is not None:
        notes.append(
            f"Scrape cap reached: at most {report.max_scrapes} scrapes (--max-scrapes); nothing after {_time(report.capped_at)} "
            "was scraped or evaluated."
        )
    return notes


def render_table(report: BacktestReport) -> str:
    """The timeline for a terminal: alerts that fired (and those that were only pending), then the signals."""
    lines = [
        f"Backtest {_time(report.start)} to {_time(report.end)} UTC: {report.events} events, {report.scrapes} scrapes "
        f"every {report.scrape_interval:g}s, rules evaluated every {report.eval_interval:g}s"
    ]
    lines.extend(bounds_notes(report))
    fired = report.fired()
    lines.append(f"{len(fired)} alert(s) would have fired" + ("." if fired else ": none."))
    for f in fired:
        until = "still firing at the end" if f.resolved_at is None else f"resolved {_time(f.resolved_at)}"
        lines.append(
            f"  FIRING  {_time(f.firing_at)}  {f.alert} [{f.severity}] for {_duration(f.firing_seconds(report.end))} "
            f"({until}; pending since {_time(f.pending_at)})  {_short_labels(f.labels)}"
        )
        if f.summary:
            lines.append(f"          {f.summary}")
        if f.runbook_url:
            lines.append(f"          runbook: {f.runbook_url}")
    pending = [f for f in report.firings if not f.fired]
    for f in pending:
        lines.append(
            f"  pending {_time(f.pending_at)}  {f.alert} never reached its 'for' (ended {_time(f.resolved_at)})  {_short_labels(f.labels)}"
        )
    lines.append(f"{len(report.signals)} signal(s):")
    for s in report.signals:
        attrs = ", ".join(f"{k}={v}" for k, v in s["attributes"].items() if v is not None)
        lines.append(f"  {_time(s['time'])}  {s['kind']:<18} {s['query']}  {attrs}")
    for e in report.errors:
        lines.append(f"  problem: {e}")
    return "\n".join(lines)


def render_html(report: BacktestReport) -> str:
    """One self-contained HTML file: alert bars and signal marks on one time axis (no scripts)."""
    width, left, row = 1000, 260, 22
    span = max(report.end - report.start, 1.0)

    def x(t: float) -> float:
        return left + (t - report.start) / span * (width - left - 10)

    rows = report.firings
    height = (len(rows) + 3) * row + 30
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">']
    for i in range(6):
        t = report.start + span * i / 5
        svg.append(
            f'<line x1="{x(t):.1f}" y1="10" x2="{x(t):.1f}" y2="{height - 20}" stroke="#ddd"/>'
            f'<text x="{x(t):.1f}" y="{height - 5}" text-anchor="middle">{_time(t)[11:]}</text>'
        )
    colours = {"critical": "#c0392b", "warning": "#e67e22", "info": "#2980b9"}
    for i, f in enumerate(rows):
        y = 20 + i * row
        label = html.escape(f"{f.alert} {_short_labels(f.labels)}"[:40])
        svg.append(f'<text x="4" y="{y + 12}">{label}</text>')
        end = f.resolved_at if f.resolved_at is not None else report.end
        svg.append(
            f'<rect x="{x(f.pending_at):.1f}" y="{y}" width="{max(x(end) - x(f.pending_at), 2):.1f}" height="14" '
            f'fill="#f5d6a0"><title>pending {_time(f.pending_at)}</title></rect>'
        )
        if f.firing_at is not None:
            svg.append(
                f'<rect x="{x(f.firing_at):.1f}" y="{y}" width="{max(x(end) - x(f.firing_at), 2):.1f}" height="14" '
                f'fill="{colours.get(f.severity, "#7f8c8d")}"><title>{html.escape(f.alert)} firing {_time(f.firing_at)} for '
                f"{_duration(f.firing_seconds(report.end))}</title></rect>"
            )
    y = 20 + len(rows) * row + 10
    svg.append(f'<text x="4" y="{y + 12}">signals</text>')
    for s in report.signals:
        svg.append(
            f'<circle cx="{x(s["time"]):.1f}" cy="{y + 7}" r="5" fill="#34495e"><title>{html.escape(_time(s["time"]))} '
            f"{html.escape(s['kind'])} {html.escape(str(s['query']))}</title></circle>"
        )
    svg.append("</svg>")
    table = "\n".join(
        f"<tr><td>{html.escape(f.alert)}</td><td>{html.escape(f.severity)}</td><td>{html.escape(_short_labels(f.labels))}</td>"
        f"<td>{_time(f.pending_at)}</td><td>{_time(f.firing_at)}</td><td>{_duration(f.firing_seconds(report.end))}</td>"
        f"<td>{'<a href=' + chr(34) + html.escape(f.runbook_url) + chr(34) + '>runbook</a>' if f.runbook_url else ''}</td></tr>"
        for f in report.firings
    )
    return (
        "<!doctype html><meta charset='utf-8'><title>spark-state-observer alert backtest</title>"
        f"<h1>Alert backtest</h1><p>{_time(report.start)} to {_time(report.end)} UTC; {report.events} events; "
        f"{len(report.fired())} alert(s) fired.</p>{''.join(f'<p>{html.escape(n)}</p>' for n in bounds_notes(report))}{''.join(svg)}"
        "<table border='1' cellpadding='4'><tr><th>alert</th><th>severity</th><th>labels</th><th>pending</th>"
        f"<th>firing</th><th>fired for</th><th></th></tr>{table}</table>"
    )


def render(report: BacktestReport, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report.to_json(), indent=2, default=str)
    if fmt == "html":
        return render_html(report)
    return render_table(report)


__all__ = ["BacktestError", "BacktestReport", "PrometheusError", "load_rules", "render", "run_backtest", "write_promtool_test"]
