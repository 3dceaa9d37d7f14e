"""Backtests of recorded runs whose alerts are checked against real Prometheus and promtool."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pytest
from test_backtest import RULES, _logs

from conftest import FIXTURES, ROOT, need
from spark_state_observer.offline import backtest as bt
from spark_state_observer.offline.backtest import formats


# --- real Prometheus and promtool -------------------------------------------------------------------
@pytest.fixture
def tools() -> None:
    need("prometheus")
    need("promtool")


def _agrees_with_promtool(
    report: bt.BacktestReport, work: str, tamper: bool = False, rules: list[str] = RULES
) -> subprocess.CompletedProcess[str]:
    if tamper:  # move every firing one evaluation later: promtool must then disagree
        for f in report.firings:
            if f.firing_at is not None:
                f.firing_at += report.eval_interval
    steps = [report.start + i * report.eval_interval for i in range(int((report.end - report.start) // report.eval_interval) + 1)]
    test = bt.write_promtool_test(report, os.path.join(work, "series.om"), rules, work, steps)
    return subprocess.run([shutil.which("promtool") or "promtool", "test", "rules", test], capture_output=True, text=True)


@pytest.mark.slow
def test_a_failed_restart_fires_query_failed_when_it_fails_and_promtool_agrees(tools, tmp_path) -> None:
    work = str(tmp_path / "bt")
    report = bt.run_backtest(_logs("schema_failure"), RULES, scrape_interval=5, eval_interval=5, work_dir=work)
    fired = {f.alert: f for f in report.fired()}
    assert set(fired) == {"SparkStreamingQueryFailed"}, formats.render_table(report)
    failed_at = next(s["time"] for s in report.signals if s["kind"] == "query_terminated" and s["attributes"]["outcome"] == "exception")
    # fires at the first evaluation after the failure, not before
    assert failed_at <= fired["SparkStreamingQueryFailed"].firing_at <= failed_at + 2 * report.eval_interval
    assert fired["SparkStreamingQueryFailed"].labels["query"] == "demo_dedup_window"
    assert fired["SparkStreamingQueryFailed"].runbook_url.endswith("#sparkstreamingqueryfailed")
    done = _agrees_with_promtool(report, work)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _agrees_with_promtool(report, work, tamper=True).returncode != 0


@pytest.mark.slow
def test_a_clean_run_with_a_restart_fires_nothing(tools, tmp_path) -> None:
    report = bt.run_backtest(_logs("rocksdb_restart"), RULES, scrape_interval=5, eval_interval=5, work_dir=str(tmp_path / "bt"))
    assert report.fired() == [], formats.render_table(report)
    assert {s["kind"] for s in report.signals} >= {"query_restarted", "restore"}
    done = _agrees_with_promtool(report, str(tmp_path / "bt"))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_events_the_observer_dropped_fire_the_observer_alert(tools, tmp_path) -> None:
    """A real log with one progress line cut short (as a crash mid-write leaves it) in the middle."""
    source = _logs("rocksdb_plain_log")
    folder = tmp_path / "log"
    shutil.copytree(source[0], folder / os.path.basename(source[0]))
    (log_file,) = glob.glob(str(folder / "*" / "events_*"))
    with open(log_file, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    progress = [i for i, line in enumerate(lines) if b"QueryProgressEvent" in line]
    assert len(progress) >= 2
    cut = progress[1]
    lines[cut] = lines[cut][: len(lines[cut]) // 2] + b"\n"
    with open(log_file, "wb") as f:
        f.writelines(lines)
    report = bt.run_backtest(
        [str(folder / os.path.basename(source[0]))], RULES, scrape_interval=5, eval_interval=5, work_dir=str(tmp_path / "bt")
    )
    fired = [f for f in report.fired() if f.alert == "SparkStateObserverDroppingEvents"]
    assert fired and fired[0].labels["reason"] == "malformed", formats.render_table(report)
    assert report.errors  # the broken line is reported, the rest of the log was read
    assert any(s["kind"] == "query_terminated" for s in report.signals)


@pytest.mark.slow
def test_formats(tools, tmp_path) -> None:
    report = bt.run_backtest(_logs("schema_failure"), RULES, scrape_interval=5, eval_interval=5, work_dir=str(tmp_path / "bt"))
    import json

    doc = json.loads(bt.render(report, "json"))
    failed = [f for f in doc["firings"] if f["alert"] == "SparkStreamingQueryFailed"]
    assert failed and failed[0]["firing_seconds"] >= 0 and failed[0]["labels"]["query"] == "demo_dedup_window"
    page = bt.render(report, "html")
    assert page.startswith("<!doctype html>") and "<svg" in page and "SparkStreamingQueryFailed" in page and "<script" not in page
    assert "FIRING" in bt.render(report, "table")


@pytest.mark.slow
def test_the_backtest_command_writes_a_report(tools, tmp_path) -> None:
    from spark_state_observer.cli.main import main

    out = tmp_path / "report.json"
    assert (
        main(
            ["backtest", *_logs("schema_failure"), "--scrape-interval", "5", "--eval-interval", "5", "--format", "json", "--out", str(out)]
        )
        == 0
    )
    import json

    doc = json.loads(out.read_text())
    assert any(f["alert"] == "SparkStreamingQueryFailed" and f["firing_at"] for f in doc["firings"])
    assert main(["backtest", str(tmp_path / "missing.log"), "--rules", RULES[1]]) == 2  # a clear error, no traceback


def _incident_logs(name: str) -> list[str]:
    paths = sorted(glob.glob(os.path.join(FIXTURES, "incidents", name, "run*", "eventlog", "*")))
    assert paths, f"no recorded event logs for incidents/{name}"
    return paths


def _mixin_rules(tmp_path, *overrides: str) -> list[str]:
    """The rule files the mixin generates for the default configuration changed by ``overrides``."""
    from spark_state_observer.mixin.config import load_config
    from spark_state_observer.mixin.rules import rule_files

    paths = []
    for name, text in rule_files(load_config(None, overrides)).items():
        path = tmp_path / name
        path.write_text(text)
        paths.append(str(path))
    return sorted(paths)  # recording.yml, rules.yml


@pytest.mark.slow
def test_a_crash_loop_fires_at_the_restart_that_completes_it_and_not_before(tools, tmp_path) -> None:
    """Five failing runs on one checkpoint (recorded): the crash-loop alert fires with the third restart."""
    work = str(tmp_path / "bt")
    rules = _mixin_rules(tmp_path)
    report = bt.run_backtest(_incident_logs("crash_loop_503"), rules, scrape_interval=15, eval_interval=15, work_dir=work)
    loops = [f for f in report.fired() if f.alert == "SparkStreamingQueryCrashLooping"]
    assert len(loops) == 1, formats.render_table(report)
    restarts = sorted(s["time"] for s in report.signals if s["kind"] == "query_restarted")
    assert len(restarts) == 4
    third = restarts[2]
    # not before the loop is complete; at the first evaluation that can see the third restart's scrape
    assert third < loops[0].firing_at <= third + report.scrape_interval + report.eval_interval
    assert loops[0].labels["query"] == "crash_loop_503" and loops[0].severity == "critical"
    done = subprocess.run(
        [
            shutil.which("promtool") or "promtool",
            "test",
            "rules",
            bt.write_promtool_test(
                report,
                os.path.join(work, "series.om"),
                rules,
                work,
                [report.start + i * report.eval_interval for i in range(int((report.end - report.start) // report.eval_interval) + 1)],
            ),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_set_overrides_move_a_threshold_and_change_what_fires(tools, tmp_path) -> None:
    """`--set thresholds.restore_seconds=...`: last week's restarts under a stricter restore threshold."""
    logs = _incident_logs("dedup_agg_restart_43")
    (tmp_path / "d").mkdir()
    default = bt.run_backtest(logs, _mixin_rules(tmp_path / "d"), scrape_interval=5, eval_interval=5, work_dir=str(tmp_path / "a"))
    assert not [f for f in default.fired() if f.alert == "SparkStateRestoreTooLong"], formats.render_table(default)
    (tmp_path / "s").mkdir()
    strict = bt.run_backtest(
        logs,
        _mixin_rules(tmp_path / "s", "thresholds.restore_seconds=0.05"),
        scrape_interval=5,
        eval_interval=5,
        work_dir=str(tmp_path / "b"),
    )
    restores = [f for f in strict.fired() if f.alert == "SparkStateRestoreTooLong"]
    restored_at = min(s["time"] for s in strict.signals if s["kind"] == "restore")
    assert restores and all(f.firing_at >= restored_at for f in restores), formats.render_table(strict)


@pytest.mark.slow
def test_unbounded_state_fires_after_its_for_and_not_before(tools, tmp_path) -> None:
    """A recorded run whose state only grows: SparkStateUnbounded fires once the observer's verdict has held for
    the alert's ``for``: at once by default (the verdict already asks for growth over its window), a minute later
    with ``for: 1m``; the old default's 30m never fired on the 4-minute recording (issue 51)."""
    logs = _incident_logs("unbounded_growth")
    runs = {}
    for name, overrides in (
        ("default", ()),
        ("short", ("for_durations.SparkStateUnbounded=1m",)),
        ("old", ("for_durations.SparkStateUnbounded=30m",)),
    ):
        (tmp_path / name).mkdir()
        runs[name] = bt.run_backtest(
            logs, _mixin_rules(tmp_path / name, *overrides), scrape_interval=15, eval_interval=15, work_dir=str(tmp_path / f"{name}-bt")
        )
    old = runs["old"]
    assert not [f for f in old.fired() if f.alert == "SparkStateUnbounded"] and [f for f in old.firings if f.alert == "SparkStateUnbounded"]
    for name, delay in (("default", 0), ("short", 60)):
        report = runs[name]
        fired = [f for f in report.fired() if f.alert == "SparkStateUnbounded"]
        verdict = min(s["time"] for s in report.signals if s["kind"] == "state_unbounded")
        assert len(fired) == 1 and fired[0].labels["operator"] == "stateStoreSave", formats.render_table(report)
        assert verdict + delay <= fired[0].firing_at <= verdict + delay + report.scrape_interval + 2 * report.eval_interval


CUSTOM = os.path.join(ROOT, "tests", "data", "mixin-custom.yaml")


@pytest.mark.slow
def test_a_configuration_that_selects_its_job_still_sees_the_recording(tools, tmp_path) -> None:
    """`backtest --config` with a selector on `job`: the replayed series carry a job it selects, so the
    crash loop fires as it does under the defaults (it used to fire nothing: every series had the default job)."""
    import json

    from spark_state_observer.cli.main import main

    out = tmp_path / "report.json"
    args = ["--config", CUSTOM, "--scrape-interval", "15", "--eval-interval", "15", "--format", "json", "--out", str(out)]
    assert main(["backtest", *_incident_logs("crash_loop_503"), *args]) == 0
    fired = {f["alert"] for f in json.loads(out.read_text())["firings"] if f["firing_at"]}
    assert {"SparkStreamingQueryCrashLooping", "SparkStreamingQueryFailed"} <= fired


FLEET = ("crash_loop_503", "dedup_agg_restart_35", "restart_fail_at_start")


def _truth(name: str) -> dict:
    import json

    with open(os.path.join(FIXTURES, "incidents", name, "truth.json")) as f:
        return json.load(f)


def _app_of_run(name: str, run: str) -> str:
    """The application id Spark gave the recorded run (its event log is named after it)."""
    import re

    (log,) = glob.glob(os.path.join(FIXTURES, "incidents", name, run, "eventlog", "*"))
    found = re.search(r"local-\d+", os.path.basename(log))
    assert found, log
    return found.group(0)


@pytest.mark.slow
def test_the_alert_history_across_applications_follows_the_recorded_fleet(tools, tmp_path) -> None:
    """Three recorded jobs (two crash loops, one clean restart), each run a new application, given newest
    first: the history says which application each fire, resolve and re-fire happened in."""
    from spark_state_observer.mixin.config import MixinConfig
    from spark_state_observer.offline.backtest.history import CONTINUED, FIRED, GAP, REFIRED, RESOLVED, alert_history

    logs = [path for name in reversed(FLEET) for path in _incident_logs(name)]  # not in time order: the backtest orders them
    report = bt.run_backtest(
        logs, _mixin_rules(tmp_path), scrape_interval=15, eval_interval=15, idle_keep=600, work_dir=str(tmp_path / "bt")
    )
    history = alert_history(report)
    loop_after = MixinConfig().thresholds.crash_loop_restarts

    def changes(name: str, alert: str) -> list:
        query_id = _truth(name)["run_facts"][0]["query_id"]
        return [t for t in history if t.alert == alert and t.labels.get("query_id") == query_id]

    # a crash loop fires once, in the application whose restart completes it, and never resolves: every run failed
    for name in ("crash_loop_503", "restart_fail_at_start"):
        truth = _truth(name)
        loop = changes(name, "SparkStreamingQueryCrashLooping")
        assert [t.change for t in loop if t.change in (FIRED, REFIRED, RESOLVED)] == [FIRED], formats.render_history(report)
        completing = truth["restarts"][loop_after - 1]["run"]
        assert loop[0].application == _app_of_run(name, completing), (name, completing)
        assert {t.change for t in loop[1:]} <= {GAP, CONTINUED}
    # the failure alert: fired in the first failing run, resolved only when the next application started the
    # query, fired again in that application when it failed too
    for name, first_failing in (
        ("crash_loop_503", "run1"),
        ("restart_fail_at_start", _truth("restart_fail_at_start")["failure"]["failing_runs"][0]),
    ):
        failed = [t for t in changes(name, "SparkStreamingQueryFailed") if t.change in (FIRED, REFIRED, RESOLVED)]
        assert failed and failed[0].change == FIRED and failed[0].application == _app_of_run(name, first_failing), formats.render_history(
            report
        )
        for before, resolved, after in zip(failed, failed[1:], failed[2:]):
            if resolved.change == RESOLVED:
                assert resolved.run > before.run and resolved.application != before.application  # across an application boundary
                assert after.change == REFIRED and after.application == resolved.application
    assert [t.change for t in changes("crash_loop_503", "SparkStreamingQueryFailed")].count(REFIRED) >= 1
    # a clean restart pages no one about failures or loops
    assert not changes("dedup_agg_restart_35", "SparkStreamingQueryFailed") + changes(
        "dedup_agg_restart_35", "SparkStreamingQueryCrashLooping"
    )
    # every application named is one the recordings ran
    recorded = {
        _app_of_run(name, run)
        for name in FLEET
        for run in sorted(os.listdir(os.path.join(FIXTURES, "incidents", name)))
        if run.startswith("run")
    }
    assert {t.application for t in history} <= recorded
    text = bt.render(report, "history")
    assert all(t.application in text for t in history)


@pytest.mark.slow
def test_kafka_records_deleted_before_they_were_read_page_and_a_transactional_topic_does_not(tools, tmp_path) -> None:
    """Recorded on a real broker: a query stopped, the records it had not read deleted, restarted with
    failOnDataLoss=false. The critical data-loss alert fires, once, at the first evaluation that can see the
    restarted run's batch that read fewer records than its offsets span; promtool agrees. A topic whose every
    batch reads fewer records than offsets (a transactional producer's commit markers) pages nobody."""
    rules = _mixin_rules(tmp_path)
    work = str(tmp_path / "loss")
    report = bt.run_backtest(_incident_logs("kafka_records_deleted_tolerated"), rules, scrape_interval=15, eval_interval=15, work_dir=work)
    losses = [f for f in report.fired() if f.alert == "SparkStreamingKafkaDataLossRisk"]
    assert len(losses) == 1 and losses[0].severity == "critical", formats.render_table(report)
    skipped = min(s["time"] for s in report.signals if s["kind"] == "kafka_offsets_skipped")
    assert skipped < losses[0].firing_at <= skipped + report.scrape_interval + report.eval_interval
    assert losses[0].labels["topic"] == "events" and losses[0].labels["kind"] == "skipped"
    assert not [f for f in report.fired() if f.alert.startswith("SparkStreamingKafka") and f.alert != "SparkStreamingKafkaDataLossRisk"]
    done = _agrees_with_promtool(report, work, rules=rules)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _agrees_with_promtool(report, work, tamper=True, rules=rules).returncode != 0
    clean = bt.run_backtest(
        _incident_logs("kafka_steady_transactional"), rules, scrape_interval=15, eval_interval=15, work_dir=str(tmp_path / "clean")
    )
    assert clean.fired() == [], formats.render_table(clean)


@pytest.mark.slow
def test_a_schedule_whose_runs_stop_fires_overdue_once_the_next_run_is_late_and_not_before(tools, tmp_path) -> None:
    """Recorded: five availableNow runs ~31 s apart, each a new application that stopped cleanly, then none. Scraped
    on for 15 minutes after the last run (as the watcher keeps exporting a scheduled query between its runs), the
    overdue alert fires once: its lateness allowed is 5 minutes (a quarter of 31 s is less), then its ``for``; never
    while the runs came. Neither down nor a crash loop: the query was on a schedule. promtool agrees, and disagrees
    when the firing is moved."""
    rules = _mixin_rules(tmp_path)
    work = str(tmp_path / "bt")
    report = bt.run_backtest(
        _incident_logs("scheduled_available_now"), rules, scrape_interval=15, eval_interval=15, tail_seconds=900, work_dir=work
    )
    # the first run's only batch lost all 2,000 of its rows to the watermark (rate-micro-batch stamps them from 0, the
    # first watermark is 0): the late-rows alert says so while a run of the query runs; nothing else fires
    fired = report.fired()
    assert sorted({f.alert for f in fired}) == ["SparkStreamingLateRowsDropped", "SparkStreamingScheduledRunOverdue"], formats.render_table(
        report
    )
    (overdue,) = [f for f in fired if f.alert == "SparkStreamingScheduledRunOverdue"]
    starts = sorted(s["time"] for s in report.signals if s["kind"] == "query_started")
    restarts = [s for s in report.signals if s["kind"] == "query_restarted"]
    interval = restarts[-1]["attributes"]["schedule_interval_seconds"]
    assert len(starts) == 5 and 25 < interval < 40  # start to start: ~25 s paused and ~6 s run
    due = starts[-1] + interval + max(0.25 * interval, 300.0)
    assert due + 120 < overdue.firing_at <= due + 120 + report.scrape_interval + report.eval_interval
    assert overdue.severity == "warning" and overdue.labels["query"] == "scheduled_available_now"
    done = _agrees_with_promtool(report, work, rules=rules)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _agrees_with_promtool(report, work, tamper=True, rules=rules).returncode != 0


@pytest.mark.slow
def test_rolling_deploys_by_sigterm_page_nobody_and_drivers_killed_without_a_word_page_a_crash_loop(tools, tmp_path) -> None:
    """Recorded with spark-submit: four drivers on one checkpoint within two minutes, each sent SIGTERM (a deploy:
    the application's end logged, the query's termination not) or SIGKILL (the OOM killer: neither). With the
    mixin's rules against a real Prometheus, the deploys fire no crash loop (nor anything critical); the kills fire
    SparkStreamingQueryCrashLooping once, at the first evaluation that can see the third restart. promtool agrees."""
    rules = _mixin_rules(tmp_path)
    for name in ("deploy_sigterm", "deploy_sigterm_late_termination"):  # the second: one termination logged after the end
        deploys = bt.run_backtest(_incident_logs(name), rules, scrape_interval=15, eval_interval=15, work_dir=str(tmp_path / name))
        critical = [f for f in deploys.fired() if f.alert == "SparkStreamingQueryCrashLooping" or f.severity == "critical"]
        assert not critical, formats.render_table(deploys)
    work = str(tmp_path / "k")
    kills = bt.run_backtest(_incident_logs("deploy_sigkill"), rules, scrape_interval=15, eval_interval=15, work_dir=work)
    (loop,) = [f for f in kills.fired() if f.alert == "SparkStreamingQueryCrashLooping"]
    third = sorted(s["time"] for s in kills.signals if s["kind"] == "query_restarted")[2]
    assert third < loop.firing_at <= third + kills.scrape_interval + kills.eval_interval
    done = _agrees_with_promtool(kills, work, rules=rules)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_a_record_from_the_future_fires_late_rows_dropped_once_and_rows_late_within_the_delay_do_not(tools, tmp_path) -> None:
    """Recorded: a windowed count whose watermark a row two hours in the future moved ahead of every later row. With
    the mixin's rules against a real Prometheus, SparkStreamingLateRowsDropped (warning) fires once, at the first
    evaluation that can see the first batch that dropped rows, and resolves when the query stops; promtool agrees.
    The recording whose late rows stay within the watermark's delay fires nothing."""
    rules = _mixin_rules(tmp_path)
    work = str(tmp_path / "future")
    report = bt.run_backtest(_incident_logs("late_future_record"), rules, scrape_interval=15, eval_interval=15, work_dir=work)
    (late,) = [f for f in report.fired() if f.alert == "SparkStreamingLateRowsDropped"]
    first = _truth("late_future_record")["late_rows"][0]["from"]
    assert first < late.firing_at <= first + report.scrape_interval + report.eval_interval, formats.render_table(report)
    assert late.severity == "warning" and late.labels["query"] == "late_future_record"
    assert not [f for f in report.fired() if f.severity == "critical"], formats.render_table(report)
    done = _agrees_with_promtool(report, work, rules=rules)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _agrees_with_promtool(report, work, tamper=True, rules=rules).returncode != 0
    clean = bt.run_backtest(
        _incident_logs("late_within_delay"), rules, scrape_interval=15, eval_interval=15, work_dir=str(tmp_path / "clean")
    )
    assert [f for f in clean.fired() if f.alert == "SparkStreamingLateRowsDropped"] == [], formats.render_table(clean)
