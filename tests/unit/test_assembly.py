"""One assembly: every entry point builds its observer through ``assemble``, and a sink registered once in the
table is built for each of them and receives their events (recorded event logs, replayed and watched)."""

from __future__ import annotations

import ast
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, eventlog_dir, progress_lines
from spark_state_observer.assembly import SINKS, SinkOptions, assemble, register_sink, sinks
from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.embedded.listener import StateObserverListener
from spark_state_observer.embedded.prometheus_observer import PrometheusObserver
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.model import kinds
from spark_state_observer.model.events import Event, QueryProgress
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.offline.backtest import recording
from spark_state_observer.offline.replay import replay
from spark_state_observer.pipeline.sink import Sink, SinkContext
from spark_state_observer.settings import Settings

PACKAGE = Path(ROOT) / "spark_state_observer"
BUILT_BY_ASSEMBLY = {"Observer", "PrometheusObserver", "SignalEngine"}
ENTRY_POINTS = {  # module -> the function through which it builds its observer
    "embedded/attach.py": "assemble",
    "embedded/listener.py": "assemble",
    "fleet/runtime.py": "assemble",
    "offline/replay.py": "assemble",
    "offline/backtest/recording.py": "replay",  # the backtest replays on a simulated clock
}
RUN = os.path.join(FIXTURES, "rocksdb_restart", "run1")


def _calls(path: Path, methods: bool = True) -> set[str]:
    """The names called in a module: ``f(...)``, and ``x.f(...)`` with ``methods``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif methods and isinstance(func, ast.Attribute):
                names.add(func.attr)
    return names


def test_no_module_but_the_pipeline_constructs_an_observer_or_a_signal_engine() -> None:
    builders = {}
    for path in PACKAGE.rglob("*.py"):
        found = _calls(path) & BUILT_BY_ASSEMBLY
        if found:
            builders[str(path.relative_to(PACKAGE))] = found
    # the observer builds its own engine; observers themselves are built by ``assemble`` (``observer_type(...)``)
    assert builders == {"pipeline/runtime.py": {"SignalEngine"}}


def _imports_assemble(path: Path) -> bool:
    return any(
        isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("spark_state_observer.assembly")
        and any(alias.name == "assemble" for alias in node.names)
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
    )


def test_the_entry_points_build_their_observer_through_assemble() -> None:
    for module, builder in ENTRY_POINTS.items():
        assert builder in _calls(PACKAGE / module, methods=False), module
    callers = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if _imports_assemble(p)} - {"assembly/__init__.py"}
    assert callers == {m for m, b in ENTRY_POINTS.items() if b == "assemble"}


class Recorder:
    """A sink that keeps what it is given: registered in the table, it must reach every observer."""

    name = "recorder"

    def __init__(self, context: SinkContext, built: list[Recorder]) -> None:
        self.context = context
        self.events: list[Event] = []
        self.signals: list[SignalEvent] = []
        self.closed = False
        built.append(self)

    def on_event(self, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        if event is not None:
            self.events.append(event)
        self.signals.extend(signals)

    def tick(self, processed: int) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Recorder]:
    """Register the recorder for this test only; the list gets every one built."""
    made: list[Recorder] = []
    monkeypatch.setitem(SINKS, "recorder", lambda context, options: Recorder(context, made))
    return made


def _progress(recorder: Recorder) -> int:
    return sum(isinstance(e, QueryProgress) for e in recorder.events)


def test_a_registered_sink_gets_the_replayed_events(built: list[Recorder]) -> None:
    result = replay([eventlog_dir(RUN)], Settings(http_enabled=False, history_enabled=False))
    (sink,) = built
    expected = len(progress_lines(RUN))
    assert _progress(sink) == expected > 0
    assert sink.closed and sink.context.view is result.observer.view
    assert sink.context.identity.app_id.startswith("local-")  # the recorded application's
    assert sink in result.observer.sinks


def test_a_registered_sink_gets_the_backtest_events(built: list[Recorder], tmp_path: Path) -> None:
    _, signals, events, errors = recording.record_series([eventlog_dir(RUN)], str(tmp_path / "s.om"), 5.0)
    (sink,) = built
    assert not errors and events > 0
    assert _progress(sink) == len(progress_lines(RUN)) > 0
    assert len(sink.signals) == len(signals)  # every signal the backtest records, the sink was given too


def test_a_registered_sink_gets_each_watched_applications_events(built: list[Recorder], tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    for run in ("run1", "run2"):  # two applications of one query: one observer, and one recorder, each
        source = eventlog_dir(os.path.join(FIXTURES, "rocksdb_restart", run))
        for name in os.listdir(source):
            shutil.copytree(os.path.join(source, name), logs / name)
    fleet = FleetObserver(
        [str(logs)], Settings(http_enabled=False, history_enabled=False), WatchOptions(read_finished_at_start=True), serve=False
    )
    for _ in range(3):
        fleet.poll_once()
    assert len(built) == 2
    assert sorted(s.context.identity.log_name for s in built) == sorted(fleet.applications())
    for sink, run in zip(sorted(built, key=lambda s: s.context.identity.app_id), ("run1", "run2")):
        assert _progress(sink) == len(progress_lines(os.path.join(FIXTURES, "rocksdb_restart", run))) > 0
    fleet.stop()


def test_a_registered_sink_gets_the_listeners_events(built: list[Recorder]) -> None:
    listener = StateObserverListener(http_enabled=False, history_enabled=False)  # the observer attach() would build
    try:
        observer = listener.observer
        assert isinstance(observer, PrometheusObserver)
        for line in progress_lines(RUN):  # what Spark hands the listener: the progress JSON
            observer.submit(CapturedEvent(kinds.PROGRESS, json.dumps(line), 0.0, 0.0))
        assert observer.flush()
    finally:
        listener.observer.stop()
    (sink,) = built
    assert [s.name for s in listener.observer.sinks] == ["prometheus", "recorder"]
    assert _progress(sink) == len(progress_lines(RUN)) and sink.closed


def test_a_sink_that_fails_to_build_closes_the_ones_built_before(built: list[Recorder]) -> None:
    def broken(context: SinkContext) -> Sink:
        raise RuntimeError("no collector")

    with pytest.raises(RuntimeError, match="no collector"):
        assemble(Settings(http_enabled=False, history_enabled=False), sinks=[broken])
    assert not built  # the registered extras come after the named ones: none was built
    with pytest.raises(RuntimeError, match="no collector"):
        assemble(Settings(http_enabled=False, history_enabled=False), sinks=["recorder", broken])
    (sink,) = built
    assert sink.closed


def test_unknown_and_built_in_names_are_refused() -> None:
    with pytest.raises(ValueError, match="no sink named 'nope'"):
        assemble(Settings(http_enabled=False, history_enabled=False), sinks=["nope"])
    with pytest.raises(ValueError, match="built-in"):
        register_sink("history", lambda context, options: Recorder(context, []))
    with pytest.raises(ValueError, match="cannot be shared"):
        SINKS["prometheus"](SinkContext(None, Settings(), None, None), SinkOptions())  # type: ignore[arg-type]


def test_a_sink_declared_under_the_entry_point_group_is_built_for_every_observer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An installed package declares ``[spark_state_observer.sinks]``; a broken one is said and left out."""
    (tmp_path / "recorder_plugin.py").write_text(
        "from test_assembly import Recorder\nBUILT = []\n\ndef build(context, options):\n    return Recorder(context, BUILT)\n"
    )
    dist = tmp_path / "recorder_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: recorder-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[spark_state_observer.sinks]\nplugged = recorder_plugin:build\nbroken = recorder_plugin:missing\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sinks, "SINKS", dict(sinks.SINKS))  # what the group adds goes with the test
    sinks._load_entry_points.cache_clear()
    try:
        result = replay([eventlog_dir(RUN)], Settings(http_enabled=False, history_enabled=False))
    finally:
        sinks._load_entry_points.cache_clear()
    import recorder_plugin  # type: ignore[import-not-found]

    (sink,) = recorder_plugin.BUILT
    assert sink in result.observer.sinks and _progress(sink) == len(progress_lines(RUN))
    assert "sink 'broken' from recorder_plugin:missing not loaded" in caplog.text
