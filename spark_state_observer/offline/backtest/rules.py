"""The rules a backtest evaluates, read from Prometheus rule files, and the order recording rules are
backfilled in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from spark_state_observer.mixin import prometheus_text
from spark_state_observer.offline.backtest.settings import BacktestError

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


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


MAX_RULE_FILE_BYTES = 16 << 20
MAX_RULE_FILE_VALUES = 1_000_000


def load_rules(paths: Iterable[str]) -> tuple[list[RecordingRule], list[AlertRule]]:
    """The recording and alerting rules of Prometheus rule files; a clear ``BacktestError`` if unreadable
    (also for a file whose YAML aliases would expand without bound, or whose shape is not a rule file's)."""
    from spark_state_observer.mixin.config import bounded_yaml

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
    """A rule's ``for`` in seconds, read with Prometheus' own grammar (``1h30m``, ``90s``, ``0m``)."""
    try:
        return prometheus_text.parse_duration(text)
    except prometheus_text.DurationError as exc:
        raise BacktestError(f"{text[:40]!r} is {exc}") from None


def dependency_levels(rules: list[RecordingRule]) -> list[list[RecordingRule]]:
    """Recording rules grouped so that each level only reads series of earlier levels (or raw ones)."""
    records = {r.record for r in rules}
    needs = {r.record: {n for n in METRIC_NAME.findall(r.expr) if n in records and n != r.record} for r in rules}
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
