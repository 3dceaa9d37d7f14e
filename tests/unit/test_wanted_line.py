"""``wanted_line`` (spark_state_observer.placement.task_lines), placement's filter before any parse, against the filter it replaced:
one search per state metric name and per lost reason anywhere in the line. Equal on every line of every recorded
event log, and on lines made to sit at its edges."""

from __future__ import annotations

import os

import pytest

from conftest import FIXTURES
from spark_state_observer.offline.eventlog import open_decompressed
from spark_state_observer.placement import task_lines
from spark_state_observer.placement.task_lines import LINE_PREFIXES, STATE_METRICS, wanted_line

_LOST = tuple(f'"Reason":"{r}"'.encode() for r in sorted(task_lines.LOST_REASONS))
_NAMES = tuple(name.encode() for name in STATE_METRICS)
_STATEFUL_ONLY = task_lines._STATEFUL_ONLY


def reference(line: bytes) -> bool:
    """The filter as it was: every name searched in every task end and plan, every lost reason anywhere."""
    if not line.startswith(LINE_PREFIXES):
        return False
    if not line.startswith(_STATEFUL_ONLY) or any(name in line for name in _NAMES):
        return True
    return line.startswith(task_lines.TASK_END_LINE) and any(reason in line for reason in _LOST)


def recorded_lines() -> list[bytes]:
    lines: list[bytes] = []
    for root, _dirs, files in os.walk(FIXTURES):
        if "eventlog" not in root:
            continue
        for name in files:
            if name.startswith((".", "appstatus")) or name.endswith(".crc"):
                continue
            with open_decompressed(os.path.join(root, name)) as stream:
                lines.extend(stream.read().splitlines())
    return lines


def test_every_state_metric_name_holds_a_hint() -> None:
    assert all(any(hint in name for hint in task_lines._STATE_HINTS) for name in _NAMES)


def test_equal_to_the_reference_on_every_recorded_line() -> None:
    lines = recorded_lines()
    task_ends = [line for line in lines if line.startswith(task_lines.TASK_END_LINE)]
    assert len(task_ends) > 10_000 and any(not reference(line) for line in task_ends)
    assert any(reference(line) for line in task_ends if any(reason in line for reason in _LOST))  # lost tasks recorded
    differ = [line[:200] for line in lines if wanted_line(line) != reference(line)]
    assert not differ


@pytest.mark.parametrize(
    "line",
    [
        b'{"Event":"SparkListenerTaskEnd","Stage ID":1,"Task End Reason":{"Reason":"ExecutorLostFailure","Executor ID":"1"}}',
        b'{"Event":"SparkListenerTaskEnd","Stage ID":1,"Task End Reason":{"Reason":"Resubmitted"}}',
        b'{"Event":"SparkListenerTaskEnd","Task End Reason":{"Reason":"Success"},"Accumulables":[{"Name":"memory used by state"}]}',
        b'{"Event":"SparkListenerTaskEnd","Task End Reason":{"Reason":"Success"},"Accumulables":[{"Name":"RocksDB: load - time taken to load the store"}]}',
        b'{"Event":"SparkListenerTaskEnd","Task End Reason":{"Reason":"Success"},"Accumulables":[{"Name":"stateless"}]}',
        b'{"Event":"SparkListenerTaskEnd","Task End Reason":{"Reason":"Success"}}',
        b'{"Event":"SparkListenerTaskEnd","Task End Reason":{"Reason":"TaskKilled","Kill Reason":"ExecutorLostFailure"}}',
        b'{"Event":"SparkListenerTaskEnd","Task End Reason":{"Reason":"ExecutorLost"}}',
        b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart","sparkPlanInfo":{"metrics":[{"name":"number of total state rows"}]}}',
        b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart","sparkPlanInfo":{"metrics":[]}}',
        b'{"Event":"SparkListenerJobStart","Job ID":1}',
        b'{"Event":"SparkListenerStageCompleted"}',
        b"",
    ],
)
def test_equal_to_the_reference_at_the_edges(line: bytes) -> None:
    assert wanted_line(line) == reference(line)
