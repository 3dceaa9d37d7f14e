"""A user's install: build the wheel, install it into a fresh virtual environment without any extra, and
run ``mixin export``, ``replay`` and ``inspect`` from it with no Java reachable (JAVA_HOME points nowhere:
a command that started pyspark's JVM would fail). The wheel carries the runbook and the default
dashboards, so export writes the committed artefacts without grafana-foundation-sdk, and says what to
install for a configuration that changes the dashboards."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, fixture_runs, progress_lines
from spark_state_observer.mixin.config import MixinConfig
from spark_state_observer.mixin.export import artefacts

pytestmark = pytest.mark.slow
QUERY_ID = "0c5b3a1e-1111-4222-8333-944445555666"


def run(args: list[str], env: dict[str, str] | None = None, cwd: str | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout, check=False)


def synthetic_checkpoint(root: str) -> str:
    """A small HDFS-store checkpoint in Spark's layout: batches 0-2 planned, 0-1 committed, two partitions."""
    path = os.path.join(root, "checkpoint")
    os.makedirs(os.path.join(path, "offsets"))
    os.makedirs(os.path.join(path, "commits"))
    with open(os.path.join(path, "metadata"), "w") as f:
        f.write(json.dumps({"id": QUERY_ID}) + "\n")
    for batch in range(3):
        with open(os.path.join(path, "offsets", str(batch)), "w") as f:
            f.write(
                'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{"spark.sql.shuffle.partitions":"2"}}\n'
                f'{{"start":{batch}}}\n'
            )
    for batch in range(2):
        with open(os.path.join(path, "commits", str(batch)), "w") as f:
            f.write('v1\n{"nextBatchWatermarkMs":0}\n')
    for partition in range(2):
        folder = os.path.join(path, "state", "0", str(partition))
        os.makedirs(folder)
        for version in (1, 2):
            with open(os.path.join(folder, f"{version}.delta"), "wb") as f:
                f.write(b"x" * 100 * version)
    return path


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """(bin directory of a fresh venv with only the wheel and its dependencies, environment without Java)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # build from a copy: building in place would leave build/ and *.egg-info in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), source / name)
    for package in ("spark_state_observer",):
        shutil.copytree(os.path.join(ROOT, package), source / package, ignore=shutil.ignore_patterns("__pycache__"))
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(source)])
    assert built.returncode == 0, built.stderr[-3000:]
    wheels = glob.glob(str(tmp / "dist" / "spark_state_observer-*.whl"))
    assert len(wheels) == 1, wheels
    created = run([sys.executable, "-m", "venv", str(tmp / "venv")])
    assert created.returncode == 0, created.stderr
    bin_dir = str(tmp / "venv" / "bin")
    installed = run([os.path.join(bin_dir, "python"), "-m", "pip", "install", "-q", wheels[0]], timeout=1800)
    assert installed.returncode == 0, installed.stderr[-3000:]
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp),
        "JAVA_HOME": str(tmp / "no-java"),
        "LANG": "C.UTF-8",
        "SPARK_STATE_OBSERVER_HISTORY_ENABLED": "false",
    }
    return bin_dir, env


def test_the_wheel_has_no_extras_and_its_own_version(venv) -> None:
    bin_dir, env = venv
    code = (
        "import importlib.util, importlib.metadata, spark_state_observer as observer; "
        "print(importlib.util.find_spec('grafana_foundation_sdk') is None, importlib.util.find_spec('streamlit') is None, "
        "importlib.metadata.version('spark-state-observer') == observer.__version__, observer.__file__)"
    )
    probe = run([os.path.join(bin_dir, "python"), "-c", code], env=env, cwd="/")
    assert probe.returncode == 0, probe.stderr
    sdk_absent, ui_absent, same_version, location = probe.stdout.split()
    assert (sdk_absent, ui_absent, same_version) == ("True", "True", "True")
    assert "site-packages" in location, "the installed package is tested, not the checkout"


def test_mixin_export_from_the_wheel_writes_the_committed_artefacts(venv, tmp_path) -> None:
    bin_dir, env = venv
    result = run([os.path.join(bin_dir, "spark-state-observer"), "mixin", "export", "--out", str(tmp_path / "out")], env=env, cwd="/")
    assert result.returncode == 0, result.stderr
    expected = artefacts(MixinConfig())
    written = {
        os.path.relpath(p, tmp_path / "out") for p in glob.glob(str(tmp_path / "out" / "**" / "*"), recursive=True) if os.path.isfile(p)
    }
    assert written == set(expected)
    for rel in expected:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as committed, open(tmp_path / "out" / rel, encoding="utf-8") as f:
            assert f.read() == committed.read(), rel
    custom = run(
        [
            os.path.join(bin_dir, "spark-state-observer"),
            "mixin",
            "export",
            "--out",
            str(tmp_path / "custom"),
            "--config",
            os.path.join(ROOT, "tests", "data", "mixin-custom.yaml"),
        ],
        env=env,
        cwd="/",
    )
    assert custom.returncode == 2 and "pip install 'spark-state-observer[mixin]'" in custom.stderr
    documented = run([os.path.join(bin_dir, "spark-state-observer"), "mixin", "config"], env=env, cwd="/")
    assert documented.returncode == 0 and "# Static identity labels" in documented.stdout


def test_replay_from_the_wheel(venv) -> None:
    bin_dir, env = venv
    run_dir = fixture_runs("hdfs")[0]
    result = run(
        [os.path.join(bin_dir, "spark-state-observer"), "replay", os.path.join(run_dir, "eventlog"), "--format", "prometheus"],
        env=env,
        cwd="/",
    )
    assert result.returncode == 0, result.stderr
    batches = [line for line in result.stdout.splitlines() if line.startswith("spark_streaming_batches_total{")]
    assert len(batches) == 1 and float(batches[0].rsplit(" ", 1)[1]) == len(progress_lines(run_dir))


def test_inspect_from_the_wheel(venv, tmp_path) -> None:
    bin_dir, env = venv
    checkpoint = synthetic_checkpoint(str(tmp_path))
    result = run([os.path.join(bin_dir, "spark-state-observer"), "inspect", "--json", checkpoint], env=env, cwd="/")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["query_id"], report["last_planned_batch"], report["last_committed_batch"]) == (QUERY_ID, 2, 1)
    partitions = report["operators"][0]["partitions"]
    assert [p["partition"] for p in partitions] == [0, 1] and all(len(p["files"]) == 2 for p in partitions)


def test_the_wheel_ships_zero_code_attach(venv) -> None:
    """The boot folder is package data (not a package), and the instrumentor is declared for opentelemetry-instrument."""
    bin_dir, env = venv
    printed = run([os.path.join(bin_dir, "python"), "-m", "spark_state_observer.zerocode", "path"], env=env, cwd="/")
    assert printed.returncode == 0, printed.stderr
    boot = printed.stdout.strip()
    assert "site-packages" in boot and os.path.isfile(os.path.join(boot, "sitecustomize.py"))
    code = (
        "import sys, importlib.metadata as m; from spark_state_observer.zerocode import hook; "
        "print('pyspark' in sys.modules, any(getattr(f, hook.MARK, False) for f in sys.meta_path), "
        "[e.value for e in m.entry_points(group='opentelemetry_instrumentor')])"
    )
    probe = run([os.path.join(bin_dir, "python"), "-c", code], env={**env, "PYTHONPATH": boot}, cwd="/")
    assert probe.returncode == 0 and probe.stderr == "", probe.stderr
    assert probe.stdout.strip() == "False True ['spark_state_observer.zerocode.instrumentor:SparkStateObserverInstrumentor']"
