"""A query's counters go on across the applications that run it under ``watch`` (issue 50).

The recording (tests/fixtures/incidents/crash_loop_503, ``scripts/record_incidents.py``) is a real crash loop: five
applications on one checkpoint, each failing in its ``foreachBatch``. Their event logs are written into a watched
folder one application after the other, as Spark wrote them (``bench.eventlog_writer``). The query's series carry
no application id, so each application writes the same series: its counters must go on from the applications
before (``restarts_total`` 4 after the fifth, not 1), whether the earlier applications are still followed (within
their grace) or already forgotten.
"""

from __future__ import annotations

import glob
import os
from typing import Any

import pytest
from test_watch_restarts import applications, write_while_following
from test_watch_stall_clock import values

from bench import precision
from bench.eventlog_writer import ProgressiveLog
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.settings import Settings

SCENARIO = os.path.join(precision.INCIDENTS, "crash_loop_503")


def written_until_its_end(tmp_path: Any, app: tuple[str, list[bytes], str], fleet: FleetObserver) -> bytes:
    """Write one application's log as Spark did, the watcher polling after each flush; the exposition just before its
    application's end (with no grace the application is forgotten as soon as it is seen finished), then the end."""
    app_id, lines, folder = app
    end = next(i for i, line in enumerate(lines) if line.startswith(b'{"Event":"SparkListenerApplicationEnd"'))
    log = ProgressiveLog(str(tmp_path / "logs"), app_id, "zstd", rolling=bool(glob.glob(os.path.join(folder, "eventlog_v2_*"))))
    for _ in log.steps(lines[:end]):
        fleet.poll_once()
    series = fleet.exposition()
    for _ in log.steps(lines[end:]):
        fleet.poll_once()
    log.finish()
    fleet.poll_once()
    return series


@pytest.mark.parametrize("grace", [300.0, 0.0], ids=["followed", "forgotten"])
def test_counters_of_a_crash_loop_across_applications_go_on_from_the_applications_before(tmp_path: Any, grace: float) -> None:
    apps = applications(SCENARIO)
    (tmp_path / "logs").mkdir()
    settings = Settings(http_enabled=False, placement="off")
    fleet = FleetObserver([str(tmp_path / "logs")], settings, WatchOptions(grace_seconds=grace), serve=False)
    seen = []
    for app in apps:
        series = written_until_its_end(tmp_path, app, fleet)
        seen.append(
            (
                values(series, "spark_streaming_query_starts_total"),
                values(series, "spark_streaming_query_restarts_total"),
                values(series, "spark_streaming_query_terminations_total", outcome="exception"),
            )
        )
    fleet.stop()
    # one series per counter (the newest application's), each application's counting on from the ones before
    assert seen == [([float(n)], [float(n - 1)], [float(n)]) for n in range(1, len(apps) + 1)]


def test_the_batches_of_the_first_application_stay_counted_in_the_next(tmp_path: Any) -> None:
    apps = applications(SCENARIO)
    (tmp_path / "logs").mkdir()
    fleet = FleetObserver([str(tmp_path / "logs")], Settings(http_enabled=False, placement="off"), WatchOptions(), serve=False)
    write_while_following(tmp_path, apps[:1], fleet)
    first = values(fleet.exposition(), "spark_streaming_batches_total")
    write_while_following(tmp_path, apps[1:2], fleet)
    second = values(fleet.exposition(), "spark_streaming_batches_total")
    fleet.stop()
    assert first and first[0] > 0
    assert second == first  # the second application failed before its first batch: the first's batches stay
