"""Record drivers ended by a signal: rolling deploys (SIGTERM) and an OOM killer (SIGKILL), from real Spark runs.

    python scripts/record_deploys.py                    # both scenarios
    python scripts/record_deploys.py deploy_sigterm     # one of them
    python scripts/record_deploys.py --list

Each scenario is four runs of one query on one checkpoint, each a new application started as Kubernetes starts
a driver: PySpark's own ``bin/spark-submit`` running ``scripts/scenario_job.py`` (``--duration 600``: the job
never stops by itself). The spark-submit shell script execs the JVM, so the process started is the driver's
JVM and the Python driver is its child. Once the run's event log holds ``PROGRESS_EVENTS`` progress events,
the recorder sends the JVM a signal, as a deploy (``SIGTERM``: the JVM runs its shutdown hook, which stops
the SparkContext) or the kernel's OOM killer (``SIGKILL``: nothing runs) would, waits for it to exit
(``EXIT_TIMEOUT`` s, then SIGKILL, said in the truth), makes sure the Python driver is gone too, waits
``PAUSE`` s and starts the next run. All four runs fall within the crash-loop window (15 min).

The Python driver dies with its JVM, so the job's own ``run.json``, progress lines and signals are never
written: ``tests/fixtures/incidents/<name>/runN/eventlog`` (the rolling event log folder as Spark wrote it,
without its ``appstatus`` marker) is all a run keeps, and ``truth.json``'s facts about each run come from
what the recorder did (when it started the process, signalled it and saw it exit) and from that event log
itself (run id, query id, first and last batch, whether the application's end was logged and its exit code,
whether the query's termination was). Nothing in it is typed by hand.

A scenario whose logs are not what its signal should leave stops without a truth, saying what each log shows.
SIGTERM races: the shutdown hook stops the context under the running query, whose thread then fails; its
``QueryTerminatedEvent`` (``java.lang.IllegalStateException: SparkContext has been shutdown``, or ``Cannot call
methods on a stopped SparkContext.``) usually misses the listener bus's last drain, but reached the log right after
``SparkListenerApplicationEnd`` in 2 of 16 runs here. Such a recording is no ``deploy_sigterm``: run it again.
It is ``deploy_sigterm_late_termination``'s: the same deploys, recorded again (at most ``RACE_ATTEMPTS`` times)
until at least one run's log shows that race (0 in 40 runs on a quiet machine, 2 in 16 on a busy one), or a
refused recording kept as it was adopted: ``python scripts/record_deploys.py --adopt HELD_DIR``.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from record_incidents import INCIDENTS, Recorder, record_scenarios, restart_facts  # noqa: E402

from spark_state_observer.capture.codecs import EventLogError, open_decompressed  # noqa: E402
from spark_state_observer.offline.eventlog import expand  # noqa: E402

PROGRESS_EVENTS = 5  # progress events a run has logged before it is signalled
START_TIMEOUT = 300.0  # seconds a run may take to log them (a busy machine starts a JVM slowly)
EXIT_TIMEOUT = 90.0  # seconds the signalled JVM may take to exit before it is SIGKILLed
PYTHON_TIMEOUT = 15.0  # seconds the Python driver may outlive its JVM before it is SIGKILLed
PAUSE = 5.0  # seconds between one run's exit and the next run's start (a pod replaced)
WINDOW = 900.0  # every run within the default crash_loop_window_seconds
RUNS = 4
RACE_ATTEMPTS = 10  # deploy_sigterm_late_termination: whole recordings tried until one run shows the race
JOB = ["--duration", "600", "--partitions", "4", "--rows-per-second", "200"]
STREAMING = "org.apache.spark.sql.streaming.StreamingQueryListener$"


def spark_submit(python: str) -> str:
    """``bin/spark-submit`` of the PySpark that ``python`` imports."""
    code = "import os, pyspark; print(os.path.dirname(pyspark.__file__))"
    home = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    return os.path.join(home, "bin", "spark-submit")


def progress_logged(eventlog: str) -> int:
    """Progress events in the event log so far (a frame being written as it is read ends the count)."""
    count = 0
    try:
        for path in expand([eventlog]):
            with open_decompressed(path) as stream:
                for line in stream:
                    count += line.startswith(b'{"Event":"' + STREAMING.encode() + b'QueryProgressEvent"')
    except (EventLogError, OSError):
        pass
    return count


def children(pid: int) -> list[int]:
    """The direct child processes of ``pid`` (from /proc: every thread's children)."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return sorted(set(found))


def command_of(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def log_facts(eventlog: str) -> dict[str, Any]:
    """What a run's event log shows: its application and query, its batches, how the log ends."""
    files = expand([eventlog])
    events = []
    for path in files:
        with open_decompressed(path) as stream:
            events += [json.loads(line) for line in stream if line.strip()]
    names = [e["Event"].removeprefix(STREAMING) for e in events]
    app_start = next(e for e in events if e["Event"] == "SparkListenerApplicationStart")
    started = [e for e in events if e["Event"] == STREAMING + "QueryStartedEvent"]
    if len(started) != 1:
        raise RuntimeError(f"{eventlog}: {len(started)} query starts, expected one")
    progress = [e["progress"] for e in events if e["Event"] == STREAMING + "QueryProgressEvent"]
    ends = [e for e in events if e["Event"] == "SparkListenerApplicationEnd"]
    return {
        "spark_version": next(e["Spark Version"] for e in events if e["Event"] == "SparkListenerLogStart"),
        "app_id": app_start["App ID"],
        "query_name": started[0]["name"],
        "query_id": started[0]["id"],
        "run_id": started[0]["runId"],
        "app_start_timestamp": app_start["Timestamp"] / 1000.0,
        "first_batch_id": progress[0]["batchId"] if progress else None,
        "last_batch_id": progress[-1]["batchId"] if progress else None,
        "first_batch_timestamp": progress[0]["timestamp"] if progress else None,
        "last_batch_timestamp": progress[-1]["timestamp"] if progress else None,
        "batches": len(progress),
        "query_terminated": STREAMING + "QueryTerminatedEvent" in [e["Event"] for e in events],
        "app_end": bool(ends),
        "app_end_timestamp": ends[-1]["Timestamp"] / 1000.0 if ends else None,
        # absent from the event when Spark did not know it; None also when there is no ApplicationEnd
        "exit_code": ends[-1].get("ExitCode") if ends else None,
        "last_events": names[-2:],
        # a SIGTERMed driver's shutdown hook cancels the batch in flight: its job's and SQL execution's ends may
        # reach the log after the application's end
        "events_after_app_end": names[names.index("SparkListenerApplicationEnd") + 1 :] if ends else [],
        "event_files": [os.path.relpath(p, eventlog) for p in files],
    }


def signalled_run(rec: Recorder, sig: signal.Signals, conf: tuple[str, ...] = ()) -> dict[str, Any]:
    """One run through spark-submit, signalled once it logged ``PROGRESS_EVENTS`` progress events; its facts.
    ``conf``: ``key=value`` Spark settings of the job (a single-file event log)."""
    out = os.path.join(rec.target, f"run{len(rec.runs) + 1}")
    eventlog = os.path.join(out, "eventlog")
    cmd = [spark_submit(rec.python), os.path.join(HERE, "scenario_job.py"), "--out", out, "--checkpoint", rec.checkpoint, "--event-log"]
    cmd += [*JOB, "--name", rec.name, *(a for c in conf for a in ("--conf", c))]
    print("+", " ".join(cmd), flush=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."), PYSPARK_PYTHON=rec.python, PYSPARK_DRIVER_PYTHON=rec.python)
    stderr_path = os.path.join(rec.tmp, f"{os.path.basename(out)}.stderr")
    facts: dict[str, Any] = {"run_dir": os.path.basename(out), "signal": sig.name}
    with open(stderr_path, "wb") as stderr:
        facts["process_started"] = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while (seen := progress_logged(eventlog)) < PROGRESS_EVENTS:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{out}: no {PROGRESS_EVENTS} progress events (exit {proc.returncode}); see {tail(stderr_path)}")
                time.sleep(1.0)
            facts["progress_seen_before_signal"] = seen  # in the log as the recorder read it; more may have been on the way
            jvm = command_of(proc.pid)
            if not jvm or not os.path.basename(jvm[0]).startswith("java"):
                raise RuntimeError(f"{out}: process {proc.pid} is {jvm[:1]}, not the JVM spark-submit should have exec'd")
            drivers = [c for c in children(proc.pid) if any(a.endswith("scenario_job.py") for a in command_of(c))]
            facts["signalled_at"] = time.time()
            proc.send_signal(sig)
            try:
                proc.wait(EXIT_TIMEOUT)
                facts["escalated_to_sigkill"] = False
            except subprocess.TimeoutExpired:
                print(f"  the JVM outlived {sig.name} by {EXIT_TIMEOUT:.0f} s: SIGKILL", flush=True)
                proc.kill()
                proc.wait()
                facts["escalated_to_sigkill"] = True
            facts["process_ended"] = time.time()
            facts["process_exit_status"] = proc.returncode
            facts["python_driver"] = end_python_driver(drivers)
        finally:  # a run that went wrong: neither its JVM nor its Python driver outlives the recorder
            if proc.poll() is None:
                stray = children(proc.pid)
                proc.kill()
                proc.wait()
                for pid in (p for p in stray if alive(p)):
                    os.kill(pid, signal.SIGKILL)
    for name in os.listdir(out):
        if name != "eventlog":  # a file the Python driver got to write before it died (none expected)
            facts.setdefault("also_written", []).append(name)
    facts.update(log_facts(eventlog))
    print(f"  {facts['run_dir']}: batches {facts['first_batch_id']}..{facts['last_batch_id']}, ends {facts['last_events']}", flush=True)
    rec.runs.append(facts)
    return facts


def end_python_driver(pids: list[int]) -> str:
    """Wait for the Python driver (the JVM's child) to end after its JVM; SIGKILL it if it lingers. How it ended."""
    if not pids:
        return "not found among the JVM's children"
    deadline = time.monotonic() + PYTHON_TIMEOUT
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    lingering = [p for p in pids if alive(p)]
    for pid in lingering:
        os.kill(pid, signal.SIGKILL)
    return f"alive {PYTHON_TIMEOUT:.0f} s after its JVM: SIGKILLed" if lingering else "exited by itself after its JVM"


def tail(path: str, lines: int = 15) -> str:
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def _late_termination(f: dict[str, Any]) -> bool:
    """Whether a SIGTERMed run's query termination reached the log after its application's end (the race)."""
    return bool(f["app_end"]) and "QueryTerminatedEvent" in f["events_after_app_end"]


def deploy_truth(runs: list[dict[str, Any]], sig: signal.Signals, race: bool) -> dict[str, Any]:
    """The truth of ``RUNS`` signalled runs, checked against what ``sig`` should leave in their logs (``race``: at
    least one run's query termination reached the log after its application's end)."""
    span = runs[-1]["process_ended"] - runs[0]["process_started"]
    if span > WINDOW:
        raise RuntimeError(f"the runs took {span:.0f} s, more than the {WINDOW:.0f} s window")
    term = sig == signal.SIGTERM
    # SIGTERM: the application's end logged (exit code 0), the query's termination not (or, raced, only after
    # it); SIGKILL: neither
    unlike = [
        f"{f['run_dir']}: app_end {f['app_end']}, exit_code {f['exit_code']}, query_terminated {f['query_terminated']}, "
        f"last events {f['last_events']}"
        for f in runs
        if (f["app_end"], f["query_terminated"] and not (race and _late_termination(f))) != (term, False)
        or (term and f["exit_code"] not in (0, None))
    ]
    if race and not any(_late_termination(f) for f in runs):
        unlike.append(f"no run's termination came after its application's end in {RACE_ATTEMPTS} attempts")
    if unlike:
        raise RuntimeError(f"logs unlike a {sig.name}ed driver's: " + "; ".join(unlike))
    truth: dict[str, Any] = {
        "clean": False,
        "signal": sig.name,
        "submitted_with": "pyspark/bin/spark-submit (it execs the JVM: the process signalled; the Python driver is its child)",
        "master": "local[2]",
        "partitions": 4,
        "rows_per_second": 200,
        "provider": "rocksdb",
        "changelog": True,
        "kept": "event logs only: the Python driver dies with its JVM before it writes run.json, progress lines or signals",
        "runs_within_seconds": span,
        "restarts": [restart_facts(a, b) for a, b in itertools.pairwise(runs)],
        "crash_loop": not term,
        "expected_events": [
            "query_restarted into runs 2-4, each restoring every state operator in its first batch",
            "no crash loop: each run ended with its application (a deploy), none crashed"
            if term
            else "a crash loop: 3 restarts within the window, each after a run whose end was never seen",
        ],
    }
    if race:
        truth["late_terminations"] = [f["run_dir"] for f in runs if _late_termination(f)]
    if term:
        after = [f["run_dir"] for f in runs if f["events_after_app_end"]]
        # Spark 3.5's SparkListenerApplicationEnd has no ExitCode (added in 4.0)
        exit_codes = "ExitCode 0" if all(f["exit_code"] == 0 for f in runs) else "no ExitCode: Spark 3.5 logs none"
        if any(f["exit_code"] is None for f in runs) and not all(f["exit_code"] is None for f in runs):
            exit_codes = "ExitCode " + ", ".join(str(f["exit_code"]) for f in runs)
        truth["note"] = (
            "a rolling deploy: SIGTERM to the driver's JVM, whose shutdown hook stops the SparkContext. Each log has "
            f"SparkListenerApplicationEnd ({exit_codes}) and no QueryTerminatedEvent: the query is never stopped, its "
            "application ends under it. An end with its application, not a crash: 3 restarts in the crash-loop "
            "window, no loop."
            + (
                f" In {', '.join(after)} the batch in flight was cancelled by the context's stop: its stage's, job's "
                "(JobFailed) and SQL execution's ends were logged after ApplicationEnd (events_after_app_end)."
                if after
                else ""
            )
            + (
                f" In {', '.join(truth['late_terminations'])} the query's thread failed under the stopped context and its "
                "QueryTerminatedEvent (IllegalStateException: the SparkContext stopped) reached the log after "
                "ApplicationEnd: a consequence of the deploy's stop, still no crash."
                if race
                else ""
            )
        )
    else:
        truth["note"] = (
            "drivers killed as the OOM killer kills them: SIGKILL to the driver's JVM, nothing runs. Each log has "
            "neither ApplicationEnd nor QueryTerminatedEvent and stops mid-batch: each run's end is never seen, a "
            "crash; 3 restarts in the crash-loop window are a crash loop."
        )
    return truth


def deploys(sig: signal.Signals, race: bool = False) -> Callable[[Recorder], dict[str, Any]]:
    """``RUNS`` runs of the dedup-window job on one checkpoint, each ended by ``sig`` to its JVM after
    ``PROGRESS_EVENTS`` batches, the next started ``PAUSE`` s after it exited. ``race``: recorded again until at
    least one run's query termination (the query thread failing under the stopped context) reached the log after
    the application's end, which the other runs may show too."""

    def attempt(rec: Recorder) -> list[dict[str, Any]]:
        runs = []
        for _ in range(RUNS):
            if runs:
                time.sleep(PAUSE)
            runs.append(signalled_run(rec, sig))
        return runs

    def scenario(rec: Recorder) -> dict[str, Any]:
        runs = attempt(rec)
        for n in range(1, RACE_ATTEMPTS if race else 1):
            if any(_late_termination(f) for f in runs):
                break
            print(f"  attempt {n}: no run's termination came after its application's end; again", flush=True)
            for f in runs:
                shutil.rmtree(os.path.join(rec.target, f["run_dir"]))
            shutil.rmtree(rec.checkpoint, ignore_errors=True)
            rec.runs.clear()
            runs = attempt(rec)
        return deploy_truth(runs, sig, race)

    return scenario


def killed(rolling: bool) -> Callable[[Recorder], dict[str, Any]]:
    """One run SIGKILLed as the OOM killer kills a driver, never started again: its log stops without an end
    (no ``ApplicationEnd``, no ``QueryTerminatedEvent``) and stays so. ``rolling``: Spark 4's default
    ``eventlog_v2_`` folder; else one file (``spark.eventLog.rolling.enabled=false``), left ``.inprogress``."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        facts = signalled_run(rec, signal.SIGKILL, () if rolling else ("spark.eventLog.rolling.enabled=false",))
        if facts["app_end"] or facts["query_terminated"]:
            raise RuntimeError(
                f"a killed driver's log with an end: app_end {facts['app_end']}, query_terminated {facts['query_terminated']}"
            )
        return {
            "clean": False,
            "signal": "SIGKILL",
            "submitted_with": "pyspark/bin/spark-submit (it execs the JVM: the process signalled; the Python driver is its child)",
            "master": "local[2]",
            "partitions": 4,
            "rows_per_second": 200,
            "provider": "rocksdb",
            "rolling": rolling,
            "kept": "the event log only: the Python driver dies with its JVM before it writes anything",
            "restarts": [],
            "drivers_lost": [{"run": facts["run_dir"], "run_id": facts["run_id"], "killed_at": facts["signalled_at"]}],
            "expected_events": ["query_lost: the driver is gone, its log silent without an end, nothing started again"],
            "note": "a driver killed without a word and never restarted: the log stops mid-stream and is left in progress",
        }

    return scenario


SCENARIOS: dict[str, Callable[[Recorder], dict[str, Any]]] = {
    "driver_killed": killed(rolling=True),
    "driver_killed_single_file": killed(rolling=False),
    "deploy_sigterm": deploys(signal.SIGTERM),
    "deploy_sigkill": deploys(signal.SIGKILL),
    "deploy_sigterm_late_termination": deploys(signal.SIGTERM, race=True),
}


def adopt(held: str, name: str = "deploy_sigterm_late_termination") -> int:
    """Keep a SIGTERM recording this script refused for ``deploy_sigterm`` because a run raced (``held``: its
    ``runN/eventlog`` folders as recorded) as ``name``, with the truth its logs give: the recorder's own process
    times were not kept, so each run's are its application's start and end as Spark logged them."""
    target = os.path.join(INCIDENTS, name)
    shutil.rmtree(target, ignore_errors=True)
    runs = []
    for run_dir in sorted(d for d in os.listdir(held) if d.startswith("run")):
        shutil.copytree(os.path.join(held, run_dir, "eventlog"), os.path.join(target, run_dir, "eventlog"))
        facts = {"run_dir": run_dir, "signal": "SIGTERM", **log_facts(os.path.join(target, run_dir, "eventlog"))}
        facts["process_started"], facts["process_ended"] = facts["app_start_timestamp"], facts["app_end_timestamp"]
        runs.append(facts)
    try:
        truth = deploy_truth(runs, signal.SIGTERM, race=True)
    except RuntimeError as exc:
        shutil.rmtree(target)
        print(f"{name}: NOT adopted ({exc})", flush=True)
        return 1
    truth["process_times"] = "each run's application start and end as its log has them (the recorder's were not kept)"
    with open(os.path.join(target, "truth.json"), "w") as f:
        json.dump(
            {"scenario": name, "recorded_by": "scripts/record_deploys.py --adopt", "runs": len(runs), **truth, "run_facts": runs},
            f,
            indent=1,
        )
    print(f"{name}: adopted from {held}", flush=True)
    return 0


def main() -> int:
    if sys.argv[1:2] == ["--adopt"]:  # --adopt HELD_DIR: a refused SIGTERM recording whose runs raced
        return adopt(sys.argv[2])
    return record_scenarios(SCENARIOS, recorded_by="scripts/record_deploys.py", errors=(RuntimeError,))


if __name__ == "__main__":
    sys.exit(main())
