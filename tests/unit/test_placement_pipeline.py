"""Placement wired into the pipeline: replay (and watch) of the recorded placement runs give the same
placement, ``partition_migrated`` signals and placement metrics as the live status store did.

The fixtures were recorded from real ``local-cluster`` runs by ``scripts/record_placement.py``; each
``truth.json`` holds the live driver's REST reading of every stateful task (see tests/unit/test_placement.py).
"""

from __future__ import annotations

import shutil

import pytest
from test_placement import replayed, scenario, truth_placement

from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.fleet.eventlog_watch import EventLogWatcher
from spark_state_observer.metrics import catalog
from spark_state_observer.model import kinds
from spark_state_observer.model.signal_kinds import PARTITION_MIGRATED, SIGNAL_KINDS, SignalEvent
from spark_state_observer.model.spark_events import STREAMING_EVENTS
from spark_state_observer.offline.replay import replay
from spark_state_observer.placement.task_log import EventLogSource
from spark_state_observer.placement.tracker import CAUSE_EXECUTOR_REMOVED as EXECUTOR_REMOVED
from spark_state_observer.placement.tracker import LOCALITY_FALLBACK
from spark_state_observer.settings import Settings


def _replay(name: str, **settings: object) -> tuple[list[SignalEvent], PrometheusObserver, str]:
    _, eventlog = scenario(name)
    signals: list[SignalEvent] = []
    result = replay([eventlog], Settings.from_env({}, **settings), on_signal=signals.append)
    assert result.errors == []
    return signals, result.observer, result.exposition()


def _series(text: str, name: str) -> dict[str, float]:
    return {line.split(" ")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{")}


def test_replay_of_the_kill_run_equals_its_truth() -> None:
    """Placement per batch and stage is the live status store's; the migrations are what the killed executor held."""
    truth, eventlog = scenario("kill")
    signals, observer, text = _replay("kill")
    feed = observer.placement
    assert feed is not None
    _, _, stages = replayed(eventlog)
    by_stage = {(ob.batch_id, stages[(ob.batch_id, ob.operator)]): ob.placement for ob in feed.batches}
    expected = truth_placement(truth)
    assert expected and all(by_stage[key] == placement for key, placement in expected.items())

    moved = [s for s in signals if s.kind == PARTITION_MIGRATED]
    killed = truth["killed"]["executor_id"]
    # truth names an operator by its stage's position in the batch; the signal by its plan index
    position = {op: sorted(s for (b, _), s in stages.items() if b == batch).index(stage) for (batch, op), stage in stages.items()}
    held = {(op, p) for op, pos in position.items() for p in truth["held_by_killed"][str(pos)]}
    assert {(s.attributes["operator_id"], p) for s in moved for p in s.attributes["partitions"]} == held
    assert {s.attributes["batch_id"] for s in moved} == {truth["killed"]["last_batch_before"] + 1}
    for s in moved:
        assert s.attributes["causes"] == {EXECUTOR_REMOVED: s.attributes["migrated"]}
        assert s.attributes["from_executors"] == [killed] and killed not in s.attributes["to_executors"]
        assert s.attributes["load_seconds"] > 0
        record = observer.tracker.get(truth["query_id"])
        assert record is not None and s.query == record.label and s.query_id == truth["query_id"]  # labelled like every signal
    # the same migrations in the exposition, under catalog names
    migrations = _series(text, "spark_state_partition_migrations_total")
    assert sum(migrations.values()) == len(held)
    assert sum(v for k, v in migrations.items() if f'cause="{EXECUTOR_REMOVED}"' in k) == len(held)
    load = _series(text, "spark_state_partition_migration_load_seconds_total")
    assert sum(load.values()) == pytest.approx(sum(s.attributes["load_seconds"] for s in moved))
    assert _series(text, "spark_state_partition_stickiness_ratio")  # the latest batch: everything stayed
    assert all(v == 1.0 for v in _series(text, "spark_state_partition_stickiness_ratio").values())


def test_the_clean_run_has_no_migration_and_full_stickiness() -> None:
    signals, _, text = _replay("clean")
    assert not [s for s in signals if s.kind == PARTITION_MIGRATED]
    migrations = _series(text, "spark_state_partition_migrations_total")
    assert migrations and all(v == 0 for v in migrations.values())  # created at 0, so increase() sees a first move
    assert _series(text, "spark_state_partition_placements_total")
    assert all(v > 0 for v in _series(text, "spark_state_executor_partitions").values())


def test_locality_fallback_is_named_in_the_signal() -> None:
    signals, _, _ = _replay("locality")
    moved = [s for s in signals if s.kind == PARTITION_MIGRATED]
    assert moved and all(set(s.attributes["causes"]) == {LOCALITY_FALLBACK} for s in moved)


def test_placement_off_adds_nothing() -> None:
    signals, observer, text = _replay("kill", placement="off")
    assert observer.placement is None
    assert not [s for s in signals if s.kind == PARTITION_MIGRATED]
    assert "spark_state_partition_migrations_total" not in text


def test_partition_series_stay_within_top_k() -> None:
    _, _, text = _replay("kill", partition_top_k=1)
    costliest = _series(text, "spark_state_partition_migration_last_load_seconds")
    per_operator = [k.split('operator_index="')[1].split('"')[0] for k in costliest]
    assert costliest and len(per_operator) == len(set(per_operator))  # one partition per operator at most
    executors = _series(text, "spark_state_executor_partitions")
    assert len(executors) == 1


def test_every_placement_series_is_a_catalog_metric() -> None:
    _, _, text = _replay("kill")
    names = {
        line.split("{")[0] for line in text.splitlines() if line.startswith("spark_state_") and ("partition" in line or "executor_" in line)
    }
    placement = {s.prometheus_name for s in catalog.PLACEMENT_METRICS}
    assert placement <= names  # every placement metric shows on a run with a migration
    assert all(catalog.lookup(n) for n in names)
    assert PARTITION_MIGRATED in SIGNAL_KINDS


def test_migrations_reach_the_history(tmp_path) -> None:
    import sqlite3

    _, eventlog = scenario("kill")
    db = str(tmp_path / "h.db")
    replay([eventlog], Settings.from_env({}), history=db)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT attributes FROM events WHERE kind = ?", (PARTITION_MIGRATED,)).fetchall()
    assert len(rows) == 2 and all('"executor_removed"' in r[0] for r in rows)


def _watched(tmp_path, names: tuple[str, ...] = ("kill",)) -> tuple[list[SignalEvent], PrometheusObserver]:
    """The runs' logs in one folder through the event-log watcher, as ``watch`` feeds them: every raw event to the
    placement source in order (per application), the streaming ones to the pipeline."""
    folder = tmp_path / "logs"
    for name in names:
        _, eventlog = scenario(name)
        shutil.copytree(eventlog, folder, dirs_exist_ok=True)
    watcher = EventLogWatcher([str(folder)], read_finished_at_start=True, max_decoded_bytes_per_poll=64 << 20)
    source = EventLogSource()  # as the watcher gives each application's observer
    observer = PrometheusObserver(Settings.from_env({}), serve=False, live=False, placement=source)
    signals: list[SignalEvent] = []
    observer.on("*", signals.append)
    kind_of = {
        "QueryStartedEvent": kinds.STARTED,
        "QueryProgressEvent": kinds.PROGRESS,
        "QueryIdleEvent": kinds.IDLE,
        "QueryTerminatedEvent": kinds.TERMINATED,
    }
    quiet = 0
    for _ in range(100):
        polled = watcher.poll()
        quiet = 0 if any(app.events for app in polled) else quiet + 1
        if quiet == 3:
            break
        for app in polled:
            for raw in app.events:
                source.feed(raw.data, app=app.log_name)
                if raw.event_type in STREAMING_EVENTS:
                    kind = kind_of[raw.event_type.rsplit("$", 1)[1]]
                    payload = raw.data["progress"] if kind == kinds.PROGRESS else raw.data
                    observer.process(CapturedEvent(kind, payload, 0.0, 0.0))
    observer.stop()
    return signals, observer


def test_watched_logs_give_the_same_placement_as_replay(tmp_path) -> None:
    replay_signals, replay_observer, _ = _replay("kill")
    watch_signals, watch_observer = _watched(tmp_path)
    assert watch_observer.placement is not None and replay_observer.placement is not None
    assert [ob.placement for ob in watch_observer.placement.batches] == [ob.placement for ob in replay_observer.placement.batches]

    def moved(signals: list[SignalEvent]) -> list[dict]:
        return [s.attributes for s in signals if s.kind == PARTITION_MIGRATED]

    assert moved(watch_signals) and moved(watch_signals) == moved(replay_signals)


def test_two_applications_fed_event_by_event_keep_their_placements_apart() -> None:
    """Stage, execution and task ids restart in every application: with both runs' events interleaved one by one
    (as a watcher following two live jobs may deliver them), the kill run's moves stay its own next to the clean run."""
    from itertools import zip_longest

    from spark_state_observer.offline.task_events import read_events

    replay_signals, _, _ = _replay("kill")
    source = EventLogSource()  # as the watcher gives each application's observer
    observer = PrometheusObserver(Settings.from_env({}), serve=False, live=False, placement=source)
    signals: list[SignalEvent] = []
    observer.on("*", signals.append)
    logs = {name: list(read_events([scenario(name)[1]])) for name in ("kill", "clean")}
    for pair in zip_longest(logs["kill"], logs["clean"]):
        for app, event in zip(("kill", "clean"), pair):
            if event is None:
                continue
            source.feed(event, app=app)
            if event["Event"].endswith("QueryProgressEvent"):
                observer.process(CapturedEvent(kinds.PROGRESS, event["progress"], 0.0, 0.0))
    observer.stop()
    assert observer.placement is not None
    assert {ob.query_id for ob in observer.placement.batches} == {
        scenario("kill")[0]["query_id"],
        scenario("clean")[0]["query_id"],
    }
    keys = ("batch_id", "operator_id", "migrated", "partitions", "causes", "from_executors", "to_executors", "load_seconds")
    moved = [{k: s.attributes[k] for k in keys} for s in signals if s.kind == PARTITION_MIGRATED]
    assert moved == [{k: s.attributes[k] for k in keys} for s in replay_signals if s.kind == PARTITION_MIGRATED]


def test_the_watch_command_follows_placement_as_replay_does(tmp_path) -> None:
    """``watch`` (FleetObserver) over the recorded kill run: the same migrations as replay of its log."""
    from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions

    _, eventlog = scenario("kill")
    folder = tmp_path / "logs"
    shutil.copytree(eventlog, folder, dirs_exist_ok=True)
    fleet = FleetObserver(
        [str(folder)], Settings.from_env({}), WatchOptions(grace_seconds=3600.0, read_finished_at_start=True), serve=False
    )
    for _ in range(20):
        fleet.poll_once()
    replay_signals, _, replayed_text = _replay("kill")
    watched_text = fleet.exposition().decode()
    name = catalog.PARTITION_MIGRATIONS.prometheus_name
    assert sum(_series(watched_text, name).values()) == sum(_series(replayed_text, name).values()) > 0
    assert len([s for s in replay_signals if s.kind == PARTITION_MIGRATED]) > 0
