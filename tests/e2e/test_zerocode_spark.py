"""Zero-code attach on real Spark: spark-submit with run or PYTHONPATH alone, a job that also calls attach,
a job with its own ``observer.py`` and ``streamlit_app.py``, and opentelemetry-instrument."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from importlib.metadata import entry_points
from typing import Any

import pytest
from test_zerocode import OUR_LINE, job_env

from conftest import REQUIRE_REAL, ROOT, free_port, need
from otlp_receiver import HttpReceiver
from spark_state_observer.cli.run import with_boot_path
from spark_state_observer.zerocode import boot_path

APP_NAME, QUERY_NAME = "zerocode-job", "zerocode_counts"  # as tests/support/zerocode_job.py names them
JOB = os.path.join(ROOT, "tests", "support", "zerocode_job.py")
SHADOW_JOB = os.path.join(ROOT, "tests", "support", "shadow_job")  # a job folder with its own observer.py


def spark_submit() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")


def submit(prefix: list[str], checkpoint: str, env: dict[str, str], *job_args: str) -> subprocess.Popen[str]:
    command = [*prefix, spark_submit(), "--conf", "spark.log.level=ERROR", JOB, checkpoint, *job_args]
    return subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen[str], timeout: float = 300) -> tuple[dict[str, Any], list[str]]:
    """Wait for the job; its RESULT and our lines (spark-submit merges the Python driver's stderr into its stdout)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        pytest.fail(f"the job did not finish:\n{err[-3000:]}")
    results = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and results, f"exit {proc.returncode}:\n{err[-3000:]}"
    return json.loads(results[-1][len("RESULT ") :]), [line for line in (out + err).splitlines() if line.startswith(OUR_LINE)]


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def state_rows(text: str, query: str = QUERY_NAME, app: str = APP_NAME) -> list[tuple[str, float]]:
    """The ``spark_state_rows`` samples of the job's query (labels text, value)."""
    out = []
    for line in text.splitlines():
        match = re.match(r"spark_state_rows\{(.*)\} (\S+)$", line)
        if match and f'query="{query}"' in match[1] and f'app="{app}"' in match[1]:
            out.append((match[1], float(match[2])))
    return out


def wait_for_state(
    port: int, proc: subprocess.Popen[str], timeout: float = 240, query: str = QUERY_NAME, app: str = APP_NAME
) -> list[tuple[str, float]]:
    """Scrape while the job runs until its query's state series shows all 5 keys."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            rows = state_rows(scrape(port), query, app)
        except OSError:
            rows = []
        if rows and all(v == 5 for _, v in rows):
            return rows
        time.sleep(1)
    pytest.fail(f"no spark_state_rows of {query} = 5 on port {port} (job exited: {proc.poll()})")


def observer_threads(names: list[str]) -> list[str]:
    return [n for n in names if n.startswith("spark-state-observer")]


# --- real spark-submit ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_run_and_pythonpath_alone_serve_the_query_while_it_runs_and_leak_nothing(tmp_path) -> None:
    """spark-submit through ``run`` (with create/stop cycles after), through PYTHONPATH alone, and a Spark Connect job."""
    need("java")
    ports = {"run": free_port(), "env": free_port(), "connect": free_port()}
    done = {name: tmp_path / f"done-{name}" for name in ports}
    run_prefix = [sys.executable, "-m", "spark_state_observer.cli", "run", "--"]
    procs = {
        "run": submit(
            run_prefix,
            str(tmp_path / "cp-run"),
            job_env(SPARK_STATE_OBSERVER_HTTP_PORT=str(ports["run"])),
            "--until-file",
            str(done["run"]),
            "--cycles",
            "2",
        ),
        "env": submit(
            [],
            str(tmp_path / "cp-env"),
            job_env(PYTHONPATH=with_boot_path(ROOT), SPARK_STATE_OBSERVER_HTTP_PORT=str(ports["env"])),
            "--until-file",
            str(done["env"]),
        ),
        # Connect's local server runs in the job's own process: python, not spark-submit (PySpark's own way to start it)
        "connect": subprocess.Popen(
            [
                *run_prefix,
                sys.executable,
                JOB,
                str(tmp_path / "cp-connect"),
                "--connect",
                "--until-file",
                str(done["connect"]),
                "--cycles",
                "1",
            ],
            env=job_env(SPARK_STATE_OBSERVER_HTTP_PORT=str(ports["connect"])),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        ),
    }
    try:
        for name, proc in procs.items():
            rows = wait_for_state(ports[name], proc)
            assert len(rows) == 1 and 'operator="stateStoreSave"' in rows[0][0], (name, rows)
            text = scrape(ports[name])
            assert re.search(rf'spark_streaming_batches_total\{{[^}}]*query="{QUERY_NAME}"[^}}]*\}} [1-9]', text), text[:2000]
            done[name].touch()
        results = {name: finish(proc) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
    for name, (result, ours) in results.items():
        assert ours == [], (name, ours)
        assert result["same_session"] and result["state_rows"] == 5, (name, result)
        threads = result["threads_after_stop"]
        assert all(observer_threads(t) == [] for t in threads), (name, threads)  # worker and endpoint stop with the session
        assert all(t == threads[0] for t in threads), (name, threads)  # nothing accumulates over create/stop cycles
    # one listener on the JVM's bus, whether getOrCreate was called once or twice, in each new application
    assert results["run"][0]["listeners"] == [1, 1, 1] and results["env"][0]["listeners"] == [1]
    assert results["connect"][0]["listeners"] == [None, None]  # the Connect client has no JVM; its scrape above shows the attach


@pytest.mark.slow
def test_a_job_with_its_own_observer_and_streamlit_app_modules_runs_and_is_observed(tmp_path) -> None:
    """Issue 48: ``python job.py`` beside its own ``observer.py`` and ``streamlit_app.py`` (the names this package's
    import and browser once took), through ``run``: the job imports its modules in the driver and, in a UDF of
    its stateful query, in Spark's Python workers; the observer serves the query and no worker attaches."""
    need("java")
    folder = tmp_path / "job"
    shutil.copytree(SHADOW_JOB, folder)
    port, done = free_port(), tmp_path / "done"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_state_observer.cli", "run", "--", sys.executable, "job.py", str(tmp_path / "cp"), str(done)],
        env=job_env(SPARK_STATE_OBSERVER_HTTP_PORT=str(port)),
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        rows = wait_for_state(port, proc, query="shadow_counts", app="shadow-job")
        assert len(rows) == 1 and 'operator="stateStoreSave"' in rows[0][0], rows
        done.touch()
        result, ours = finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    assert ours == [] and result["state_rows"] == 5, (ours, result)
    ours_file, ours_app = str(folder / "observer.py"), str(folder / "streamlit_app.py")
    assert result["driver"] == [ours_file, "the job", ours_app, "the job's app"]
    worker_pid, key, worker_observer, worker_app, attached = result["worker"]
    assert worker_pid != result["driver_pid"] and key == "bucket-0"  # a Python worker ran the job's own function
    assert os.path.realpath(worker_observer) == os.path.realpath(ours_file)
    assert os.path.realpath(worker_app) == os.path.realpath(ours_app)
    assert attached is False  # the boot hook is in the worker too, and attaches nothing there


@pytest.mark.slow
def test_a_job_that_also_calls_attach_is_observed_once(spark, monkeypatch) -> None:
    """On the shared session: zero-code attach first, then the job's own ``observer.attach``, then ``stop()``'s detach."""
    import spark_state_observer as observer
    from spark_state_observer.zerocode import sessions

    monkeypatch.setenv("SPARK_STATE_OBSERVER_HTTP_PORT", "0")
    listeners = spark._jsparkSession.streams().listListeners
    before = len(listeners())
    sessions.attach_once(spark)
    sessions.attach_once(spark)  # getOrCreate hands the same session again
    handle = sessions.attached_handle(spark)
    assert handle is not None and len(listeners()) == before + 1
    try:
        assert observer.attach(spark, http_port=0) is handle  # no second observer, no second port
        assert len(listeners()) == before + 1
    finally:
        sessions.detach(spark)  # what the wrapped spark.stop() does first (the shared session itself stays up)
    assert sessions.attached_handle(spark) is None and len(listeners()) == before
    server, worker = handle.observer.server, handle.observer._worker
    assert server is not None and worker is not None
    assert not server._thread.is_alive() and not worker.is_alive()  # the endpoint and the worker are gone
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=2)


@pytest.mark.slow
def test_stop_right_after_the_query_stops_still_delivers_its_termination(spark, tmp_path, monkeypatch) -> None:
    """A job's last lines: ``query.stop()`` then ``spark.stop()``, whose wrapper detaches the observer. Spark's bus
    hands the terminated event to its listeners on its own thread, here after a slower listener of the job's own
    (registered first, called first): the detach lets the bus deliver it before the listener goes."""
    from pyspark.sql.streaming import StreamingQueryListener

    from spark_state_observer.zerocode import sessions

    class Slow(StreamingQueryListener):  # type: ignore[misc]
        def onQueryStarted(self, event: Any) -> None: ...  # noqa: N802 (Spark's names)
        def onQueryProgress(self, event: Any) -> None: ...  # noqa: N802 (Spark's names)
        def onQueryIdle(self, event: Any) -> None: ...  # noqa: N802 (Spark's names)
        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            time.sleep(1.0)

    monkeypatch.setenv("SPARK_STATE_OBSERVER_HTTP_ENABLED", "false")
    monkeypatch.setenv("SPARK_STATE_OBSERVER_HISTORY_ENABLED", "false")
    slow = Slow()
    spark.streams.addListener(slow)
    try:
        sessions.attach_once(spark)
        handle = sessions.attached_handle(spark)
        assert handle is not None
        query = spark.readStream.format("rate").option("rowsPerSecond", 5).load().writeStream.format("noop")
        query = query.option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="1 second").start()
        deadline = time.monotonic() + 120
        while not query.recentProgress and time.monotonic() < deadline:
            time.sleep(0.2)
        query.stop()
        sessions.detach(spark)  # what the wrapped spark.stop() does first
        assert handle.observer.self_metrics.received["terminated"] == 1
    finally:
        sessions.detach(spark)
        spark.streams.removeListener(slow)


def instrumentor_installed() -> None:
    """``opentelemetry-instrument`` finds the instrumentor through the installed package's entry points."""
    need("opentelemetry-instrument")
    names = {ep.value for ep in entry_points(group="opentelemetry_instrumentor")}
    if "spark_state_observer.zerocode.instrumentor:SparkStateObserverInstrumentor" not in names:
        message = "the installed spark-state-observer has no opentelemetry_instrumentor entry point (pip install -e '.[test]' again)"
        if REQUIRE_REAL:
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.slow
def test_opentelemetry_instrument_delivers_otlp_and_failures_leave_the_job_alone(tmp_path) -> None:
    """The OTLP run and the three never-hurt runs, side by side (five JVMs would be too slow one by one)."""
    need("java")
    instrumentor_installed()
    receiver = HttpReceiver()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    taken_port = taken.getsockname()[1]
    bare = tmp_path / "bare-venv"  # a Python without the package: PySpark comes from spark-submit's own zip
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    run_prefix = [sys.executable, "-m", "spark_state_observer.cli", "run", "--"]
    procs = {
        "otlp": submit(
            ["opentelemetry-instrument", "--"],  # "--": its own options would take spark-submit's --conf
            str(tmp_path / "cp-otlp"),
            job_env(
                OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_METRIC_EXPORT_INTERVAL="1000", SPARK_STATE_OBSERVER_HTTP_ENABLED="false"
            ),
        ),
        "bad settings": submit(run_prefix, str(tmp_path / "cp-bad"), job_env(SPARK_STATE_OBSERVER_HTTP_PORT="ninety")),
        "port taken": submit(run_prefix, str(tmp_path / "cp-taken"), job_env(SPARK_STATE_OBSERVER_HTTP_PORT=str(taken_port))),
        "package missing": submit(
            [],
            str(tmp_path / "cp-missing"),
            job_env(PYTHONPATH=boot_path(), PYSPARK_PYTHON=str(bare / "bin" / "python")),
        ),
    }
    try:
        results = {name: finish(proc) for name, proc in procs.items()}
    finally:
        taken.close()
        receiver.stop()
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()

    result, ours = results["otlp"]
    assert ours == [] and result["listeners"] == [1]
    rows = [
        p
        for p in receiver.received.metric_points()
        if p["name"] == "spark.state.rows" and p["attributes"].get("spark.query.name") == QUERY_NAME
    ]
    assert rows and rows[-1]["value"] == result["state_rows"] == 5, rows[-3:]
    assert rows[-1]["resource"]["service.name"] == APP_NAME and rows[-1]["resource"]["spark.app.id"].startswith("local-")
    kinds = {r["event_name"] for r in receiver.received.log_records()}
    assert {"spark.streaming.query_started", "spark.streaming.query_terminated"} <= kinds

    expected = {
        "bad settings": "cannot read 'ninety'",
        "port taken": f"cannot serve metrics on 127.0.0.1:{taken_port}",
        "package missing": "the spark-state-observer package cannot be imported",
    }
    for name, needle in expected.items():
        result, ours = results[name]
        assert result["batches"] >= 3 and result["state_rows"] == 5, (name, result)  # the job ran to its end
        assert result["listeners"] == [0], (name, result)  # and unobserved
        assert len(ours) == 1 and needle in ours[0], (name, ours)
