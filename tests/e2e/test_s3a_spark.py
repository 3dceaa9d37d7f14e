"""Spark itself writes to the object store: a real stateful job keeps its event log and checkpoint in S3 through s3a.

The S3-compatible server is s3proxy (tests/support/s3_server.py); Spark's S3 connector is hadoop-aws matching PySpark's
Hadoop client jars, with the AWS SDK bundle its pom names (scripts/fetch_hadoop_aws.sh). While the job runs, the
``watch`` command follows its rolling log from ``s3://`` part by part (each part is an object only once Spark
closes it) and, at the end, exports what the job's own progress says; ``inspect`` of the checkpoint's URL gives
the report of the same checkpoint copied to disk, reading no snapshot file whole.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from test_fleet import Watch, parse, value
from test_object_store import bucket, cli

from checks import assert_matches_progress
from conftest import REQUIRE_REAL, ROOT

pytestmark = pytest.mark.slow

JARS = os.environ.get("SPARK_STATE_OBSERVER_HADOOP_AWS_DIR", os.path.expanduser("~/.cache/spark-state-observer/hadoop-aws"))


def connector() -> str:
    """The s3a class path fetched for PySpark's Hadoop version; skip (fail in CI) without it."""
    manifests = sorted(glob.glob(os.path.join(JARS, "hadoop-aws-*", "manifest.json")))
    if not manifests:
        message = f"hadoop-aws is not in {JARS} (bash scripts/fetch_hadoop_aws.sh)"
        if REQUIRE_REAL:
            pytest.fail(message)
        pytest.skip(message)
    folder = os.path.dirname(manifests[-1])
    with open(manifests[-1]) as f:
        return ":".join(os.path.join(folder, jar) for jar in json.load(f)["jars"])


def local_copy(fs: Any, prefix: str, into: Path) -> Path:
    """Every object under ``prefix`` as a file (folder markers, keys ending in '/', as folders)."""
    for key in fs.find(prefix):
        relative = key[len(prefix) :].strip("/")
        if key.endswith("/") or not relative:
            continue
        (into / relative).parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(key, str(into / relative))
    return into


def test_a_job_writing_through_s3a_is_followed_from_s3_and_its_checkpoint_inspected_there(s3_server: Any, tmp_path: Path) -> None:
    classpath = connector()
    fs, name = bucket()
    fs.call_s3("put_object", Bucket=name, Key="eventlogs/", Body=b"")  # Spark wants its log folder to exist
    watch = Watch(str(tmp_path), [f"s3://{name}/eventlogs", "--state-file", str(tmp_path / "watch.json")])
    progress_file = tmp_path / "progress.json"
    job = subprocess.Popen(
        [
            sys.executable,
            os.path.join(ROOT, "tests", "support", "s3a_job.py"),
            "--event-log-dir",
            f"s3a://{name}/eventlogs",
            "--checkpoint",
            f"s3a://{name}/checkpoints/q1",
            "--jars",
            classpath,
            "--progress-out",
            str(progress_file),
            "--batches",
            "5",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    seen_while_running: list[float] = []
    try:
        deadline = time.monotonic() + 400
        while job.poll() is None and time.monotonic() < deadline:
            try:
                batches = value(watch.metrics(), "spark_streaming_batches_total")
            except OSError:
                batches = None  # not serving yet
            if batches:
                seen_while_running.append(batches)
            time.sleep(0.5)
        _, err = job.communicate(timeout=60)
        assert job.returncode == 0, err.decode(errors="replace")[-3000:]
        progress = json.loads(progress_file.read_text())
        assert len(progress) >= 5
        watch.wait("every batch of the job", lambda s: value(s, "spark_streaming_batches_total") == len(progress))
        with urllib.request.urlopen(f"http://127.0.0.1:{watch.port}/metrics", timeout=10) as r:
            exposition = r.read().decode()
        assert_matches_progress(exposition, progress)  # what the watcher exports is what the job's own progress says
        assert seen_while_running and min(seen_while_running) < len(progress), "nothing was followed while the job ran"
        series = parse(exposition)
        parts = [k for k in fs.find(f"{name}/eventlogs") if "/events_" in k]
        assert len(parts) >= 3, parts  # the log rolled: parts appeared one by one
        assert value(series, "spark_state_observer_watch_store_requests_total", kind="get") == len(parts)  # each part once
        assert not [k for k in series if k[0] == "spark_state_observer_watch_store_problems_total" and series[k]]
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        assert watch.stop() == 0

    local = local_copy(fs, f"{name}/checkpoints/q1", tmp_path / "q1")
    assert glob.glob(str(local / "state" / "*" / "*" / "*.zip")), "no RocksDB snapshot was uploaded"
    url = f"s3://{name}/checkpoints/q1"
    remote, mine = cli(["inspect", "--json", url]), cli(["inspect", "--json", str(local)])
    assert remote.returncode == 0 and mine.returncode == 0, (remote.stderr, mine.stderr)
    assert json.loads(remote.stdout) == json.loads(mine.stdout.replace(str(local), url))
    # a stop can fall between a batch's commit and its progress report: the checkpoint may hold that one batch more
    assert json.loads(remote.stdout)["last_committed_batch"] in (progress[-1]["batchId"], progress[-1]["batchId"] + 1)
    text = cli(["inspect", url])
    assert text.returncode == 0 and text.stdout == cli(["inspect", str(local)]).stdout.replace(str(local), url)
