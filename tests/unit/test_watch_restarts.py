"""A job restarted as new applications: the watcher links them as replay does (issue 25).

The recording (tests/fixtures/incidents/restart_fail_at_start, ``scripts/record_incidents.py``) is a real job:
four processes on one checkpoint, the first good for four batches, the next three new applications whose
state schema the checkpoint refuses, each failing before its first progress. Their event logs are written
into a folder the way Spark writes them (``bench.eventlog_writer``), application after application, while the
watcher follows the folder; what it says is compared with ``replay`` of the same logs, and again after the
watcher itself restarted between the applications.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

import pytest

from bench import precision
from bench.eventlog_writer import ProgressiveLog, recorded_lines
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.history.loaders import load_events
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

SCENARIO = os.path.join(precision.INCIDENTS, "restart_fail_at_start")
SCHEDULED = os.path.join(precision.INCIDENTS, "scheduled_available_now")  # five availableNow runs, each ending cleanly
# a Kafka query stopped, the records it had not read deleted, restarted with failOnDataLoss=false (and the same
# recorded with PySpark 4.0.5 and 3.5.8: scripts/record_kafka_incidents.py --suffix)
KAFKA_LOSS = os.path.join(precision.INCIDENTS, "kafka_records_deleted_tolerated")
LINKING = (kinds.QUERY_RESTARTED, kinds.CRASH_LOOP, kinds.QUERY_TERMINATED)


def applications(scenario: str = SCENARIO) -> list[tuple[str, list[bytes], str]]:
    """Each run's application id, event-log lines and log folder, in the order the runs happened: a rolling log
    (Spark 4's default) or one file (3.5's)."""
    out = []
    for run in precision.run_dirs(scenario):
        folder = os.path.join(run, "eventlog")
        rolling = glob.glob(os.path.join(folder, "eventlog_v2_*"))
        if rolling:
            (where,) = rolling
            files = sorted(glob.glob(os.path.join(where, "events_*")), key=lambda p: int(os.path.basename(p).split("_")[1]))
        else:
            files = glob.glob(os.path.join(folder, "*"))
        lines = [line for path in files for line in recorded_lines(path)]
        start = next(json.loads(line) for line in lines if line.startswith(b'{"Event":"SparkListenerApplicationStart"'))
        out.append((start["App ID"], lines, folder))
    return out


def linked(events: list[tuple[str, str | None, dict[str, Any]]]) -> list[tuple[str, str | None, Any]]:
    """What links the runs: restarts into each run, the crash loop, each run's termination and its class."""
    return sorted((kind, run_id, attrs.get("exception_class")) for kind, run_id, attrs in events if kind in LINKING)


def watcher(tmp_path: Any) -> FleetObserver:
    settings = Settings(http_enabled=False, placement="off", history_path=str(tmp_path / "history.db"))
    options = WatchOptions(history=True, state_path=str(tmp_path / "positions.json"))
    return FleetObserver([str(tmp_path / "logs")], settings, options, serve=False)


def write_while_following(tmp_path: Any, apps: list[tuple[str, list[bytes], str]], fleet: FleetObserver) -> None:
    """Write each application's log flush group by flush group, the watcher polling after every append."""
    for app_id, lines, folder in apps:
        rolling = bool(glob.glob(os.path.join(folder, "eventlog_v2_*")))  # written as Spark wrote it
        log = ProgressiveLog(str(tmp_path / "logs"), app_id, "zstd", rolling=rolling)
        for _ in log.steps(lines):
            fleet.poll_once()
        log.finish()
        fleet.poll_once()


def follow_with_a_watcher_restart(tmp_path: Any, apps: list[tuple[str, list[bytes], str]], before: int) -> None:
    """Follow the applications as they are written, the watcher stopped after the first ``before`` of them and
    a new one started (resuming from the saved positions, the logs read so far replayed) for the rest."""
    (tmp_path / "logs").mkdir()
    first = watcher(tmp_path)
    write_while_following(tmp_path, apps[:before], first)
    first.stop()
    second = watcher(tmp_path)
    second.poll_once()
    write_while_following(tmp_path, apps[before:], second)
    second.stop()


def from_history(tmp_path: Any) -> list[tuple[str, str | None, dict[str, Any]]]:
    frame = load_events(str(tmp_path / "history.db"))
    return [(row.kind, row.run_id, row.attributes) for row in frame.itertuples()]


def replayed(scenario: str = SCENARIO) -> list[tuple[str, str | None, dict[str, Any]]]:
    seen: list = []
    replay([folder for _, _, folder in applications(scenario)], Settings(http_enabled=False, placement="off"), on_signal=seen.append)
    return [(e.kind, e.run_id, e.attributes) for e in seen]


def test_the_recording_is_what_its_truth_says() -> None:
    with open(os.path.join(SCENARIO, "truth.json")) as f:
        truth = json.load(f)
    assert [r["batches"] for r in truth["run_facts"]][1:] == [0, 0, 0]  # the restarts failed before any progress
    assert len({r["query_id"] for r in truth["run_facts"]}) == 1 and len(applications()) == 4


def test_restarts_as_new_applications_are_linked_live_as_in_replay(tmp_path: Any) -> None:
    (tmp_path / "logs").mkdir()
    fleet = watcher(tmp_path)
    write_while_following(tmp_path, applications(), fleet)
    fleet.stop()
    live, expected = linked(from_history(tmp_path)), linked(replayed())
    assert live == expected
    assert sum(kind == kinds.QUERY_RESTARTED for kind, _, _ in live) == 3
    assert [kind for kind, _, _ in live].count(kinds.CRASH_LOOP) == 1
    assert [cls for kind, _, cls in live if kind == kinds.QUERY_TERMINATED].count("state_schema") == 3


def test_and_after_the_watcher_restarted_between_them(tmp_path: Any) -> None:
    follow_with_a_watcher_restart(tmp_path, applications(), 2)
    said = linked(from_history(tmp_path))
    assert sorted(set(said)) == sorted(set(linked(replayed())))
    assert [kind for kind, _, _ in said].count(kinds.CRASH_LOOP) >= 1


def test_scheduled_runs_that_each_stop_cleanly_are_restarts_not_a_crash_loop(tmp_path: Any) -> None:
    """A job run every ~20 s with availableNow, five applications on one checkpoint, the watcher restarted
    between the second and the third: four restarts, five clean terminations and no crash loop, as in replay."""
    follow_with_a_watcher_restart(tmp_path, applications(SCHEDULED), 2)
    said = linked(from_history(tmp_path))
    assert said == linked(replayed(SCHEDULED))
    assert [kind for kind, _, _ in said].count(kinds.QUERY_RESTARTED) == 4
    assert [kind for kind, _, _ in said].count(kinds.QUERY_TERMINATED) == 5
    assert kinds.CRASH_LOOP not in [kind for kind, _, _ in said]


@pytest.mark.parametrize("suffix", ["", "_40", "_35"])
def test_kafka_records_lost_across_a_restart_as_a_new_application_are_found_live_as_in_replay(tmp_path: Any, suffix: str) -> None:
    """The restarted application's first batches read fewer records than their offsets span: the watcher,
    itself restarted between the two applications, tells the same offsets skipped as replay, in the second run
    (recorded with PySpark 4.3, 4.0.5 and 3.5.8)."""
    loss = KAFKA_LOSS + suffix
    follow_with_a_watcher_restart(tmp_path, applications(loss), 1)

    def skipped(events: list[tuple[str, str | None, dict[str, Any]]]) -> list[tuple[str | None, Any, Any]]:
        return [(run_id, a["partitions"], a["records"]) for kind, run_id, a in events if kind == kinds.KAFKA_OFFSETS_SKIPPED]

    with open(os.path.join(loss, "truth.json")) as f:
        (restart,) = json.load(f)["restarts"]
    live = skipped(from_history(tmp_path))
    assert live == skipped(replayed(loss))
    assert live and {run_id for run_id, _, _ in live} == {restart["run_id"]}
