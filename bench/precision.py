"""How right the signals are: every recorded incident replayed and judged against what really happened.

    PYTHONPATH=$PWD python bench/precision.py [tests/fixtures/incidents/NAME ...]

Each recording in ``tests/fixtures/incidents`` (real Spark runs, made by ``scripts/record_incidents.py``)
comes with ``truth.json``, written by the recording script from what it did: the restarts, the executor
it killed and the partitions that moved, the exception it injected and the class it expects. Every run
is replayed as a live observer would have seen it (a simulated clock ticking each second, so stalls are
judged too), and per signal kind this prints, as a Markdown table:

- incidents found / incidents present, where the truth says what should be found;
- false events: the kind fired where the truth has nothing for it, counted on the clean recordings
  (nothing may fire there) and on the incident recordings outside their incidents, each per hour of
  recorded run time.

Informational kinds (a query started, state is bounded, a load was slow...) state facts, not incidents:
they are listed with their rate and never counted as false. ``tests/unit/test_precision.py`` turns the key
figures into tests.
"""

from __future__ import annotations

import glob
import io
import json
import os
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from spark_state_observer.model import kinds as event_kinds
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.parse import parse_timestamp
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.offline.eventlog import read_records
from spark_state_observer.offline.replay import replay
from spark_state_observer.pipeline.runtime import Observer
from spark_state_observer.settings import Settings

INCIDENTS = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "incidents")
INFORMATIONAL = frozenset(
    {
        kinds.QUERY_STARTED,
        kinds.QUERY_IDLE,
        kinds.STATE_BOUNDED,
        kinds.EXECUTOR_ADDED,
        kinds.CAUGHT_UP,
        kinds.STALL_RECOVERED,
        kinds.LATE_ROWS_STOPPED,
        kinds.LOAD_LATENCY_ANOMALY,
        *kinds.RESTORE_PROGRESS_KINDS,  # the course of a restore; the restore itself is judged as `restore`
        # a restarted run's backlog and when it will be read, then read; a stuck partition moving again
        kinds.KAFKA_CATCH_UP_FORECAST,
        kinds.KAFKA_CAUGHT_UP,
        kinds.KAFKA_PARTITION_RECOVERED,
    }
)
EXECUTOR_TIME_TOLERANCE_SECONDS = 10.0  # an executor_removed this close to the kill is the kill
STALL_TIME_TOLERANCE_SECONDS = 2.0  # the live clock ticks once a second
# the verdicts that page (critical, or warnings a team is woken for): each needs a recorded incident and clean runs
PAGING = (
    kinds.QUERY_TERMINATED,
    kinds.CRASH_LOOP,
    kinds.STALLED,
    kinds.FALLING_BEHIND,
    kinds.RESTORE,
    kinds.STORE_RELOAD,
    kinds.STATE_UNBOUNDED,
)
# stateful plan nodes (as the event log's SQL plans name them) -> the operator name progress reports
STATE_NODES = {
    "StateStoreSave": "stateStoreSave",
    "StreamingDeduplicate": "dedupe",
    "StreamingSymmetricHashJoin": "symmetricHashJoin",
    "SessionWindowStateStoreSave": "sessionWindowStateStoreSaveExec",
    "FlatMapGroupsInPandasWithState": "applyInPandasWithState",
    "TransformWithStateInPySpark": "transformWithStateInPandasExec",
    "TransformWithStateInPandas": "transformWithStateInPandasExec",  # 4.0's name of the node (4.1 renamed it)
    "FlatMapGroupsWithState": "flatMapGroupsWithState",  # Scala's (flatMap|map)GroupsWithState
    "TransformWithState": "transformWithStateExec",  # Scala's transformWithState
}
# what progress calls those operators on Spark 3.5 where it differs: the session window's writer has no short name of
# its own before 4.0 (StateStoreWriter's default, restore_session_35)
PROGRESS_NAMES_35 = {"defaultName": "sessionWindowStateStoreSaveExec"}


@dataclass
class Replayed:
    """One recording: its truth, its runs' recorded files, the signals a live observer would have given."""

    name: str
    truth: dict[str, Any]
    runs: list[str]
    signals: list[SignalEvent]
    seconds: float  # recorded run time, first to last event

    @property
    def clean(self) -> bool:
        return bool(self.truth.get("clean"))


@dataclass
class Tally:
    found: int = 0
    present: int = 0
    false_clean: int = 0
    false_incident: int = 0
    informational: int = 0
    missed: list[str] = field(default_factory=list)


def run_dirs(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, "run*")), key=lambda p: int(p.rsplit("run", 1)[1]))


def recording(run_dir: str) -> str:
    """The run's event log folder, or its progress lines where only those were kept."""
    eventlog = os.path.join(run_dir, "eventlog")
    return eventlog if os.path.isdir(eventlog) else sorted(glob.glob(os.path.join(run_dir, "progress.jsonl*")))[0]


def replay_live(
    paths: list[str], settings: Settings | None = None, alive: list[tuple[float, float]] | None = None
) -> tuple[list[SignalEvent], float]:
    """Replay ``paths`` as a live observer: a simulated clock at each event's time, ticked every second
    in between (the worker's rhythm), so stalls are judged. A live observer lives in its job's process:
    with ``alive`` (the processes' lifetimes), a tick happens only within the lifetime of the process
    that received the latest event (a new process's observer has not seen the previous run). Returns
    the signals and the span of time."""
    clock = [0.0]
    first: list[float] = []
    signals: list[SignalEvent] = []
    latest = [0.0]

    def before_event(observer: Observer, at: float) -> None:
        if not first:
            first.append(at)
            clock[0] = at
        while clock[0] + 1.0 < at:
            clock[0] += 1.0
            if alive is None or any(start <= latest[0] <= end and start <= clock[0] <= end for start, end in alive):
                observer.tick()
        clock[0] = max(clock[0], at)
        latest[0] = at

    replay(paths, settings or Settings(http_enabled=False), clock=lambda: clock[0], before_event=before_event, on_signal=signals.append)
    return signals, (clock[0] - first[0]) if first else 0.0


def load(folder: str, settings: Settings | None = None) -> Replayed:
    with open(os.path.join(folder, "truth.json")) as f:
        truth = json.load(f)
    runs = run_dirs(folder)
    alive = [(f["process_started"], f["process_ended"]) for f in truth.get("run_facts", []) if f.get("process_ended")]
    signals, seconds = replay_live([recording(r) for r in runs], settings, alive or None)
    return Replayed(os.path.basename(os.path.normpath(folder)), truth, runs, signals, seconds)


def progress_of(run_dir: str) -> list[dict[str, Any]]:
    return [r.payload for r in read_records([recording(run_dir)]) if not isinstance(r, Exception) and r.kind == event_kinds.PROGRESS]


def judge(rec: Replayed, settings: Settings | None = None) -> dict[str, Tally]:
    """Per signal kind, what ``rec``'s truth says was there and what the signals made of it."""
    s = settings or Settings(http_enabled=False)
    tallies: dict[str, Tally] = defaultdict(Tally)
    by_kind: dict[str, list[SignalEvent]] = defaultdict(list)
    for e in rec.signals:
        by_kind[e.kind].append(e)
    matched: dict[str, set[int]] = defaultdict(set)  # ids of the events that matched an incident

    def mark(kind: str, events: list[SignalEvent]) -> None:
        matched[kind].update(id(e) for e in events)

    run_ids = {f"run{i + 1}": f.get("run_id") for i, f in enumerate(rec.truth.get("run_facts", []))}
    # restarts, and the restore of every state operator in a restarted run's first batch
    for restart in rec.truth.get("restarts", []):
        t = tallies[kinds.QUERY_RESTARTED]
        t.present += 1
        hits = [e for e in by_kind[kinds.QUERY_RESTARTED] if e.run_id == restart["run_id"]]
        t.found += bool(hits)
        if not hits:
            t.missed.append(f"{rec.name}: restart into {restart['run']}")
        mark(kinds.QUERY_RESTARTED, hits[:1])
        if restart.get("first_batch_id") is None:
            continue
        run_dir = next(r for r in rec.runs if os.path.basename(r) == restart["run"])
        first = next(p for p in progress_of(run_dir) if p.get("batchId") == restart["first_batch_id"])
        operators = {o.get("operatorName") for o in first.get("stateOperators", [])}
        restores = [
            e for e in by_kind[kinds.RESTORE] if e.run_id == restart["run_id"] and e.attributes.get("batch_id") == restart["first_batch_id"]
        ]
        t = tallies[kinds.RESTORE]
        t.present += len(operators)
        found = operators & {e.attributes.get("operator") for e in restores}
        t.found += len(found)
        t.missed += [f"{rec.name}: restore of {op}" for op in sorted(operators - found)]
        mark(kinds.RESTORE, restores)
    # the executor killed, and the stores that moved with it (one reload per batch and stateful stage)
    killed = rec.truth.get("killed_executor_id")
    if killed is not None:
        t = tallies[kinds.EXECUTOR_REMOVED]
        t.present += 1
        hits = [
            e
            for e in by_kind[kinds.EXECUTOR_REMOVED]
            if e.attributes.get("executor_id") == str(killed)
            and abs(e.timestamp - rec.truth["killed_at"]) <= EXECUTOR_TIME_TOLERANCE_SECONDS
        ]
        t.found += bool(hits)
        if not hits:
            t.missed.append(f"{rec.name}: executor {killed} removed")
        mark(kinds.EXECUTOR_REMOVED, hits[:1])
    moved: dict[int, set[int]] = defaultdict(set)
    for move in rec.truth.get("partition_moves", []):
        moved[move["batch_id"]].add(move["stateful_stage"])
    for batch_id, stages in sorted(moved.items()):
        t = tallies[kinds.STORE_RELOAD]
        hits = [e for e in by_kind[kinds.STORE_RELOAD] if e.attributes.get("batch_id") == batch_id]
        operators = {e.attributes.get("operator") for e in hits}
        t.present += len(stages)
        t.found += min(len(stages), len(operators))
        if len(operators) < len(stages):
            t.missed.append(f"{rec.name}: {len(stages) - len(operators)} reload(s) in batch {batch_id}")
        mark(kinds.STORE_RELOAD, hits)
    for batch_id in rec.truth.get("failed_task_attempts_by_batch") or {}:
        t = tallies[kinds.STATE_TASK_RETRY]
        t.present += 1
        hits = [e for e in by_kind[kinds.STATE_TASK_RETRY] if str(e.attributes.get("batch_id")) == str(batch_id)]
        t.found += bool(hits)
        mark(kinds.STATE_TASK_RETRY, hits)
    # state that grows for ever, from the time the recording made it so (bounded operators may not fire)
    for unbounded in unbounded_operators(rec.truth):
        t = tallies[kinds.STATE_UNBOUNDED]
        t.present += 1
        hits = [
            e
            for e in by_kind[kinds.STATE_UNBOUNDED]
            if e.attributes.get("operator") == unbounded["operator"] and e.timestamp >= unbounded["from"]
        ]
        t.found += bool(hits)
        if not hits:
            t.missed.append(f"{rec.name}: state_unbounded of {unbounded['operator']}")
        mark(kinds.STATE_UNBOUNDED, hits[:1])
    # stalls: the query stopped making progress (the recording's writer hung), judged while it was silent
    for stall in rec.truth.get("stalls", []):
        t = tallies[kinds.STALLED]
        t.present += 1
        hits = [e for e in by_kind[kinds.STALLED] if stall["from"] <= e.timestamp <= stall["until"] + STALL_TIME_TOLERANCE_SECONDS]
        t.found += bool(hits)
        if not hits:
            t.missed.append(f"{rec.name}: stall of batch {stall['batch_id']} ({stall['seconds']:.0f} s)")
        mark(kinds.STALLED, hits[:1])
    # falling behind: from the time the recording made input arrive faster than the query can process it
    for behind in rec.truth.get("falling_behind", []):
        t = tallies[kinds.FALLING_BEHIND]
        t.present += 1
        hits = [e for e in by_kind[kinds.FALLING_BEHIND] if e.timestamp >= behind["from"]]
        t.found += bool(hits)
        if not hits:
            t.missed.append(f"{rec.name}: falling behind")
        mark(kinds.FALLING_BEHIND, hits[:1])
    # rows the watermark dropped: each episode the recording made (a record from the future, a lagging producer),
    # found by an event within it; any other event is true where Spark's own counts back it (a batch within the
    # window before it reported rows dropped by the watermark), false where none did
    for late in rec.truth.get("late_rows", []):
        t = tallies[kinds.LATE_ROWS_DROPPED]
        t.present += 1
        hits = [e for e in by_kind[kinds.LATE_ROWS_DROPPED] if late["from"] <= e.timestamp <= late["until"]]
        t.found += bool(hits)
        if not hits:
            t.missed.append(f"{rec.name}: rows dropped by the watermark from {late['from']}")
        mark(kinds.LATE_ROWS_DROPPED, hits)
    if by_kind[kinds.LATE_ROWS_DROPPED] and not rec.clean:  # on a clean recording nothing may fire, dropped or not
        dropped_at = [
            parse_timestamp(p["timestamp"])
            for run in rec.runs
            for p in progress_of(run)
            if any((op.get("numRowsDroppedByWatermark") or 0) > 0 for op in p.get("stateOperators") or ())
        ]
        mark(
            kinds.LATE_ROWS_DROPPED,
            [
                e
                for e in by_kind[kinds.LATE_ROWS_DROPPED]
                if any(e.timestamp - s.late_rows_window_seconds <= at <= e.timestamp for at in dropped_at)
            ],
        )
    # a state the recording filled on purpose (new keys in every batch of a restore's first run): rising
    # while it filled, so a state_unbounded read on it is neither found nor false. A verdict reads the window of
    # batches before it: one given later whose window began while the state filled read the filling (a first run
    # shorter than half the growth window is judged at the restored run's first batch, restore_tws_40)
    for filling in rec.truth.get("filling", []):
        mark(
            kinds.STATE_UNBOUNDED,
            [
                e
                for e in by_kind[kinds.STATE_UNBOUNDED]
                if e.attributes.get("operator") == filling["operator"]
                and e.timestamp - float(e.attributes.get("window_seconds") or 0.0) <= filling["until"]
            ],
        )
    # what the recording did to a Kafka topic (records deleted, partitions added, a producer faster than the
    # rate limit): each finding of its kind, due in its window, naming one of the partitions it was done to
    for finding in rec.truth.get("kafka", []):
        kind = finding["kind"]
        t = tallies[kind]
        t.present += 1
        wanted = set(finding.get("partitions") or ())
        hits = [
            e
            for e in by_kind[kind]
            if e.attributes.get("topic") == finding["topic"]
            and finding["from"] <= e.timestamp <= finding["until"]
            and (not wanted or wanted & set(e.attributes.get("partitions") or ()))
        ]
        t.found += bool(hits)
        if not hits:
            t.missed.append(f"{rec.name}: {kind} of {finding['topic']}")
        mark(kind, hits)  # records lost over two batches (a re-run and the next) are two findings of one incident
    # failures: the class and the root cause of each failing run; a crash loop when every run fails, or where the
    # truth says so (runs that failed at start after a good one; drivers killed without a word, which fail nothing)
    failure = rec.truth.get("failure")
    loop = bool(rec.truth.get("crash_loop"))
    if failure:
        failing = list(run_ids) if failure.get("every_run") else failure.get("failing_runs") or [failure["failing_run"]]
        for run in failing:
            t = tallies[kinds.QUERY_TERMINATED]
            t.present += 1
            hits = [e for e in by_kind[kinds.QUERY_TERMINATED] if e.run_id == run_ids[run] and e.attributes.get("outcome") == "exception"]
            right = [
                e
                for e in hits
                if e.attributes.get("exception_class") == failure["expected_class"]
                and failure["expected_root_cause"] in str(e.attributes.get("root_cause") or "")
            ]
            t.found += bool(right)
            if not right:
                t.missed.append(f"{rec.name}: {run} failure ({failure['expected_class']})")
            mark(kinds.QUERY_TERMINATED, hits)
        loop = loop or bool(failure.get("every_run") and len(failing) > s.crash_loop_restarts)
    if loop:
        t = tallies[kinds.CRASH_LOOP]
        t.present += 1
        hits = by_kind[kinds.CRASH_LOOP]
        t.found += bool(hits)
        if not hits:
            t.missed.append(f"{rec.name}: crash loop")
        mark(kinds.CRASH_LOOP, hits[:1])
    # everything else a kind said is false (informational kinds and clean terminations aside)
    for kind, events in by_kind.items():
        t = tallies[kind]
        for e in events:
            if kind in INFORMATIONAL or (kind == kinds.QUERY_TERMINATED and e.attributes.get("outcome") != "exception"):
                t.informational += 1
            elif id(e) not in matched[kind]:
                if rec.clean:
                    t.false_clean += 1
                else:
                    t.false_incident += 1
    return tallies


def unbounded_operators(truth: dict[str, Any]) -> list[dict[str, Any]]:
    """The operators whose state the recording made grow for ever (``growth`` of scripts/record_growth.py,
    or the older single ``unbounded`` of scripts/record_incidents.py)."""
    legacy = [truth["unbounded"]] if truth.get("unbounded") else []
    return legacy + [g for g in truth.get("growth", []) if not g["bounded"]]


@dataclass
class GrowthTally:
    """One operator's growth verdicts over the recordings that say whether its state is bounded."""

    unbounded_found: int = 0
    unbounded_present: int = 0
    bounded_found: int = 0
    bounded_present: int = 0
    false_unbounded: int = 0
    flips: int = 0  # verdict changes after the first, within one recording (hysteresis: 0 expected)
    bounded_hours: float = 0.0
    recordings: list[str] = field(default_factory=list)


def growth_verdicts(rec: Replayed, operator: str) -> list[SignalEvent]:
    return [e for e in rec.signals if e.kind in (kinds.STATE_UNBOUNDED, kinds.STATE_BOUNDED) and e.attributes.get("operator") == operator]


def judge_growth(recordings: list[Replayed]) -> dict[tuple[str, str], GrowthTally]:
    """Per (operator, provider): unbounded found / present, bounded found / present, false unbounded, flips."""
    tallies: dict[tuple[str, str], GrowthTally] = defaultdict(GrowthTally)
    for rec in recordings:
        legacy = [dict(rec.truth["unbounded"], bounded=False)] if rec.truth.get("unbounded") else []
        for g in rec.truth.get("growth", []) + legacy:
            t = tallies[(g["operator"], rec.truth.get("provider", "rocksdb"))]
            t.recordings.append(rec.name)
            verdicts = growth_verdicts(rec, g["operator"])
            t.flips += max(0, len(verdicts) - 1)
            last = verdicts[-1].kind if verdicts else None
            if g["bounded"]:
                t.bounded_present += 1
                t.bounded_found += last == kinds.STATE_BOUNDED and all(e.kind == kinds.STATE_BOUNDED for e in verdicts)
                t.false_unbounded += sum(e.kind == kinds.STATE_UNBOUNDED for e in verdicts)
                t.bounded_hours += rec.seconds / 3600.0
            else:
                t.unbounded_present += 1
                t.unbounded_found += last == kinds.STATE_UNBOUNDED
    return tallies


def growth_table(recordings: list[Replayed]) -> tuple[str, dict[tuple[str, str], GrowthTally]]:
    """The Markdown table of the growth verdict per operator and state store provider."""
    tallies = judge_growth(recordings)
    lines = [
        "| operator | provider | `state_unbounded` found / present | `state_bounded` found / present "
        "| false `state_unbounded` on bounded runs: count, per hour | verdict flips |",
        "|---|---|---|---|---|---|",
    ]
    for (operator, provider), t in sorted(tallies.items()):
        unbounded = f"{t.unbounded_found} / {t.unbounded_present}" if t.unbounded_present else "- (none recorded)"
        bounded = f"{t.bounded_found} / {t.bounded_present}" if t.bounded_present else "- (none recorded)"
        lines.append(
            f"| `{operator}` | {provider} | {unbounded} | {bounded} | {t.false_unbounded}, {_per_hour(t.false_unbounded, t.bounded_hours)} "
            f"| {t.flips} |"
        )
    return "\n".join(lines), tallies


def slowest_state_tasks(eventlog: str) -> dict[str, dict[int, float]]:
    """operator -> batch -> the slowest successful task of its stateful stage (Spark's Executor Run Time, s).

    A task belongs to an operator when it updates one of the accumulators of that operator's plan node
    (``STATE_NODES``, from the SQL plans the log records); its batch is the ``streaming.sql.batchId`` of
    the job that ran its stage."""
    from spark_state_observer.offline.eventlog import expand, open_decompressed

    node_of: dict[int, str] = {}  # accumulator id -> operator
    batch_of: dict[int, int] = {}  # stage id -> batch id
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for path in expand([eventlog]):
        with io.BufferedReader(open_decompressed(path)) as stream:
            for line in stream:
                event = json.loads(line)
                kind = event["Event"]
                if kind.endswith("SQLExecutionStart") or kind.endswith("SQLAdaptiveExecutionUpdate"):
                    nodes = [event["sparkPlanInfo"]]
                    while nodes:
                        node = nodes.pop()
                        nodes += node.get("children", [])
                        if node["nodeName"] in STATE_NODES:
                            node_of.update((m["accumulatorId"], STATE_NODES[node["nodeName"]]) for m in node["metrics"])
                elif kind == "SparkListenerJobStart" and "streaming.sql.batchId" in (event.get("Properties") or {}):
                    batch_of.update((stage, int(event["Properties"]["streaming.sql.batchId"])) for stage in event["Stage IDs"])
                elif kind == "SparkListenerTaskEnd" and event["Task End Reason"]["Reason"] == "Success" and event["Stage ID"] in batch_of:
                    run = event["Task Metrics"]["Executor Run Time"] / 1000.0
                    batch = batch_of[event["Stage ID"]]
                    for op in {node_of[a["ID"]] for a in event["Task Info"].get("Accumulables", []) if a["ID"] in node_of}:
                        out[op][batch] = max(run, out[op].get(batch, 0.0))
    return out


def restore_truth(run_dir: str, first_batch: int) -> dict[str, float]:
    """operator -> how much longer its stateful stage's slowest task ran in the restart batch than the
    median of the run's later batches (seconds): the restore as the event log shows it, computed apart
    from the observer (which reads task wall times and three later batches)."""
    eventlog = os.path.join(run_dir, "eventlog")
    if not os.path.isdir(eventlog):
        return {}
    out = {}
    for op, batches in slowest_state_tasks(eventlog).items():
        later = [seconds for batch, seconds in batches.items() if batch > first_batch]
        if first_batch in batches and later:
            out[op] = batches[first_batch] - statistics.median(later)
    return out


@dataclass
class RestoreFigure:
    """One operator's restore in one recorded restart: what the observer said, and the event log's truth."""

    recording: str
    found: bool
    method: str | None = None
    confidence: str | None = None
    seconds: float | None = None
    truth_seconds: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.seconds is None or not self.truth_seconds or self.truth_seconds <= 0:
            return None
        return self.seconds / self.truth_seconds


def judge_restores(recordings: list[Replayed]) -> dict[tuple[str, str], list[RestoreFigure]]:
    """Per (operator, provider): every restart's restore of it, found or not, with its figure and the truth."""
    out: dict[tuple[str, str], list[RestoreFigure]] = defaultdict(list)
    for rec in recordings:
        for restart in rec.truth.get("restarts", []):
            if restart.get("first_batch_id") is None:
                continue
            run_dir = next(r for r in rec.runs if os.path.basename(r) == restart["run"])
            first = next(p for p in progress_of(run_dir) if p.get("batchId") == restart["first_batch_id"])
            truth = restore_truth(run_dir, restart["first_batch_id"])
            events = {
                e.attributes.get("operator"): e.attributes
                for e in rec.signals
                if e.kind == kinds.RESTORE and e.run_id == restart["run_id"] and e.attributes.get("batch_id") == restart["first_batch_id"]
            }
            for op in sorted({o.get("operatorName") for o in first.get("stateOperators", [])}):
                attrs = events.get(op)
                figure = RestoreFigure(rec.name, attrs is not None, truth_seconds=truth.get(PROGRESS_NAMES_35.get(op, op)))
                if attrs is not None:
                    figure.method, figure.confidence, figure.seconds = attrs["method"], attrs["confidence"], attrs["duration_seconds"]
                out[(op, rec.truth.get("provider", "rocksdb"))].append(figure)
    return out


def restore_table(recordings: list[Replayed]) -> tuple[str, dict[tuple[str, str], list[RestoreFigure]]]:
    """The Markdown table of restores per operator: found, the observer's figure against the event log's."""
    figures = judge_restores(recordings)
    lines = [
        "| operator | provider | recording | restore found | method (confidence) | observer's figure | slowest task's extra run time "
        "| ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (op, provider), restores in sorted(figures.items()):
        for f in restores:
            seconds = "-" if f.seconds is None else f"{f.seconds:.3f} s"
            truth = "- (no task events)" if f.truth_seconds is None else f"{f.truth_seconds:.3f} s"
            ratio = "-" if f.ratio is None else f"{f.ratio:.2f}"
            method = f"{f.method} ({f.confidence})" if f.found else "-"
            lines.append(
                f"| `{op}` | {provider} | {f.recording} | {'yes' if f.found else '**no**'} | {method} | {seconds} | {truth} | {ratio} |"
            )
    return "\n".join(lines), figures


def paging_table(recordings: list[Replayed]) -> str:
    """The Markdown table of the paging verdicts: incidents found / present and in which recordings, false
    events on the clean recordings and, apart, on the clean hour(s)."""
    judged = [(rec, judge(rec)) for rec in recordings]
    clean_hours = sum(r.seconds for r in recordings if r.clean) / 3600.0
    long_runs = [r for r in recordings if r.clean and r.seconds >= 3600]
    long_hours = sum(r.seconds for r in long_runs) / 3600.0
    lines = [
        f"| verdict | incidents found / present | recordings with incidents | false on clean runs ({clean_hours:.2f} h) "
        f"| false on clean runs of an hour or more ({long_hours:.2f} h) |",
        "|---|---|---|---|---|",
    ]
    for kind in PAGING:
        found = sum(t[kind].found for _, t in judged)
        present = sum(t[kind].present for _, t in judged)
        where = ", ".join(rec.name for rec, t in judged if t[kind].present)
        false_clean = sum(t[kind].false_clean for _, t in judged)
        false_long = sum(t[kind].false_clean for rec, t in judged if rec in long_runs)
        lines.append(
            f"| `{kind}` | {found} / {present} | {where or '-'} | {false_clean}, {_per_hour(false_clean, clean_hours)} "
            f"| {false_long}, {_per_hour(false_long, long_hours)} |"
        )
    return "\n".join(lines)


def false_per_hour(rec: Replayed) -> tuple[int, float]:
    """The incident events (informational kinds aside) a clean recording gave, and their rate per hour."""
    count = sum(t.false_clean for t in judge(rec).values())
    return count, count / (rec.seconds / 3600.0) if rec.seconds else 0.0


def corpus(folders: list[str] | None = None) -> list[Replayed]:
    folders = folders or sorted(os.path.dirname(p) for p in glob.glob(os.path.join(INCIDENTS, "*", "truth.json")))
    return [load(f) for f in folders]


def table(recordings: list[Replayed]) -> tuple[str, dict[str, Tally]]:
    """The Markdown precision table over ``recordings``, and the totals per kind."""
    totals: dict[str, Tally] = defaultdict(Tally)
    for rec in recordings:
        for kind, t in judge(rec).items():
            total = totals[kind]
            total.found += t.found
            total.present += t.present
            total.false_clean += t.false_clean
            total.false_incident += t.false_incident
            total.informational += t.informational
            total.missed += t.missed
    clean_hours = sum(r.seconds for r in recordings if r.clean) / 3600.0
    other_hours = sum(r.seconds for r in recordings if not r.clean) / 3600.0
    lines = [
        f"| signal kind | incidents found / present | false on clean runs ({clean_hours:.2f} h): count, per hour "
        f"| false in incident runs ({other_hours:.2f} h): count, per hour |",
        "|---|---|---|---|",
    ]
    for kind in kinds.SIGNAL_KINDS:
        t = totals[kind]
        found = f"{t.found} / {t.present}" if t.present else "- (none recorded)"
        if kind in INFORMATIONAL or (kind == kinds.QUERY_TERMINATED and not t.present):
            rate = t.informational / (clean_hours + other_hours) if clean_hours + other_hours else 0.0
            lines.append(f"| `{kind}` (informational) | {found} | {t.informational} events in all, {rate:.1f}/h | |")
            continue
        lines.append(
            f"| `{kind}` | {found} | {t.false_clean}, {_per_hour(t.false_clean, clean_hours)} "
            f"| {t.false_incident}, {_per_hour(t.false_incident, other_hours)} |"
        )
    return "\n".join(lines), totals


# ``query_lost`` is the watcher's verdict (a log silent without an end), which a listener in the driver never gives:
# judged on these recordings followed by ``watch`` at their pace on a simulated clock (``bench.watch_paced``): drivers
# killed and never restarted (rolling and single-file logs), killed and restarted within seconds, stopped by a deploy,
# a query idle for minutes and a busy clean run
WATCHED = (
    "driver_killed",
    "driver_killed_single_file",
    "deploy_sigkill",
    "deploy_sigterm",
    "idle_query",
    "clean_busy_90s",
)
LOST_AFTER_SECONDS = 240.0  # how long the watcher follows on after a recording's last write
LOST_STEP_SECONDS = 2.0  # the watcher's default poll interval


@dataclass
class LostTally:
    """``query_lost`` on one recording followed by ``watch``."""

    name: str
    present: int = 0  # drivers killed and never started again
    found: int = 0
    false: int = 0  # query_lost for a run whose driver lived or came back
    hours: float = 0.0  # recorded run time, first write to last
    delays: list[float] = field(default_factory=list)  # seconds from the log's last write to the verdict


def lost_drivers(truth: dict[str, Any]) -> list[str]:
    """Run ids whose driver was killed and never started again: a recording's ``drivers_lost``, or the last run of
    drivers killed one after the other (``scripts/record_deploys.py``, SIGKILL: each restart came seconds later)."""
    lost = [d["run_id"] for d in truth.get("drivers_lost", [])]
    facts = truth.get("run_facts", [])
    if not lost and truth.get("signal") == "SIGKILL" and facts:
        lost = [facts[-1]["run_id"]]
    return lost


def judge_lost(folder: str) -> LostTally:
    """Follow one recording's runs with ``watch`` at their pace and judge its ``query_lost`` verdicts."""
    import sqlite3
    import tempfile

    from bench.watch_paced import Log, PacedWatch
    from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions

    with open(os.path.join(folder, "truth.json")) as f:
        truth = json.load(f)
    tally = LostTally(os.path.basename(os.path.normpath(folder)))
    wanted = lost_drivers(truth)
    tally.present = len(wanted)
    logs = [Log.of(recording(run), paced=True) for run in run_dirs(folder)]
    with tempfile.TemporaryDirectory() as tmp:
        watched = os.path.join(tmp, "logs")
        os.mkdir(watched)
        settings = Settings(http_enabled=False, placement="off", history_path=os.path.join(tmp, "history.db"))

        def make(clock: Any) -> FleetObserver:
            return FleetObserver([watched], settings, WatchOptions(history=True), serve=False, clock=clock)

        start, end = min(log.start for log in logs), max(log.end for log in logs)
        watch = PacedWatch(watched, make, start - 10, LOST_STEP_SECONDS)
        for log in logs:
            watch.add(log)
        watch.run(end + LOST_AFTER_SECONDS)
        watch.fleet.stop()
        with sqlite3.connect(os.path.join(tmp, "history.db")) as conn:
            events = conn.execute("SELECT run_id, ts FROM events WHERE kind = ?", (kinds.QUERY_LOST,)).fetchall()
    last_write = {f.get("run_id"): log.end for f, log in zip(truth.get("run_facts", []), logs)}
    for run_id, ts in events:
        if run_id in wanted:
            tally.found += 1
            tally.delays.append(ts - last_write.get(run_id, ts))
        else:
            tally.false += 1
    tally.hours = (end - start) / 3600.0
    return tally


def lost_table(folders: list[str] | None = None) -> tuple[str, list[LostTally]]:
    """The Markdown table of ``query_lost`` per recording followed by ``watch`` (``WATCHED``)."""
    tallies = [judge_lost(f) for f in folders or [os.path.join(INCIDENTS, name) for name in WATCHED]]
    lines = [
        "| recording | lost drivers found / present | verdict after the log's last write | false `query_lost`: count, per hour |",
        "|---|---|---|---|",
    ]
    for t in tallies:
        delay = ", ".join(f"{d:.0f} s" for d in t.delays) or "-"
        lines.append(
            f"| {t.name} | {t.found} / {t.present} | {delay} | {t.false}, {_per_hour(t.false, t.hours)} ({t.hours * 60:.1f} min) |"
        )
    found, present, false = sum(t.found for t in tallies), sum(t.present for t in tallies), sum(t.false for t in tallies)
    hours = sum(t.hours for t in tallies)
    lines.append(f"| all | {found} / {present} | | {false}, {_per_hour(false, hours)} ({hours * 60:.1f} min) |")
    return "\n".join(lines), tallies


# ``state_skewed`` is judged on recordings made for it (``scripts/record_skew.py``, one operator each): rows skewed to
# one partition, bytes skewed to one partition (a few keys with big values, the rows even), and an even state
SKEW = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "skew")
SKEWED = ("rows", "bytes", "even")


@dataclass
class SkewTally:
    """``state_skewed`` on one recording: the hot partition found, and any other verdict counted as false."""

    name: str
    present: int = 0  # 1 where the truth names a hot partition
    found: int = 0
    false: int = 0  # state_skewed naming another partition, or any on the even run
    hours: float = 0.0
    partitions: list[int] = field(default_factory=list)  # the partitions the verdicts named


def judge_skew(folder: str) -> SkewTally:
    """Replay one skew recording as a live observer and judge its ``state_skewed`` verdicts against its truth."""
    with open(os.path.join(folder, "truth.json")) as f:
        truth = json.load(f)
    signals, seconds = replay_live([os.path.join(folder, "eventlog")])
    tally = SkewTally(os.path.basename(os.path.normpath(folder)), hours=seconds / 3600.0)
    hot = truth.get("hot_partition")
    tally.present = int(hot is not None)
    for e in signals:
        if e.kind != kinds.STATE_SKEWED:
            continue
        tally.partitions.append(e.attributes.get("partition"))
        if hot is not None and e.attributes.get("partition") == hot and not tally.found:
            tally.found = 1
        else:
            tally.false += 1
    return tally


def skew_table(folders: list[str] | None = None) -> tuple[str, list[SkewTally]]:
    """The Markdown table of ``state_skewed`` per skew recording (``SKEWED``)."""
    tallies = [judge_skew(f) for f in folders or [os.path.join(SKEW, name) for name in SKEWED]]
    lines = [
        "| recording | skewed operators found / present | partitions named | false `state_skewed`: count, per hour |",
        "|---|---|---|---|",
    ]
    for t in tallies:
        named = ", ".join(str(p) for p in t.partitions) or "-"
        lines.append(
            f"| {t.name} | {t.found} / {t.present} | {named} | {t.false}, {_per_hour(t.false, t.hours)} ({t.hours * 60:.1f} min) |"
        )
    found, present, false = sum(t.found for t in tallies), sum(t.present for t in tallies), sum(t.false for t in tallies)
    hours = sum(t.hours for t in tallies)
    lines.append(f"| all | {found} / {present} | | {false}, {_per_hour(false, hours)} ({hours * 60:.1f} min) |")
    return "\n".join(lines), tallies


def _per_hour(count: int, hours: float) -> str:
    return f"{count / hours:.1f}/h" if hours > 0 else "-"


def main(argv: list[str]) -> int:
    recordings = corpus([os.path.abspath(a) for a in argv] or None)
    text, totals = table(recordings)
    print(text)
    print("\n" + growth_table(recordings)[0])
    print("\n" + paging_table(recordings))
    print("\n" + restore_table(recordings)[0])
    if not argv:
        print("\n" + skew_table()[0])
        print("\n" + lost_table()[0])
    for rec in recordings:
        if rec.clean and rec.seconds >= 3600:
            count, rate = false_per_hour(rec)
            print(f"\n{rec.name}: {rec.seconds / 3600:.2f} h clean, {count} false incident events ({rate:.1f}/h)")
    missed = [m for t in totals.values() for m in t.missed]
    print("\nrecordings: " + ", ".join(f"{r.name} ({r.seconds / 60:.1f} min{', clean' if r.clean else ''})" for r in recordings))
    if missed:
        print("\nmissed: " + "; ".join(missed))
    counts = Counter(e.kind for r in recordings for e in r.signals)
    print("\nall signals: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
