"""Zero-code attach (issue 28): an unmodified job file under ``spark-submit`` (the one PySpark ships) is
observed when started through ``spark-state-observer run``, through ``PYTHONPATH`` alone and through
``opentelemetry-instrument``, and so is its Spark Connect variant; and it runs to completion, with one line on stderr, when the observer cannot
attach (bad settings, port taken, package missing from the job's Python).

The Spark runs start concurrently (each a JVM of its own) to keep the suite's time down.
"""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT
from spark_state_observer.cli.run import with_boot_path
from spark_state_observer.zerocode import boot_path
from spark_state_observer.zerocode.sessions import otlp_overrides

OUR_LINE = "spark-state-observer:"


def job_env(**extra: str) -> dict[str, str]:
    """The test's environment for a job: this checkout importable, the observer's history off, this Python."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_STATE_OBSERVER_", "OTEL_"))}
    env.update(PYTHONPATH=ROOT, PYSPARK_PYTHON=sys.executable, SPARK_STATE_OBSERVER_HISTORY_ENABLED="false")
    env.update(extra)
    return env


# --- without Spark -----------------------------------------------------------------------------------
def test_boot_folder_hooks_without_importing_pyspark_and_chains_the_next_sitecustomize(tmp_path) -> None:
    """Every Python process with the folder on PYTHONPATH runs it: it must be cheap and hide nothing."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['OTHER_SITECUSTOMIZE'] = 'ran'\n")
    printed = subprocess.run(
        [sys.executable, "-m", "spark_state_observer.zerocode", "path", "--pythonpath"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(other), ROOT])},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert printed.split(os.pathsep) == [boot_path(), str(other), ROOT]
    assert os.listdir(boot_path()) == ["sitecustomize.py"] or set(os.listdir(boot_path())) == {"sitecustomize.py", "__pycache__"}
    code = (
        "import os, sys; from spark_state_observer.zerocode import hook; "
        "print(os.environ.get('OTHER_SITECUSTOMIZE'), 'pyspark' in sys.modules, "
        "sum(1 for f in sys.meta_path if getattr(f, hook.MARK, False)))"
    )
    probe = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": printed}, capture_output=True, text=True)
    assert probe.returncode == 0 and probe.stderr == "", probe.stderr
    assert probe.stdout.split() == ["ran", "False", "1"]
    assert with_boot_path(with_boot_path("/a")) == os.pathsep.join([boot_path(), "/a"])  # a nested run adds it once


def test_run_keeps_empty_pythonpath_entries_which_mean_the_current_folder(tmp_path) -> None:
    """Issue 48: ``PYTHONPATH=":/a"`` lets a job import from the folder it starts in; ``run`` must keep that."""
    sep = os.pathsep
    assert with_boot_path("") == boot_path()  # no entries: none gained (an empty one would add the current folder)
    assert with_boot_path(f"{sep}/a") == sep.join([boot_path(), "", "/a"])
    assert with_boot_path(f"/a{sep}{sep}/b{sep}") == sep.join([boot_path(), "/a", "", "/b", ""])
    assert with_boot_path(with_boot_path(f"{sep}/a")) == sep.join([boot_path(), "", "/a"])
    work, scripts = tmp_path / "work", tmp_path / "scripts"
    work.mkdir(), scripts.mkdir()
    (work / "here_only_zc.py").write_text("WHERE = 'the current folder'\n")
    # a script's own folder comes first on sys.path, not the current one
    (scripts / "probe.py").write_text("import here_only_zc\nprint(here_only_zc.WHERE)\n")
    ran = subprocess.run(
        [sys.executable, "-m", "spark_state_observer.cli", "run", "--", sys.executable, str(scripts / "probe.py")],
        env=job_env(PYTHONPATH=f"{ROOT}{sep}"),
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0 and ran.stdout.strip() == "the current folder", ran.stderr


def test_run_says_what_is_wrong_with_its_command() -> None:
    missing = subprocess.run(
        [sys.executable, "-m", "spark_state_observer.cli", "run", "--", "no-such-command-zc"], env=job_env(), capture_output=True, text=True
    )
    assert missing.returncode == 127 and missing.stderr.strip() == f"{OUR_LINE} run: command not found: no-such-command-zc"
    ran = subprocess.run(
        [sys.executable, "-m", "spark_state_observer.cli", "run", "--", sys.executable, "-c", "import os; print(os.environ['PYTHONPATH'])"],
        env=job_env(),
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0 and ran.stdout.strip() == os.pathsep.join([boot_path(), ROOT])


def test_under_opentelemetry_instrument_otlp_follows_the_otel_variables() -> None:
    assert otlp_overrides(False, {}) == {}
    assert otlp_overrides(True, {}) == {"otlp_endpoint": "http://localhost:4318"}
    assert otlp_overrides(True, {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == {"otlp_endpoint": "http://localhost:4317"}
    assert otlp_overrides(True, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}) == {}  # the exporters read it
    assert otlp_overrides(True, {"OTEL_METRICS_EXPORTER": "none"}) == {}
    assert otlp_overrides(True, {"OTEL_METRICS_EXPORTER": "console,otlp"}) == {"otlp_endpoint": "http://localhost:4318"}
    assert otlp_overrides(True, {"OTEL_SDK_DISABLED": "true"}) == {}
