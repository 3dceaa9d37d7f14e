"""Replay and backtest carry the recorded application's identity (issue 25): its series, signals and alerts
name the application, as a live observer's do, instead of "query X of  is stopped"."""

from __future__ import annotations

import glob
import io
import json
import os
import re
from typing import Any

from conftest import FIXTURES, ROOT
from spark_state_observer.mixin.prometheus_text import render_template
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.offline.backtest.recording import record_series
from spark_state_observer.offline.backtest.rules import load_rules
from spark_state_observer.offline.eventlog import expand
from spark_state_observer.offline.log_identity import application_of
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

RUNS = sorted(glob.glob(os.path.join(FIXTURES, "schema_failure", "run*", "eventlog")))


def recorded_app_name() -> str:
    """What Spark wrote in the first log's application start."""
    from spark_state_observer.capture.codecs import open_decompressed

    with io.BufferedReader(open_decompressed(expand(RUNS[:1])[0])) as stream:
        return next(json.loads(line)["App Name"] for line in stream if b"SparkListenerApplicationStart" in line)


def test_replayed_signals_and_series_name_the_application() -> None:
    name = recorded_app_name()
    seen: list[SignalEvent] = []
    result = replay(RUNS, Settings(http_enabled=False), on_signal=seen.append)
    assert seen and all(dict(e.app).get("app") == name for e in seen)
    assert all(f" of {name} " in e.describe() for e in seen)
    batch_ids = [line for line in result.exposition().splitlines() if line.startswith("spark_streaming_batch_id{")]
    assert batch_ids and all(f'app="{name}"' in line for line in batch_ids)


def test_one_log_gives_its_id_and_logs_of_other_jobs_give_no_name(tmp_path: Any) -> None:
    one = application_of(RUNS[:1])
    assert one.name == recorded_app_name() and one.app_id.startswith(("local-", "app-"))
    assert application_of(RUNS).app_id == ""  # two applications of one job: the name, no single id
    assert application_of([str(tmp_path)]).name == ""  # nothing recorded: unknown, as before


def test_a_backtest_summary_names_the_application(tmp_path: Any) -> None:
    name = recorded_app_name()
    _, signals, _, _ = record_series(RUNS, str(tmp_path / "series.om"), 15.0)
    with open(tmp_path / "series.om") as f:
        text = f.read()
    line = next(line for line in text.splitlines() if line.startswith("spark_streaming_batch_id{"))
    labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line.split("}")[0]))
    assert labels["app"] == name
    _, alerts = load_rules([os.path.join(ROOT, "alerts", "rules.yml")])
    templates = [a.annotations["summary"] for a in alerts if "$labels.app" in a.annotations.get("summary", "")]
    assert templates and all(f" of {name}" in render_template(t, labels, 1.0) for t in templates)
    assert signals and all((s.get("app") or {}).get("app") == name for s in signals)
