"""The catch-up forecast's arithmetic, and the read rate the inspector takes from a history of a real restart.

The inspector against a real broker and checkpoint is checked end to end in ``tests/e2e/test_kafka_e2e.py``.
"""

from __future__ import annotations

import os
import socket

import pytest

from conftest import FIXTURES, REQUIRE_REAL, eventlog_dir, progress_lines
from spark_state_observer.offline.checkpoint.kafka import read_rate_from_history
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings
from spark_state_observer.signals.kafka_lag import catch_up_seconds

SCENARIO = os.path.join(FIXTURES, "kafka_restart")


def test_catch_up_counts_the_backlog_grown_during_the_delay() -> None:
    # 600 behind, 10/s produced, 40/s read: 30 s of net reading; a 15 s restore first adds 150 records (5 s more)
    assert catch_up_seconds(600, 40.0, 10.0) == pytest.approx(20.0)
    assert catch_up_seconds(600, 40.0, 10.0, delay=15.0) == pytest.approx(15.0 + 750 / 30)
    assert catch_up_seconds(0, None, None) == 0.0  # nothing to read: at the head already
    assert catch_up_seconds(600, 10.0, 10.0) is None  # never: the topic grows as fast as the query reads
    assert catch_up_seconds(600, None, 10.0) is None  # no read rate: no forecast
    assert catch_up_seconds(600, 40.0, None) == pytest.approx(15.0)  # produce rate unknown: counted as 0


def test_the_history_gives_the_read_rate_measured_while_behind(tmp_path: object) -> None:
    history = os.path.join(str(tmp_path), "history.db")
    logs = [eventlog_dir(os.path.join(SCENARIO, run)) for run in ("run1", "run2")]
    signals: list = []
    replay(logs, Settings(http_enabled=False), history=history, on_signal=signals.append)
    query_id = progress_lines(os.path.join(SCENARIO, "run1"))[0]["id"]
    rate, basis = read_rate_from_history(history, query_id)
    forecast = next(s for s in signals if s.kind == "kafka_catch_up_forecast")
    assert rate == forecast.attributes["read_records_per_second"] and basis.startswith("history: read rate measured")
    # 120 records per 2 s trigger at most (maxOffsetsPerTrigger): the rate is the limit's, not the 20/s input's
    assert 40 < rate <= 60


def test_without_a_restart_in_the_history_the_rate_limited_batches_give_the_read_rate(tmp_path: object) -> None:
    """Run 1 alone (no forecast signal yet): the batches that read the most were capped at 120 per 2 s trigger."""
    history = os.path.join(str(tmp_path), "history.db")
    replay([eventlog_dir(os.path.join(SCENARIO, "run1"))], Settings(http_enabled=False), history=history)
    rate, basis = read_rate_from_history(history, progress_lines(os.path.join(SCENARIO, "run1"))[0]["id"])
    assert basis.startswith("history: pace of the batches that read the most") and rate is not None
    # the limit's 60/s, not the 20/s input: over these nine batches 61.6/s, as the batches ran (one overran the
    # 2 s trigger and the next started at once, off Spark's grid of trigger times, which the following ones regain)
    assert 40 < rate <= 60 * 1.05


@pytest.mark.parametrize("listening", [True, False], ids=["never-answers", "refused"])
def test_an_unanswering_broker_is_one_clear_line_and_no_client_log(listening: bool, capfd: pytest.CaptureFixture[str]) -> None:
    """The real Kafka client against a port that accepts and never answers, or refuses: one reason naming the
    bootstrap and the timeout, and nothing of librdkafka's retry log on the terminal."""
    if not REQUIRE_REAL:
        pytest.importorskip("confluent_kafka")
    from spark_state_observer.offline.checkpoint.kafka import admin_latest
    from spark_state_observer.offline.checkpoint.report import CheckpointError

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        if listening:
            server.listen(8)
        bootstrap = f"127.0.0.1:{server.getsockname()[1]}"
        if not listening:
            server.close()
        with pytest.raises(CheckpointError) as raised:
            admin_latest(bootstrap, timeout=1.5)({"orders": [0, 1]})
    message = str(raised.value)
    assert message.startswith(f"no answer from Kafka bootstrap {bootstrap} within 1.5 s (timeout)") and "\n" not in message
    if not listening:  # the client's last word says why
        assert "Connection refused" in message
    out, err = capfd.readouterr()
    assert out == "" and "rdkafka" not in err and "FAIL" not in err
