"""Record the test fixtures from real Spark runs (never typed by hand).

    python scripts/record_fixtures.py            # writes tests/fixtures/<scenario>/...

Each scenario runs ``scripts/scenario_job.py`` in a fresh process (a restart is two processes on one
checkpoint) and keeps its progress JSON lines, the observer's scrape, its signals and the Spark event
log. Re-run it after upgrading PySpark; the tests read whatever Spark version recorded them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures")

# scenario -> list of runs (each run: extra arguments for scenario_job.py); runs share a checkpoint
SCENARIOS: dict[str, list[list[str]]] = {
    "rocksdb_restart": [["--batches", "6", "--codec", "zstd"], ["--batches", "4", "--codec", "zstd"]],
    "hdfs": [["--provider", "hdfs", "--batches", "6", "--codec", "lz4"]],
    "rocksdb_nochangelog_snappy": [["--changelog", "off", "--batches", "4", "--codec", "snappy"]],
    "rocksdb_plain_log": [["--batches", "3", "--codec", "none"]],
    # a restart that fails: the state schema no longer matches the checkpoint
    "schema_failure": [["--batches", "3", "--codec", "zstd"], ["--incompatible", "--codec", "zstd"]],
}


def record(scenario: str, runs: list[list[str]]) -> None:
    target = os.path.join(FIXTURES, scenario)
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = os.path.join(tmp, "checkpoint")
        for n, extra in enumerate(runs, start=1):
            out = os.path.join(target, f"run{n}")
            cmd = [sys.executable, os.path.join(HERE, "scenario_job.py"), "--checkpoint", checkpoint, "--out", out, "--event-log", *extra]
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
            for root, _dirs, files in os.walk(out):
                for name in files:
                    if name.endswith(".crc") or name.startswith("appstatus"):
                        os.remove(os.path.join(root, name))


def main() -> int:
    wanted = sys.argv[1:] or list(SCENARIOS)
    for scenario in wanted:
        record(scenario, SCENARIOS[scenario])
    return 0


if __name__ == "__main__":
    sys.exit(main())
