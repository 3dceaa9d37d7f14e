"""Record the incident corpus from real Spark runs: the ground truth the signals are judged against.

    python scripts/record_incidents.py                      # every scenario below
    python scripts/record_incidents.py crash_loop_503 ...   # some of them
    python scripts/record_incidents.py --list

Each scenario runs ``scripts/scenario_job.py`` (or ``scripts/executor_loss_job.py``) in fresh processes and
keeps, under ``tests/fixtures/incidents/<name>/runN/``, the Spark event log (Spark's own codec), the progress
JSON lines, the live signals and ``run.json`` (facts the run measured about itself). ``truth.json`` is then
written by this script from what it did and what the runs reported: restart times and batch ids, the
executor it killed and when, the exception it injected and the class a classifier should give it, the number
of runs, ``"clean": true`` for runs in which nothing may fire. Nothing in it is typed by hand.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
INCIDENTS = os.path.join(HERE, "..", "tests", "fixtures", "incidents")
LONG_RUN_EVENTLOG_LIMIT = 15 * 1024 * 1024


class Recorder:
    """One scenario being recorded: runs jobs into ``target/runN`` sharing one checkpoint, then writes truth."""

    def __init__(self, name: str, python: str, tmp: str) -> None:
        self.name = name
        self.python = python
        self.target = os.path.join(INCIDENTS, name)
        self.checkpoint = os.path.join(tmp, "checkpoint")
        self.tmp = tmp
        self.runs: list[dict[str, Any]] = []
        shutil.rmtree(self.target, ignore_errors=True)

    def run(self, *extra: str, expect_failure: bool = False, script: str = "scenario_job.py", nice: bool = False) -> dict[str, Any]:
        """One run in a new process; returns its run.json facts (plus the command and exit status)."""
        out = os.path.join(self.target, f"run{len(self.runs) + 1}")
        cmd = [self.python, os.path.join(HERE, script), "--out", out]
        if script == "scenario_job.py":
            cmd += ["--checkpoint", self.checkpoint, "--event-log"]
        cmd += list(extra) + (["--expect-failure"] if expect_failure else [])
        if nice:
            cmd = ["nice", "-n", "10", *cmd]
        print("+", " ".join(cmd), flush=True)
        # the Python workers too run ``python`` (PySpark starts ``python3`` from PATH otherwise: another
        # virtualenv's pyarrow and NumPy under --python's PySpark)
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."), PYSPARK_PYTHON=self.python)
        # the job's stderr (Spark's and the traceback of a run that fails) goes to STDERR_LOG when that is set
        log = os.environ.get("STDERR_LOG")
        with open(log, "ab") if log else open(os.devnull, "wb") as stderr:
            subprocess.run(cmd, check=True, stderr=stderr, env=env)
        with open(os.path.join(out, "run.json")) as f:
            facts = json.load(f)
        facts["run_dir"] = os.path.basename(out)
        self.runs.append(facts)
        return facts

    def finish(self, truth: dict[str, Any]) -> None:
        """Drop what the tests do not read (.crc, scrape) and write truth.json."""
        for root, _dirs, files in os.walk(self.target):
            for name in files:
                if name.endswith(".crc") or name.startswith("appstatus") or name == "metrics.prom":
                    os.remove(os.path.join(root, name))
        truth = {
            "scenario": self.name,
            "recorded_by": "scripts/record_incidents.py",
            "runs": len(self.runs),
            "spark_version": self.runs[0]["spark_version"] if self.runs else None,
            **truth,
            "run_facts": self.runs,
        }
        with open(os.path.join(self.target, "truth.json"), "w") as f:
            json.dump(truth, f, indent=1)
        print(f"{self.name}: {dir_size(self.target) / 1024:.0f} KB", flush=True)


def dir_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(r, n)) for r, _d, files in os.walk(path) for n in files)


def clean(seconds: int, keep_eventlog_below: int | None = None) -> Callable[[Recorder], dict[str, Any]]:
    """A clean run: no restart, no executor change, 8 partitions, RocksDB, 3,000 rows/s on local[2].

    With ``keep_eventlog_below``, a short run's recording larger than that keeps a slimmed event log
    (``slim_event_log``), as ``restart`` does: Spark 3.5 logs about 2.5 times what 4.3 does for the same 90 s.
    """

    def scenario(rec: Recorder) -> dict[str, Any]:
        facts = rec.run(
            "--duration", str(seconds), "--partitions", "8", "--rows-per-second", "3000", "--name", rec.name, nice=seconds > 300
        )
        if seconds > 300 and dir_size(os.path.join(rec.target, "run1", "eventlog")) > LONG_RUN_EVENTLOG_LIMIT:
            # too big to keep: keep only the progress lines, compressed (.zstd: replay reads it as it reads Spark's zstd logs)
            import zstandard

            shutil.rmtree(os.path.join(rec.target, "run1", "eventlog"))
            path = os.path.join(rec.target, "run1", "progress.jsonl")
            with open(path, "rb") as src, open(path + ".zstd", "wb") as dst:
                dst.write(zstandard.ZstdCompressor(level=19).compress(src.read()))
            os.remove(path)
        kept = "event logs and progress lines"
        if keep_eventlog_below is not None and dir_size(rec.target) > keep_eventlog_below:
            slim_event_log(os.path.join(rec.target, "run1", "eventlog"))
            kept = f"progress lines and event logs without {', '.join(sorted(SLIMMED_EVENTS))} and stateless task ends"
        return {
            "kept": kept,
            "clean": True,
            "duration_seconds": facts["process_ended"] - facts["process_started"],
            "partitions": 8,
            "rows_per_second": 3000,
            "master": "local[2]",
            "provider": "rocksdb",
            "expected_events": [],
            "note": "no restart, no executor change: nothing may fire",
        }

    return scenario


def idle(seconds: int) -> Callable[[Recorder], dict[str, Any]]:
    """A live query with nothing to read: a parquet file source given two files, read in its first two batches,
    then no new file for ``seconds`` while the driver runs (Spark writes an idle event every
    ``spark.sql.streaming.noDataProgressEventInterval``, 10 s); stopped cleanly at the end. Nothing may fire:
    a silent but live query is no lost driver."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        path = os.path.join(rec.tmp, "input")
        facts = rec.run(
            "--query", "file_source", "--option", f"path={path}", "--duration", str(seconds), "--partitions", "4", "--name", rec.name
        )
        slim_event_log(os.path.join(rec.target, "run1", "eventlog"))
        return {
            "kept": f"progress lines and event logs without {', '.join(sorted(SLIMMED_EVENTS))} and stateless task ends",
            "clean": True,
            "duration_seconds": facts["process_ended"] - facts["process_started"],
            "partitions": 4,
            "trigger_seconds": 1,
            "master": "local[2]",
            "provider": "rocksdb",
            "expected_events": [],
            "idle": "two batches, then no input until the stop: idle events every 10 s",
            "note": f"two batches, then {seconds} s without input while the driver lives: idle, never lost",
        }

    return scenario


def restart(
    query: str, runs: tuple[int, int], downtime: float, keep_eventlog_below: int | None = None
) -> Callable[[Recorder], dict[str, Any]]:
    """Two runs of one query on one checkpoint, in two processes, ``downtime`` seconds apart.

    With ``keep_eventlog_below``, a recording larger than that keeps a slimmed event log (``slim_event_log``:
    the events replay and the task readers use, recompressed) so that the fixture stays small.
    """

    def scenario(rec: Recorder) -> dict[str, Any]:
        common = ["--partitions", "4", "--rows-per-second", "200", "--name", rec.name]
        if query != "dedup_window":
            common += ["--query", query]
        first = rec.run("--batches", str(runs[0]), *common)
        time.sleep(downtime)
        second = rec.run("--batches", str(runs[1]), *common)
        kept = "event logs and progress lines"
        if keep_eventlog_below is not None and dir_size(rec.target) > keep_eventlog_below:
            for facts in rec.runs:
                slim_event_log(os.path.join(rec.target, facts["run_dir"], "eventlog"))
            kept = f"progress lines and event logs without {', '.join(sorted(SLIMMED_EVENTS))} and stateless task ends"
        return {
            "kept": kept,
            "clean": False,
            "partitions": 4,
            "provider": "rocksdb",
            "changelog": True,
            "restarts": [restart_facts(first, second)],
            "expected_events": ["query_started (run 2, a restart)", "restore of every state operator in run 2's first batch"],
        }

    return scenario


# event types nothing in the observer reads (replay, placement, the restore's task figures): dropped by slim_event_log
SLIMMED_EVENTS = frozenset(
    {"SparkListenerStageSubmitted", "SparkListenerStageCompleted", "SparkListenerTaskStart", "SparkListenerEnvironmentUpdate"}
)


def slim_event_log(folder: str) -> None:
    """Rewrite every event-log file under ``folder`` without ``SLIMMED_EVENTS`` and without the task ends of
    stages that have no state operator, recompressed with zstd (level 19) under the same name. Every kept
    line is Spark's own, unchanged: replay, placement and the restore's task figures read the same events."""
    import zstandard

    from spark_state_observer.offline.eventlog import expand, open_decompressed
    from spark_state_observer.placement.task_lines import STATE_METRICS

    state_names = tuple(name.encode() for name in STATE_METRICS)  # what makes a task end one of a state operator
    for path in expand([folder]):
        kept = []
        with open_decompressed(path) as stream:
            for line in stream:
                event = json.loads(line).get("Event")
                if event in SLIMMED_EVENTS or (event == "SparkListenerTaskEnd" and not any(n in line for n in state_names)):
                    continue
                kept.append(line if line.endswith(b"\n") else line + b"\n")
        target = path if path.endswith(".zstd") else path + ".zstd"
        data = zstandard.ZstdCompressor(level=19).compress(b"".join(kept))
        with open(target, "wb") as f:
            f.write(data)
        if target != path:
            os.remove(path)


def restart_facts(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """A restart as the two runs measured it: when the old process ended, the new one started, its first batch."""
    return {
        "run": after["run_dir"],
        "previous_run": before["run_dir"],
        "previous_run_id": before["run_id"],
        "run_id": after["run_id"],
        "previous_process_ended": before["process_ended"],
        "process_started": after["process_started"],
        "downtime_seconds": after["process_started"] - before["process_ended"],
        "previous_last_batch_id": before["last_batch_id"],
        "first_batch_id": after["first_batch_id"],
        "first_batch_timestamp": after["first_batch_timestamp"],
    }


def executor_loss(rec: Recorder) -> dict[str, Any]:
    """local-cluster[2,1,1024], 6 partitions, executor 1 SIGKILLed after 5 batches; the query carries on."""
    facts = rec.run("--partitions", "6", "--batches-after", "9", "--name", rec.name, script="executor_loss_job.py")  # 9 after the kill
    shutil.rmtree(os.path.join(rec.target, facts["run_dir"], "checkpoint"), ignore_errors=True)
    placement = task_placement(os.path.join(rec.target, facts["run_dir"], "eventlog"))
    return {
        "clean": False,
        "master": "local-cluster[2,1,1024]",
        "partitions": 6,
        "provider": "rocksdb",
        "changelog": True,
        **placement,
        "killed_executor_id": facts["killed_executor_id"],
        "killed_at": facts["killed_at"],
        "last_batch_before_kill": facts["last_batch_before_kill"],
        "first_batch_after_kill": facts["last_batch_before_kill"] + 1,
        "expected_events": [
            "executor_removed (executor 1, at killed_at)",
            "store reload of the partitions executor 1 held, in the first batches after the kill",
            "no partitions_changed: the checkpoint pins 6 partitions",
        ],
    }


def task_placement(eventlog: str) -> dict[str, Any]:
    """Where Spark ran each state partition, batch by batch, from the log's task events (the reload ground truth).

    A stateful stage is one whose tasks report state-store metrics; stages are numbered in submission order
    within their batch (``streaming.sql.batchId`` of the job). A partition whose successful task ran on another
    executor than in the previous batch had to load its store again; failed attempts are retried tasks.
    """
    sys.path.insert(0, os.path.join(HERE, ".."))
    from spark_state_observer.capture.codecs import open_decompressed
    from spark_state_observer.offline.eventlog import expand

    batch_of_stage: dict[int, int] = {}
    placed: dict[tuple[int, int], dict[int, str]] = {}  # (batch, stage) -> partition -> executor
    failed: dict[int, int] = {}
    for path in expand([eventlog]):
        with open_decompressed(path) as stream:
            for line in stream:
                if line.startswith(b'{"Event":"SparkListenerJobStart"'):
                    job = json.loads(line)
                    batch = (job.get("Properties") or {}).get("streaming.sql.batchId")
                    if batch is not None:
                        batch_of_stage.update((stage, int(batch)) for stage in job["Stage IDs"])
                elif line.startswith(b'{"Event":"SparkListenerTaskEnd"'):
                    task = json.loads(line)
                    info, stage = task["Task Info"], task["Stage ID"]
                    if stage not in batch_of_stage or not any("state" in str(a.get("Name", "")) for a in info.get("Accumulables", [])):
                        continue
                    if task["Task End Reason"]["Reason"] != "Success":
                        failed[batch_of_stage[stage]] = failed.get(batch_of_stage[stage], 0) + 1
                        continue
                    placed.setdefault((batch_of_stage[stage], stage), {})[info["Partition ID"]] = info["Executor ID"]
    moves: list[dict[str, Any]] = []
    previous: dict[tuple[int, int], str] = {}
    for (batch, stage), partitions in sorted(placed.items()):
        order = sorted(s for b, s in placed if b == batch).index(stage)
        for partition, executor in sorted(partitions.items()):
            before = previous.get((order, partition))
            if before is not None and before != executor:
                moves.append(
                    {"batch_id": batch, "stateful_stage": order, "partition": partition, "from_executor": before, "to_executor": executor}
                )
            previous[(order, partition)] = executor
    return {
        "partition_moves": moves,
        "failed_task_attempts_by_batch": {str(b): n for b, n in sorted(failed.items())},
        "placement_note": "from SparkListenerTaskEnd: a moved partition loaded its store on another executor (a real reload)",
    }


WAREHOUSE_503 = "downstream warehouse rejected the write (HTTP 503)"


def crash_loop(rec: Recorder) -> dict[str, Any]:
    """foreachBatch raising from batch 3 on, restarted four times in new processes: five failing runs."""
    runs = [
        rec.run(
            "--query",
            "foreach_503",
            "--option",
            "fail_from=3",
            "--option",
            f"message={WAREHOUSE_503}",
            "--name",
            rec.name,
            expect_failure=True,
        )
        for _ in range(5)
    ]
    return {
        "clean": False,
        "failing_batch_id": 3,
        "restarts": [restart_facts(a, b) for a, b in itertools.pairwise(runs)],
        "failure": {
            "expected_class": "user_code",
            "where": "foreachBatch",
            "raised_type": "RuntimeError",
            "expected_root_cause": f"RuntimeError: {WAREHOUSE_503}",
            "every_run": True,
        },
        "expected_events": [
            "query_terminated with an exception, once per run, each after its own run started",
            "a crash loop (5 failing runs on one checkpoint)",
        ],
    }


def failing(
    query: str | None,
    expected_class: str,
    root_cause: Callable[[Recorder], str],
    *extra: str,
    inject_after: int = 0,
    conf: tuple[str, ...] = (),
    where: str = "",
) -> Callable[[Recorder], dict[str, Any]]:
    """One short run that terminates with an exception, and what a classifier should make of it."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        args = ["--name", rec.name, *extra]
        args += ["--query", query] if query else []
        args += ["--inject-after", str(inject_after)] if inject_after else []
        for kv in conf:
            args += ["--conf", kv]
        rec.run(*[a.replace("{scratch}", rec.tmp) for a in args], expect_failure=True)
        return {
            "clean": False,
            "failure": {"expected_class": expected_class, "where": where, "expected_root_cause": root_cause(rec), "every_run": True},
        }

    return scenario


UDF_MESSAGE = "no reference bucket for this value: the lookup table ends at 159"
MISSING_MODULE = "warehouse_enrich_udfs"
NO_SUCH_PROVIDER = "org.example.state.NoSuchStateStoreProvider"


def corrupt_checkpoint(rec: Recorder) -> dict[str, Any]:
    """Four good batches, then the newest state changelog of partition 0 is overwritten, then a restart fails."""
    first = rec.run("--batches", "4", "--name", rec.name)
    folder = os.path.join(rec.checkpoint, "state", "0", "0")
    newest = max((n for n in os.listdir(folder) if n.endswith(".changelog")), key=lambda n: int(n.split(".")[0]))
    with open(os.path.join(folder, newest), "r+b") as f:
        size = len(f.read())
        f.seek(0)
        f.write(b"\xde\xad\xbe\xef" * (size // 4 + 1))
    corrupted_at = time.time()
    second = rec.run("--batches", "4", "--name", rec.name, expect_failure=True)
    return {
        "clean": False,
        "corrupted_file": f"state/0/0/{newest}",
        "corrupted_at": corrupted_at,
        "restarts": [restart_facts(first, second)],
        "failure": {
            "expected_class": "checkpoint_corruption",
            "where": "restart after the corruption",
            # changelog files are LZ4 streams (the state store's default codec): garbage reads as a corrupt stream
            # 4.x wraps it in [CANNOT_LOAD_STATE_STORE.*]; 3.5 has no such class and fails the task with the bare
            # IOException
            **({"expected_error_class": "CANNOT_LOAD_STATE_STORE"} if int(second["spark_version"].split(".")[0]) >= 4 else {}),
            "expected_root_cause": "java.io.IOException: Stream is corrupted",
            "every_run": False,
            "failing_run": second["run_dir"],
        },
    }


def restart_fail_at_start(rec: Recorder) -> dict[str, Any]:
    """A good run of 4 batches, then three new applications on its checkpoint whose state schema it refuses:
    each fails at start, before any progress (a fleet restarting a job that no longer fits its state)."""
    good = rec.run("--batches", "4", "--name", rec.name)
    failed = [rec.run("--incompatible", "--name", rec.name, expect_failure=True) for _ in range(3)]
    runs = [good, *failed]
    return {
        "clean": False,
        "restarts": [{**restart_facts(a, b), "first_batch_id": None} for a, b in itertools.pairwise(runs)],
        "failure": {
            "expected_class": "state_schema",
            "where": "restart with a state schema the checkpoint refuses",
            # 4.x compares the operators with the checkpoint's state metadata first; 3.5 has no such check and
            # refuses the state's key schema when the store loads it
            "expected_root_cause": "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"
            if int(good["spark_version"].split(".")[0]) >= 4
            else "StateSchemaNotCompatible",
            "every_run": False,
            "failing_runs": [f["run_dir"] for f in failed],
        },
        "crash_loop": True,
        "expected_events": [
            "query_restarted into each failing run (a new application with the same query id and checkpoint)",
            "query_terminated (state_schema) once per failing run",
            "a crash loop (3 restarts within the crash-loop window)",
        ],
    }


def scheduled_available_now(rec: Recorder) -> dict[str, Any]:
    """A job scheduled every ~20 s with ``Trigger.AvailableNow`` on one checkpoint, five runs in new processes:
    each reads what arrived since, restores its state, commits and stops cleanly. Restarts, no crash loop."""
    runs = []
    for _ in range(5):
        if runs:
            time.sleep(15)
        runs.append(
            rec.run(
                "--query",
                "scheduled_counts",
                "--until-terminated",
                "--partitions",
                "4",
                "--rows-per-second",
                "2000",
                "--keys",
                "50",
                "--name",
                rec.name,
            )
        )
    return {
        "clean": False,
        "partitions": 4,
        "provider": "rocksdb",
        "trigger": "availableNow",
        "restarts": [restart_facts(a, b) for a, b in itertools.pairwise(runs)],
        "expected_events": [
            "query_started and query_restarted into runs 2-5, each run's query_terminated clean",
            "restore of every state operator in each restarted run's first batch",
            "no crash loop: every run before a restart stopped cleanly",
        ],
    }


def unbounded_growth(seconds: int) -> Callable[[Recorder], dict[str, Any]]:
    """State that only grows: a key per input row and no watermark (a dedup or aggregation forgetting its window)."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        facts = rec.run("--query", "unbounded", "--duration", str(seconds), "--rows-per-second", "200", "--name", rec.name)
        return {
            "clean": False,
            "duration_seconds": facts["process_ended"] - facts["process_started"],
            "unbounded": {"operator": "stateStoreSave", "rows_per_second": 200, "from": facts["process_started"]},
            "expected_events": ["state_unbounded on stateStoreSave once the growth window has enough batches"],
        }

    return scenario


def _epoch(text: str) -> float:
    """A progress timestamp (``2026-11-26T16:00:19.222Z``) as epoch seconds."""
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def dropped_by_watermark(batch: dict[str, Any]) -> dict[str, int]:
    """Per stateful operator of one progress, the rows it reported dropped as late (``numRowsDroppedByWatermark``)."""
    return {op["operatorName"]: int(op.get("numRowsDroppedByWatermark", 0)) for op in batch.get("stateOperators", [])}


def late_rows_facts(progress: list[dict[str, Any]], run: str, why: str) -> dict[str, Any]:
    """The late rows of one run as its progress reported them: from the trigger time of the first batch in
    which an operator dropped rows as late to the last batch's, who dropped them, how many, and how far the
    watermark stood from the trigger time in that first batch (positive: ahead of the clock)."""
    dropping = [p for p in progress if any(dropped_by_watermark(p).values())]
    if not dropping:
        raise ValueError(f"{run}: no batch reported numRowsDroppedByWatermark > 0")
    first, last = dropping[0], progress[-1]
    per_batch = [sum(dropped_by_watermark(p).values()) for p in progress if p["batchId"] >= first["batchId"]]
    return {
        "run": run,
        "from": _epoch(first["timestamp"]),
        "until": _epoch(last["timestamp"]),
        "first_batch_id": first["batchId"],
        "last_batch_id": last["batchId"],
        "operators": sorted({op for p in dropping for op, n in dropped_by_watermark(p).items() if n}),
        "watermark_ahead_seconds": _epoch(first["eventTime"]["watermark"]) - _epoch(first["timestamp"]),
        "batches_with_drops": len(dropping),
        "batches_from_first_drop": len(per_batch),
        "rows_dropped": sum(per_batch),
        "rows_dropped_per_batch": {"min": min(per_batch), "max": max(per_batch), "median": sorted(per_batch)[len(per_batch) // 2]},
        "input_rows_from_first_drop": sum(p["numInputRows"] for p in progress if p["batchId"] >= first["batchId"]),
        "why": why,
    }


def _multiples(start: int, end: int, every: int) -> int:
    """How many of the values ``start`` .. ``end - 1`` are multiples of ``every``."""
    return (end - 1) // every - (start - 1) // every


def late_batches(progress: list[dict[str, Any]], every: int, rows_per_second: int, join_every: int = 0) -> list[dict[str, Any]]:
    """Per batch: its input rows, the rows the lagging producer sent late (the ``rate`` source's values
    ``value % every == 0`` within the batch's offsets: second ``s`` holds values ``s * rows_per_second`` on),
    what the operators counted dropped and stored (``numRowsUpdated``: a join's rows added to its state, a
    deduplication's new rows, an aggregation's updated groups), and an aggregation's late groups and updated
    groups. A query over two ``rate`` sources (a join) has its lagging one marked (``incident_queries``
    ``LAGGING_PARTITIONS``) and its input rows are both sources'; with ``join_every`` the late rows that can
    reach the join are those of values ``value % lcm(every, join_every) == 0`` (a filter on the other side's key,
    copied to the lagging side through the join's equality)."""
    from incident_queries import LAGGING_PARTITIONS

    from spark_state_observer.model.spark_events import AGGREGATING_OPERATOR_NAMES

    batches = []
    for p in progress:
        rates = [s for s in p.get("sources", []) if str(s.get("description", "")).startswith("RateStream")]
        if len(rates) > 1:
            (rate,) = [s for s in rates if f"numPartitions={LAGGING_PARTITIONS}" in s["description"]]
        else:
            (rate,) = rates

        def rows(s: dict[str, Any]) -> tuple[int, int]:
            return int(s.get("startOffset") or 0) * rows_per_second, int(s["endOffset"]) * rows_per_second

        start, end = rows(rate)
        if sum(b - a for a, b in map(rows, rates)) != p["numInputRows"]:
            raise ValueError(
                f"batch {p['batchId']}: the rate offsets say {sum(b - a for a, b in map(rows, rates))} rows, the progress {p['numInputRows']}"
            )
        aggregations = [op for op in p.get("stateOperators", []) if op["operatorName"] in AGGREGATING_OPERATOR_NAMES]
        batch = {
            "batch_id": p["batchId"],
            "input_rows": p["numInputRows"],
            "lagging_source_rows": end - start,
            "late_input_rows": _multiples(start, end, every),
            "dropped": sum(dropped_by_watermark(p).values()),
            "stored": sum(int(op.get("numRowsUpdated", 0)) for op in p.get("stateOperators", [])),
            "late_groups": sum(int(op.get("numRowsDroppedByWatermark", 0)) for op in aggregations),
            "updated_groups": sum(int(op.get("numRowsUpdated", 0)) for op in aggregations),
        }
        if join_every:
            batch["late_rows_reaching_the_join"] = _multiples(start, end, math.lcm(every, join_every))
        batches.append(batch)
    return batches


def _spread(values: list[int] | list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    return {"min": ordered[0], "max": ordered[-1], "median": ordered[len(ordered) // 2]} if ordered else {}


def run_progress(rec: Recorder, facts: dict[str, Any]) -> list[dict[str, Any]]:
    with open(os.path.join(rec.target, facts["run_dir"], "progress.jsonl")) as f:
        return [json.loads(line) for line in f]


def compress_progress(run_dir: str) -> None:
    """``progress.jsonl`` as ``progress.jsonl.zstd`` (level 19; read as Spark's zstd logs are): a file source's
    progress lines are large (~3 KB each) and compress ~40x."""
    import zstandard

    path = os.path.join(run_dir, "progress.jsonl")
    with open(path, "rb") as src, open(path + ".zstd", "wb") as dst:
        dst.write(zstandard.ZstdCompressor(level=19).compress(src.read()))
    os.remove(path)


LATE_TRUTH_SOURCE = "numRowsDroppedByWatermark of each stateful operator in the run's progress lines (progress.jsonl)"


# a trickle of late rows is no incident: the share of the input rows the watermark may drop in a clean recording
TRICKLE_MAX_SHARE = 0.005


def late_rows(
    query: str,
    seconds: int,
    clean_run: bool,
    why: str = "",
    inject_after: int = 0,
    rows_per_second: int = 200,
    trickle: bool = False,
    keys: int = 10,
    **options: str,
) -> Callable[[Recorder], dict[str, Any]]:
    """One run of ``incident_queries.<query>`` (2 partitions, RocksDB, ``rows_per_second``, 1 s trigger) for
    ``seconds`` (after ``inject_after`` batches and the injection, when there is one); its truth read from the
    late rows the progress reported, and refused (ValueError) when the run does not show what the truth would
    claim. A clean run drops nothing, unless it is a ``trickle``: a few late rows, the watermark doing its job
    (refused when nothing was dropped, or when the median batch dropped more than ``TRICKLE_MAX_SHARE``).
    ``keys``: the job's ``--keys`` (a windowed count's or a session window's ``value % keys``)."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        args = ["--query", query, "--duration", str(seconds), "--partitions", "2", "--rows-per-second", str(rows_per_second)]
        args += ["--name", rec.name, "--keys", str(keys)]
        args += ["--inject-after", str(inject_after)] if inject_after else []
        for key, value in options.items():
            args += ["--option", f"{key}={value.replace('{scratch}', rec.tmp)}"]
        facts = rec.run(*args)
        progress = run_progress(rec, facts)
        slim_event_log(os.path.join(rec.target, facts["run_dir"], "eventlog"))
        compress_progress(os.path.join(rec.target, facts["run_dir"]))
        truth: dict[str, Any] = {
            "clean": clean_run,
            "query": query,
            "duration_seconds": facts["process_ended"] - facts["process_started"],
            "partitions": 2,
            "rows_per_second": rows_per_second,
            "trigger_seconds": 1,
            "master": "local[2]",
            "provider": "rocksdb",
            "watermark_delay_seconds": 10,
            "options": {k: v for k, v in options.items() if k != "path"},
            "batches": len(progress),
            "truth_from": LATE_TRUTH_SOURCE,
            "kept": f"progress lines (zstd) and the event log without {', '.join(sorted(SLIMMED_EVENTS))} and stateless task ends",
        }
        aggregation = query == "late_lagging_window"
        if aggregation:
            truth["keys"] = keys
            truth["window_seconds"] = 5
        session = query == "late_lagging_session"
        if session:
            truth["keys"] = keys
            truth["session_gap_seconds"] = int(options.get("gap_seconds", "5"))
            truth["output_mode"] = "append"
        join = query == "late_lagging_join"
        join_every = 0
        if join:
            from incident_queries import CLICK_EVERY

            join_every = CLICK_EVERY
            truth["join"] = {
                "lagging_side": "impressions (left): the rate source marked numPartitions=2",
                "other_side": f"clicks (right): value % {CLICK_EVERY} == 0, on time",
                "condition": "click_ad_id = ad_id AND clicked_at BETWEEN shown_at AND shown_at + interval 20 seconds",
                "watermark_policy": "min (Spark's default)",
            }
        every = int(options.get("every", "20"))
        batches = late_batches(progress, every, rows_per_second, join_every) if "every" in options else []
        if clean_run and trickle:
            if not all(p.get("stateOperators") for p in progress):
                raise ValueError("a batch without its stateful operator: nothing to say what it dropped")
            dropping = [b for b in batches if b["dropped"]]
            if not dropping:
                raise ValueError("no batch dropped a row: the trickle tests nothing")
            since = [b for b in batches if b["batch_id"] >= dropping[0]["batch_id"] and b["input_rows"]]
            shares = [b["dropped"] / b["input_rows"] for b in since]
            late_shares = [b["late_input_rows"] / b["input_rows"] for b in since]
            if _spread(shares)["median"] > TRICKLE_MAX_SHARE or _spread(late_shares)["median"] > TRICKLE_MAX_SHARE:
                raise ValueError(
                    f"not a trickle: median share dropped {_spread(shares)['median']:.2%}, sent late {_spread(late_shares)['median']:.2%}"
                )
            trickle_facts: dict[str, Any] = {
                "run": facts["run_dir"],
                "first_batch_id": dropping[0]["batch_id"],
                "last_batch_id": progress[-1]["batchId"],
                "operators": sorted({op for p in progress for op, n in dropped_by_watermark(p).items() if n}),
                "batches_with_drops": len(dropping),
                "batches_from_first_drop": len(since),
                "rows_dropped": sum(b["dropped"] for b in since),
                "input_rows_from_first_drop": sum(b["input_rows"] for b in since),
                "late_input_rows_from_first_drop": sum(b["late_input_rows"] for b in since),
                "rows_dropped_per_batch": _spread([b["dropped"] for b in since]),
                "dropped_share_of_input_rows": _spread(shares),
                "late_share_of_input_rows": _spread(late_shares),
            }
            if aggregation:
                arriving = [b["late_groups"] + b["updated_groups"] for b in since]
                trickle_facts["late_groups_share_of_arriving_groups"] = _spread(
                    [b["late_groups"] / n for b, n in zip(since, arriving, strict=True) if n]
                )
                trickle_facts["late_groups"] = sum(b["late_groups"] for b in since)
                trickle_facts["updated_groups"] = sum(b["updated_groups"] for b in since)
            trickle_facts["per_batch"] = batches
            trickle_facts["why_clean"] = (
                "a trickle: the watermark doing its job (late_rows_dropped needs 1 % of the input rows, half of an "
                "aggregation's arriving groups late, or a watermark ahead of the trigger time)"
            )
            return {
                **truth,
                "late_trickle": trickle_facts,
                "expected_events": [],
                "note": "the watermark dropped a few rows (counted in late_trickle), too few to be an incident: nothing may fire",
            }
        if clean_run:
            late = {p["batchId"]: d for p in progress if any((d := dropped_by_watermark(p)).values())}
            if late:
                raise ValueError(f"a clean run dropped late rows: {late}")
            if not all(p.get("stateOperators") for p in progress):
                raise ValueError("a batch without its stateful operator: nothing to say it dropped nothing")
            return {
                **truth,
                "expected_events": [],
                "note": "every batch reported numRowsDroppedByWatermark == 0 for every operator: nothing may fire",
            }
        facts_late = late_rows_facts(progress, facts["run_dir"], why)
        truth["late_rows"] = [facts_late]
        after_first = [p for p in progress if p["batchId"] >= facts_late["first_batch_id"] and p["numInputRows"]]
        if query == "late_future":
            with open(os.path.join(rec.target, facts["run_dir"], "injected.json")) as f:
                injected = json.load(f)
            # the batch that read the future row: its event time maximum is that row's
            (read,) = [
                p for p in progress if abs(_epoch(p.get("eventTime", {}).get("max", "1970-01-01T00:00:00Z")) - injected["event_time"]) < 1
            ]
            if any(any(dropped_by_watermark(p).values()) for p in progress if p["batchId"] <= read["batchId"]):
                raise ValueError("rows were dropped before the future row was read")
            if not 0 < facts_late["first_batch_id"] - read["batchId"] <= 3:
                raise ValueError(f"the drops began in batch {facts_late['first_batch_id']}, the future row was read in {read['batchId']}")
            if facts_late["watermark_ahead_seconds"] < 3600:
                raise ValueError(f"the watermark was only {facts_late['watermark_ahead_seconds']:.0f} s ahead")
            if not all(any(dropped_by_watermark(p).values()) for p in after_first):
                raise ValueError("a batch with input after the first drop dropped nothing")
            # Spark drops late rows against the previous batch's watermark (the one for late events) but evicts
            # state against the new one: the batch after the jump evicts, the one after that drops
            jumped = next(p for p in progress if _epoch(p["eventTime"]["watermark"]) >= injected["event_time"] - 3600)
            facts_late.update(
                injected_at=injected["written_at"],
                future_event_time=injected["event_time"],
                future_row_batch_id=read["batchId"],
                watermark_jumped_batch_id=jumped["batchId"],
                batches_before_injection=sum(1 for p in progress if _epoch(p["timestamp"]) < injected["written_at"]),
            )
            truth["expected_events"] = [
                f"late_rows_dropped on {', '.join(facts_late['operators'])} from the first dropping batch to the end of the run",
            ]
        else:
            later = progress[2:]
            share = sum(1 for p in later if any(dropped_by_watermark(p).values())) / len(later)
            if share < 0.8:
                raise ValueError(f"only {share:.0%} of the batches after the first two dropped late rows")
            facts_late["share_of_batches_dropping_after_the_first_two"] = share
            if batches:
                since = [b for b in batches if b["batch_id"] >= facts_late["first_batch_id"]]
                facts_late["late_input_rows_from_first_drop"] = sum(b["late_input_rows"] for b in since)
                if join or session:
                    # what Spark counted against the rows: the input (both sources'), the rows reaching the
                    # operator (dropped + stored: a join stores every row it does not drop), the late rows sent
                    arriving = [b["dropped"] + b["stored"] for b in since]
                    facts_late.update(
                        stored_from_first_drop=sum(b["stored"] for b in since),
                        dropped_share_of_input_rows=_spread([b["dropped"] / b["input_rows"] for b in since if b["input_rows"]]),
                        dropped_share_of_dropped_and_stored=_spread([b["dropped"] / n for b, n in zip(since, arriving, strict=True) if n]),
                        per_batch=batches,
                    )
                if join:
                    reaching = sum(b["late_rows_reaching_the_join"] for b in since)
                    facts_late["late_rows_reaching_the_join_from_first_drop"] = reaching
                    exact = sum(1 for b in since if b["dropped"] == b["late_rows_reaching_the_join"])
                    facts_late["batches_dropping_exactly_the_late_rows_reaching_the_join"] = exact
                if session:
                    exact = sum(1 for b in since if b["dropped"] == b["late_input_rows"])
                    facts_late["batches_dropping_exactly_the_late_rows_sent"] = exact
                if aggregation:
                    arriving = [b["late_groups"] + b["updated_groups"] for b in since]
                    facts_late.update(
                        late_groups=sum(b["late_groups"] for b in since),
                        updated_groups=sum(b["updated_groups"] for b in since),
                        late_groups_per_batch=_spread([b["late_groups"] for b in since]),
                        updated_groups_per_batch=_spread([b["updated_groups"] for b in since]),
                        late_groups_share_of_arriving_groups=_spread(
                            [b["late_groups"] / n for b, n in zip(since, arriving, strict=True) if n]
                        ),
                        per_batch=batches,
                    )
            truth["expected_events"] = [
                f"late_rows_dropped on {', '.join(facts_late['operators'])} in (nearly) every batch from the first dropping one",
            ]
        return truth

    return scenario


SCENARIOS: dict[str, Callable[[Recorder], dict[str, Any]]] = {
    "unbounded_growth": unbounded_growth(240),
    "clean_busy_90s": clean(90, keep_eventlog_below=1024 * 1024),
    "clean_busy_30min": clean(1800),
    "idle_query": idle(180),
    "dedup_agg_restart_43": restart("dedup_window", (8, 6), downtime=20),
    "dedup_agg_restart_41": restart("dedup_window", (8, 6), downtime=20),
    "dedup_agg_restart_40": restart("dedup_window", (8, 6), downtime=20, keep_eventlog_below=300 * 1024),
    "dedup_agg_restart_35": restart("dedup_window", (8, 6), downtime=20, keep_eventlog_below=300 * 1024),
    "join_restart": restart("join", (6, 5), downtime=10),
    "executor_loss": executor_loss,
    "restart_fail_at_start": restart_fail_at_start,
    "crash_loop_503": crash_loop,
    "scheduled_available_now": scheduled_available_now,
    "fail_udf_value_error": failing(
        "udf_error",
        "user_code",
        lambda rec: f"ValueError: {UDF_MESSAGE}",
        "--option",
        "fail_at_value=160",
        "--option",
        f"message={UDF_MESSAGE}",
        where="Python UDF",
    ),
    "fail_sink_path_is_file": failing(
        "file_sink",
        "sink",
        lambda rec: os.path.join(rec.tmp, "warehouse_table"),
        "--option",
        "path={scratch}/warehouse_table",
        inject_after=3,
        where="parquet file sink whose output folder became a file",
    ),
    "fail_source_corrupt_file": failing(
        "file_source",
        "source",
        lambda rec: "part-0003-corrupt.parquet",
        "--option",
        "path={scratch}/landing",
        "--option",
        "corrupt_name=part-0003-corrupt.parquet",
        inject_after=2,
        where="parquet file source reading a corrupt file",
    ),
    "fail_tws_ttl_no_time_mode": failing(
        "tws_ttl_none",
        "configuration",
        lambda rec: "STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL",
        where="transformWithStateInPandas: TTL on a value state with timeMode None",
    ),
    "fail_worker_missing_module": failing(
        "worker_import",
        "python_dependency",
        lambda rec: f"ModuleNotFoundError: No module named '{MISSING_MODULE}'",
        "--option",
        f"module={MISSING_MODULE}",
        where="pandas UDF unpickled in the Python worker",
    ),
    "fail_checkpoint_corrupt": corrupt_checkpoint,
    "fail_config_provider_class": failing(
        None,
        "configuration",
        lambda rec: NO_SUCH_PROVIDER,
        conf=(f"spark.sql.streaming.stateStore.providerClass={NO_SUCH_PROVIDER}",),
        where="spark.sql.streaming.stateStore.providerClass",
    ),
    "fail_python_oom": failing(
        "python_oom",
        "out_of_memory",
        lambda rec: "MemoryError",
        "--option",
        "fail_at_value=160",
        "--option",
        "allocate_mb=4096",
        conf=("spark.executor.pyspark.memory=512m",),
        where="Python UDF above spark.executor.pyspark.memory",
    ),
    # rows dropped as late by the watermark: a future record, a lagging producer, and lag within the delay
    "late_future_record": late_rows(
        "late_future",
        100,
        clean_run=False,
        why="a record 2 h in the future moved the watermark ahead of every later row",
        inject_after=8,
        path="{scratch}/landing",
        ahead_seconds="7200",
    ),
    "late_lagging_producer": late_rows(
        "late_lagging", 100, clean_run=False, why="5 % of rows arrive 60 s late against a 10 s delay", every="20", lag_seconds="60"
    ),
    "late_within_delay": late_rows("late_lagging", 100, clean_run=True, every="20", lag_seconds="5"),
    # the same lag into a windowed count (it counts late groups, not rows) at 2,000 rows/s: 5 % late, and a trickle
    "late_lagging_aggregation": late_rows(
        "late_lagging_window",
        100,
        clean_run=False,
        why="5 % of a windowed count's rows arrive 60 s late against a 10 s delay",
        rows_per_second=2000,
        every="20",
        lag_seconds="60",
    ),
    "late_trickle_aggregation": late_rows(
        "late_lagging_window", 100, clean_run=True, rows_per_second=2000, trickle=True, every="500", lag_seconds="60"
    ),
    # the same lag into a stream-stream join (the impressions' producer lags; both sides have a watermark, the
    # query's is their minimum) and into a session window (per key of 100: the lagging producer owns 5 keys)
    "late_lagging_join": late_rows(
        "late_lagging_join",
        100,
        clean_run=False,
        why="5 % of a join's impressions arrive 60 s late against a 10 s delay on both sides",
        every="20",
        lag_seconds="60",
    ),
    "late_within_delay_join": late_rows("late_lagging_join", 100, clean_run=True, every="20", lag_seconds="5"),
    "late_lagging_session": late_rows(
        "late_lagging_session",
        100,
        clean_run=False,
        why="5 % of a session window's rows (5 of its 100 keys) arrive 60 s late against a 10 s delay",
        keys=100,
        every="20",
        lag_seconds="60",
    ),
    "late_within_delay_session": late_rows("late_lagging_session", 100, clean_run=True, keys=100, every="20", lag_seconds="5"),
}
# recordings made with another PySpark: the interpreter of its virtualenv (bash scripts/pyspark_venv.sh VERSION
# /work/venvs/psNN); any scenario of any recording script can also be recorded so with --python and --suffix
VENV_PYTHON = {
    "dedup_agg_restart_41": "/work/venvs/ps41/bin/python",
    "dedup_agg_restart_40": "/work/venvs/ps40/bin/python",
    "dedup_agg_restart_35": "/work/venvs/ps35/bin/python",
}


Scenario = Callable[[Recorder], dict[str, Any]]


def record_scenarios(
    scenarios: dict[str, Scenario],
    recorded_by: str | None = None,
    errors: tuple[type[BaseException], ...] = (),
    python_for: dict[str, str] | None = None,
) -> int:
    """The recording scripts' one command line: record the named scenarios (all by default) or ``--list``
    them; a scenario that fails is reported and the others still recorded. ``recorded_by`` is written into
    each truth; ``errors`` are the scenario's own failures beyond a job's exit, an OS error or a missing key."""
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="*")
    ap.add_argument("--python", default=sys.executable, help="the interpreter (and so the PySpark) that runs the jobs")
    ap.add_argument(
        "--suffix",
        default="",
        help="record each scenario as NAME+SUFFIX (e.g. _35 with --python of a PySpark 3.5 virtualenv), beside the newest Spark's",
    )
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        print("\n".join(scenarios))
        return 0
    failed = []
    for name in args.scenarios or list(scenarios):
        with tempfile.TemporaryDirectory() as tmp:
            python = args.python if args.python != sys.executable else (python_for or {}).get(name, sys.executable)
            rec = Recorder(name + args.suffix, python, tmp)
            try:
                truth = scenarios[name](rec)
                rec.finish({"recorded_by": recorded_by, **truth} if recorded_by else truth)
            except (subprocess.CalledProcessError, OSError, KeyError, *errors) as exc:
                print(f"{name}: NOT recorded ({exc!r})", flush=True)
                failed.append(name)
    print("not recorded: " + (", ".join(failed) or "none"), flush=True)
    return 1 if failed else 0


def main() -> int:
    return record_scenarios(SCENARIOS, errors=(ValueError,), python_for=VENV_PYTHON)


if __name__ == "__main__":
    sys.exit(main())
