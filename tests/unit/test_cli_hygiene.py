"""One-line outputs stay one line, summaries read well without an application, and a start is quiet (issue 51)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

from conftest import FIXTURES, ROOT, eventlog_dir
from spark_state_observer.mixin.config import MixinConfig
from spark_state_observer.mixin.prometheus_text import render_template
from spark_state_observer.mixin.rules import alert_groups
from spark_state_observer.zerocode import boot_path


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_state_observer.cli", *args], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT
    )


def test_replay_prints_a_failed_run_as_one_line_without_its_jvm_stack_trace() -> None:
    (run,) = glob.glob(os.path.join(FIXTURES, "incidents", "fail_udf_value_error", "run*"))
    done = cli("replay", eventlog_dir(run))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    failed = [line for line in lines if "query_terminated" in line]
    assert len(failed) == 1 and "ValueError: no reference bucket for this value" in failed[0]
    assert not any(line.lstrip().startswith("at ") for line in lines)  # no frame of the trace leaked onto its own line
    assert len(lines) < 10
    events = cli("replay", eventlog_dir(run), "--format", "events")  # the machine-readable form keeps the whole trace
    assert "\\tat org.apache.spark" in events.stdout


def test_every_alert_summary_reads_well_without_an_application_label() -> None:
    rules = [rule for group in alert_groups(MixinConfig()).values() for rule in group]
    labels = {"query": "q1", "operator": "dedupe", "executor": "3", "source": "kafka", "topic": "t"}
    for rule in rules:
        for text in rule["annotations"].values():
            shown = render_template(text, labels, 1.0)
            assert " of  " not in shown and not shown.rstrip().endswith(" of") and "{{" not in shown.replace("{{ $value", ""), shown
    with_app = [render_template(r["annotations"]["summary"], {**labels, "app": "billing"}, 1.0) for r in rules]
    assert sum("q1 of billing" in s for s in with_app) > 5


def test_starting_spark_with_the_listener_attached_emits_no_pandas_future_warning(tmp_path) -> None:
    job = tmp_path / "job.py"
    job.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "spark.stop()\n"
        "print('started')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([boot_path(), ROOT]), "SPARK_STATE_OBSERVER_HTTP_ENABLED": "false"}
    done = subprocess.run([sys.executable, str(job)], capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
    assert "started" in done.stdout, done.stderr[-2000:]
    assert "FutureWarning" not in done.stderr, done.stderr[-2000:]
