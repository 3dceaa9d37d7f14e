"""Shared test helpers: recorded fixtures, free ports, real servers, one Spark session per run.

With ``SPARK_STATE_OBSERVER_REQUIRE_REAL=1`` (set by ``.ci/run``) a test that cannot find a real
component (the prometheus binary, the pushgateway, Java) fails instead of skipping.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Any, Iterator

import pytest
from pg_server import postgres  # noqa: F401  (the session's PostgreSQL server fixture)
from s3_server import s3_server  # noqa: F401  (the session's S3-compatible server fixture)

# SPARK_STATE_OBSERVER_TEST_CLOCK_SHIFT_DAYS moves the wall clock ahead in every test process (.ci/run: 60 days)
pytest_plugins = ("clock_shift",)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
REQUIRE_REAL = os.environ.get("SPARK_STATE_OBSERVER_REQUIRE_REAL") == "1"
# observers attached by tests (and the scripts they start) keep their history out of the work tree
os.environ.setdefault("SPARK_STATE_OBSERVER_HISTORY_PATH", os.path.join(tempfile.mkdtemp(prefix="sso-history-"), "history.db"))


def need(binary: str) -> str:
    """Path of a real binary the test needs: skip without it, or fail where real parts are required."""
    path = shutil.which(binary)
    if path is None:
        message = f"{binary} is not installed (apt-get install {binary})"
        if REQUIRE_REAL:
            pytest.fail(message)
        pytest.skip(message)
    return path


def free_port() -> int:
    """A loopback port free now, outside the range outgoing connections take theirs from (as the tools pick)."""
    from spark_state_observer.offline.local_process import free_port as pick

    return pick()


def wait_http(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Server:
    """A real server process on loopback, stopped by its own pid."""

    def __init__(self, args: list[str], url: str, cwd: str | None = None) -> None:
        self.url = url
        self.proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            wait_http(url)
        except Exception:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def start_prometheus(tmp: str, targets: list[str], scheme: str = "http") -> Server:
    binary = need("prometheus")
    port = free_port()
    config = os.path.join(tmp, "prometheus.yml")
    with open(config, "w") as f:
        f.write(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: observer\n"
            f"    scheme: {scheme}\n    static_configs:\n      - targets: {json.dumps(targets)}\n"
        )
    return Server(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={os.path.join(tmp, 'data')}", f"--web.listen-address=127.0.0.1:{port}"],
        f"http://127.0.0.1:{port}/-/ready",
    )


def prom_query(server: Server, expr: str) -> list[dict]:
    base = server.url.rsplit("/-/", 1)[0]
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def fixture_runs(pattern: str = "*") -> list[str]:
    runs = sorted(glob.glob(os.path.join(FIXTURES, pattern, "run*")))
    assert runs, f"no recorded fixtures under {FIXTURES}; run scripts/record_fixtures.py"
    return runs


def progress_lines(run_dir: str) -> list[dict]:
    with open(os.path.join(run_dir, "progress.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def eventlog_dir(run_dir: str) -> str:
    return os.path.join(run_dir, "eventlog")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] session shared by the end-to-end tests (a first stateful batch costs 10-30 s here)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if REQUIRE_REAL:
            pytest.fail("Java is not installed")
        pytest.skip("Java is not installed")
    from spark_state_observer.cli.demo import spark_session

    session = spark_session()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def need_java() -> None:
    """Skip without Java (Spark's JVM), or fail where real parts are required."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if REQUIRE_REAL:
            pytest.fail("Java is not installed")
        pytest.skip("Java is not installed")


@pytest.fixture(scope="session")
def restarted_run(tmp_path_factory: Any) -> dict[str, Any]:
    """``scripts/scenario_job.py`` run twice on one checkpoint in two processes (the second restores the
    first's state, its driver's UI on so that the observer follows the restore live), with the event log and
    a history; a copy of the checkpoint as the first run left it.
    A watcher (``FleetObserver``, on its own thread) follows both event logs while they are written, into a
    history of its own (``watch_history``), its exposition taken once both applications ended.

    The restart test, the watcher's restart test and the Restores page test read the same two runs: each run
    is a new JVM and a query, half a minute apiece on a busy 2-core machine, so the suite makes them once."""
    need_java()
    from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
    from spark_state_observer.settings import Settings

    work = tmp_path_factory.mktemp("restarted")
    root = str(work / "checkpoints")
    checkpoint, history, watch_history = os.path.join(root, "restore_demo"), str(work / "restore.db"), str(work / "watch.db")
    runs = [str(work / "run1"), str(work / "run2")]
    for run in runs:
        os.makedirs(eventlog_dir(run))
    fleet = FleetObserver(
        [eventlog_dir(run) for run in runs],
        Settings(http_enabled=False, history_path=watch_history),
        WatchOptions(poll_interval=0.5, grace_seconds=3600, history=True),
        serve=False,
    ).start()
    try:
        script = os.path.join(ROOT, "scripts", "scenario_job.py")
        common = ["--checkpoint", checkpoint, "--name", "restore_demo", "--event-log", "--history", history]
        run_script([script, *common, "--out", runs[0], "--batches", "4"])
        before = str(work / "before")
        shutil.copytree(checkpoint, before)
        run_script([script, *common, "--out", runs[1], "--batches", "3", "--ui"])  # its restore followed live (REST)
        finished = 'spark_state_observer_watch_applications{status="finished"} 2.0'
        deadline = time.monotonic() + 60
        watch_exposition = fleet.exposition().decode()
        while finished not in watch_exposition and time.monotonic() < deadline:  # shown once the round processed their ends
            time.sleep(0.5)
            watch_exposition = fleet.exposition().decode()
    finally:
        fleet.stop()
    return {
        "root": root,
        "checkpoint": checkpoint,
        "before": before,
        "history": history,
        "runs": runs,
        "watch_history": watch_history,
        "watch_exposition": watch_exposition,
    }


@pytest.fixture(scope="session")
def executor_loss_run(tmp_path_factory: Any) -> str:
    """The kill scenario of ``scripts/record_placement.py --live-check`` (``executor_loss_job``: local-cluster,
    executor 1 killed inside a batch, the driver's REST API polled live): its output folder.

    The executor-loss test and the live placement test read the same run, a local cluster of three JVMs."""
    need_java()
    out = str(tmp_path_factory.mktemp("executor_loss") / "live")
    run_script([os.path.join(ROOT, "scripts", "record_placement.py"), "--live-check", "--out", out], timeout=900)
    return out


@pytest.fixture(scope="session")
def incidents_history(tmp_path_factory: Any) -> str:
    """Every recorded incident replayed into one history (``scripts/screenshots.replay_incidents``), built once per
    test run: the pytest-xdist workers share the run's temporary folder, and the first to need it builds it under a
    lock while the other waits. Read-only: a module that may write copies it first (``incidents_copy``)."""
    import fcntl
    import sqlite3

    from incident_truth import screenshots_module

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # pytest-N, this run's own
    path = shared / "incidents.db"
    with open(shared / "incidents.db.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            building = shared / f"incidents-{os.getpid()}.db"
            screenshots_module().replay_incidents(str(building))
            ready = shared / f"incidents-{os.getpid()}-ready.db"
            source, target = sqlite3.connect(building), sqlite3.connect(ready)
            try:
                source.backup(target)  # one self-contained file (what the writer's WAL holds included)
            finally:
                source.close()
                target.close()
            os.replace(ready, path)
            for leftover in glob.glob(f"{building}*"):  # the replay's own file and its WAL
                os.remove(leftover)
    return str(path)


def incidents_copy(history: str, folder: Any) -> str:
    """A module's own copy of the shared incidents history."""
    path = str(folder / "incidents.db")
    shutil.copyfile(history, path)
    return path


def run_script(args: list[str], timeout: float = 300) -> None:
    """Run one of the repo's scripts in a new process; on failure, show the end of its stderr."""
    proc = subprocess.run([sys.executable, *args], timeout=timeout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").splitlines()
        start = max((i for i, line in enumerate(lines) if line.startswith("Traceback")), default=max(0, len(lines) - 25))
        tail = [line for line in lines[start:] if not line.startswith(("\tat ", "\t..."))][:40]
        pytest.fail(f"{args[0]} exited with {proc.returncode}:\n" + "\n".join(tail))


@pytest.fixture
def tls_files(tmp_path: Any) -> tuple[Any, Any]:
    """A self-signed certificate and key for 127.0.0.1 (openssl), for the HTTPS endpoint tests."""
    need("openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key
