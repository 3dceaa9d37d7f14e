"""Record the snapshot-health fixtures from real Spark runs (never typed by hand).

    python scripts/record_snapshot_health.py [scenario ...]   # writes tests/fixtures/snapshot_health/<scenario>/

Two scenarios of ``scripts/scenario_job.py`` (a dedup then a windowed count, RocksDB with changelog
checkpointing, 8 state partitions so Spark's top-5 instance report leaves some out):

- ``never_uploaded``: ``minDeltasForSnapshot`` huge and ``forceSnapshotUploadOnLag`` off, so no store ever
  uploads a snapshot; then a restart on the same checkpoint, whose first batch replays every changelog.
- ``normal``: the demo session's settings (a snapshot every 5 deltas, maintenance every 5 s), where the lag
  stays within a maintenance interval's worth of batches.
- ``auto_repair``: a normal run, then the newest snapshot zip of every store overwritten with garbage, then a
  restart with ``autoSnapshotRepair.enabled``: Spark skips the corrupt snapshots (``rocksdbNumSnapshotsAutoRepaired``);
  ``truth.json`` names the corrupted files.
- ``repartition``: 4 state partitions, repartitioned offline to 8 (Spark 4.2+), restarted; ``truth.json``
  says after which batch; ``checkpoint_logs/`` keeps the checkpoint's metadata, offset and commit logs as the
  restarted run left them.
- ``checksum_mismatch``: format v2 (Spark writes a checksum file beside each state file), no snapshot uploaded
  (as ``never_uploaded``), then the checksum Spark keeps for the newest changelog of every store altered between
  the runs (a flipped byte in the changelog itself fails lz4's own block check first: ``Stream is corrupted``
  under ``CANNOT_LOAD_STATE_STORE.UNCATEGORIZED``); the restart fails with Spark's checksum error
  (``run2/run.json``), ``truth.json`` names the altered checksum files.
- ``format_v2``: ``checkpointFormatVersion=2`` (``<version>_<uniqueId>.zip/.changelog``, the commit log naming
  each store's unique ids), restarted once.

Besides each run's progress, event log and signals, the checkpoint as the first run left it is copied into
``checkpoint/`` where the tests list it (Hadoop's ``.crc`` files left out), and ``truth.json`` is written from that listing: per
operator and partition the newest snapshot version and the last version, i.e. what the tests check the
observer's snapshot health against.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "..", "tests", "fixtures", "snapshot_health")
PARTITIONS = 8
NEVER = [
    "--conf",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot=1000000",
    "--conf",
    "spark.sql.streaming.stateStore.forceSnapshotUploadOnLag=false",
]
V2 = ["--conf", "spark.sql.streaming.stateStore.checkpointFormatVersion=2"]
REPAIR = ["--conf", "spark.sql.streaming.stateStore.autoSnapshotRepair.enabled=true"]
SCENARIOS: dict[str, list[list[str]]] = {
    "never_uploaded": [["--batches", "40", *NEVER], ["--batches", "3", *NEVER]],
    "normal": [["--batches", "40"]],
    # the newest snapshot of every store corrupted between the runs: the restart skips it (auto-repair, 4.2+)
    "auto_repair": [["--batches", "20"], ["--batches", "3", *REPAIR]],
    # checkpoint format v2 (uuid-suffixed state files, unique ids in the commit log), restarted
    "format_v2": [["--batches", "15", *V2], ["--batches", "3", *V2]],
    # 4 state partitions, repartitioned offline to 8 (4.2+ StreamingCheckpointManager), restarted
    "repartition": [["--batches", "6", "--partitions", "4"], ["--batches", "3", "--partitions", "8"]],
    # file checksums (written with format v2): the checksum of the newest changelog of every store altered between
    # the runs; the restart fails, Spark says why
    "checksum_mismatch": [["--batches", "8", *NEVER, *V2], ["--batches", "3", "--expect-failure", *NEVER, *V2]],
}
REPARTITION_BEFORE_RUN = {"repartition": (2, 8)}  # before run 2: to 8 partitions
_REPARTITION = """
import sys
sys.path.insert(0, sys.argv[3])
from spark_state_observer.cli.demo import spark_session
spark = spark_session()
# the first run was stopped mid-batch (its last batch planned, not committed): the noop sink may skip it
spark._streamingCheckpointManager.repartition(sys.argv[1], int(sys.argv[2]), enforce_exactly_once_sink=False)
spark.stop()
"""
CORRUPT_BEFORE_RUN = {"auto_repair": 2}
ALTER_BEFORE_RUN = {"checksum_mismatch": 2}
LISTED = {"never_uploaded", "normal", "format_v2"}  # scenarios whose checkpoint the tests list
# scenarios whose checkpoint logs (metadata, offsets, commits) are kept as the last run left them: what an observer
# of the last application reads, e.g. the partition count of the batches before it (``checkpoint_logs/``)
LOGS_KEPT = {"repartition"}
_STATE_FILE = re.compile(r"^([0-9]+)(?:_[0-9a-f-]{36})?\.(zip|changelog)$")


def truth(checkpoint: str) -> dict:
    """Per operator and partition: newest uploaded snapshot (None if never) and last version, from the listing."""
    out: dict = {"operators": {}}
    state = os.path.join(checkpoint, "state")
    for op in sorted(os.listdir(state), key=int):
        parts = {}
        for part in sorted((p for p in os.listdir(os.path.join(state, op)) if p.isdigit()), key=int):
            names = os.listdir(os.path.join(state, op, part))
            files = [(int(m[1]), m[2]) for m in map(_STATE_FILE.match, names) if m]
            zips = [v for v, k in files if k == "zip"]
            parts[part] = {
                "newest_snapshot": max(zips) if zips else None,
                "last_version": max(v for v, _ in files),
                "changelogs": sum(1 for _, k in files if k == "changelog"),
            }
        out["operators"][op] = parts
    commits = [int(n) for n in os.listdir(os.path.join(checkpoint, "commits")) if n.isdigit()]
    out["last_committed_batch"] = max(commits)
    return out


def corrupt_newest_snapshots(checkpoint: str) -> list[str]:
    """Overwrite the newest ``.zip`` of every store with bytes no zip reader accepts; the files' paths."""
    done = []
    state = os.path.join(checkpoint, "state")
    for op in sorted(os.listdir(state), key=int):
        for part in sorted((p for p in os.listdir(os.path.join(state, op)) if p.isdigit()), key=int):
            folder = os.path.join(state, op, part)
            zips = sorted((m for m in map(_STATE_FILE.match, os.listdir(folder)) if m and m[2] == "zip"), key=lambda m: int(m[1]))
            if zips:
                with open(os.path.join(folder, zips[-1][0]), "wb") as f:
                    f.write(b"corrupted on purpose by record_snapshot_health.py\n" * 4)
                done.append(f"state/{op}/{part}/{zips[-1][0]}")
    return done


def alter_newest_checksums(checkpoint: str) -> list[str]:
    """Change the value Spark's checksum file (``<name>.crc``, JSON) holds for the newest ``.changelog`` of every
    store, the changelog itself untouched: its content still decodes (a flipped byte inside it fails lz4's own
    block check first, ``Stream is corrupted``, before Spark compares checksums); the checksum files' paths."""
    done = []
    state = os.path.join(checkpoint, "state")
    for op in sorted(os.listdir(state), key=int):
        for part in sorted((p for p in os.listdir(os.path.join(state, op)) if p.isdigit()), key=int):
            folder = os.path.join(state, op, part)
            logs = sorted((m for m in map(_STATE_FILE.match, os.listdir(folder)) if m and m[2] == "changelog"), key=lambda m: int(m[1]))
            checksum = os.path.join(folder, f"{logs[-1][0]}.crc") if logs else ""
            if not checksum or not os.path.exists(checksum):
                continue
            with open(checksum) as f:
                facts = json.load(f)
            facts["value"] = (int(facts["value"]) + 1) % (1 << 32)
            with open(checksum, "w") as f:
                json.dump(facts, f, separators=(",", ":"))
            hadoop_crc = os.path.join(folder, f".{logs[-1][0]}.crc.crc")
            if os.path.exists(hadoop_crc):
                os.remove(hadoop_crc)
            done.append(f"state/{op}/{part}/{logs[-1][0]}.crc")
    return done


def record(scenario: str, runs: list[list[str]]) -> None:
    target = os.path.join(TARGET, scenario)
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = os.path.join(tmp, "checkpoint")
        for n, extra in enumerate(runs, start=1):
            if CORRUPT_BEFORE_RUN.get(scenario) == n:
                corrupted = corrupt_newest_snapshots(checkpoint)
                with open(os.path.join(target, "truth.json")) as f:
                    facts = json.load(f)
                with open(os.path.join(target, "truth.json"), "w") as f:
                    json.dump({**facts, "corrupted": corrupted}, f, indent=1)
            if ALTER_BEFORE_RUN.get(scenario) == n:
                altered = alter_newest_checksums(checkpoint)
                with open(os.path.join(target, "truth.json")) as f:
                    facts = json.load(f)
                with open(os.path.join(target, "truth.json"), "w") as f:
                    json.dump({**facts, "altered": altered}, f, indent=1)
            if REPARTITION_BEFORE_RUN.get(scenario, (0, 0))[0] == n:
                partitions = REPARTITION_BEFORE_RUN[scenario][1]
                before = truth(checkpoint)["last_committed_batch"]
                subprocess.run([sys.executable, "-c", _REPARTITION, checkpoint, str(partitions), os.path.join(HERE, "..")], check=True)
                with open(os.path.join(target, "truth.json")) as f:
                    facts = json.load(f)
                with open(os.path.join(target, "truth.json"), "w") as f:
                    json.dump({**facts, "repartitioned_to": partitions, "repartition_after_batch": before}, f, indent=1)
            out = os.path.join(target, f"run{n}")
            cmd = [sys.executable, os.path.join(HERE, "scenario_job.py"), "--checkpoint", checkpoint, "--out", out, "--event-log"]
            cmd += ["--partitions", str(PARTITIONS), "--name", f"snapshots_{scenario}", *extra]
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
            if n == 1:
                if scenario in LISTED:
                    shutil.copytree(checkpoint, os.path.join(target, "checkpoint"), ignore=shutil.ignore_patterns(".*.crc"))
                with open(os.path.join(target, "truth.json"), "w") as f:
                    json.dump({"scenario": scenario, "partitions": PARTITIONS, **truth(checkpoint)}, f, indent=1)
        if scenario in LOGS_KEPT:
            for part in ("metadata", "offsets", "commits"):
                source, kept = os.path.join(checkpoint, part), os.path.join(target, "checkpoint_logs", part)
                if os.path.isdir(source):
                    shutil.copytree(source, kept, ignore=shutil.ignore_patterns(".*.crc"))
                else:
                    os.makedirs(os.path.dirname(kept), exist_ok=True)
                    shutil.copyfile(source, kept)
        for root, _dirs, files in os.walk(target):
            for name in files:
                if "appstatus" in name:
                    os.remove(os.path.join(root, name))


def main() -> int:
    for scenario in sys.argv[1:] or list(SCENARIOS):
        record(scenario, SCENARIOS[scenario])
    return 0


if __name__ == "__main__":
    sys.exit(main())
