"""Checkpoint format v2 and Spark's checksum files in the inspector (issue 30), on a recorded real run.

``tests/fixtures/snapshot_health/format_v2`` (``scripts/record_snapshot_health.py``, PySpark 4.3,
``checkpointFormatVersion=2``, 8 partitions): state files ``<version>_<uniqueId>.changelog/.zip`` with Spark's
``.crc`` checksum files beside them, a commit log naming each store's unique id, and a restart whose first
batch reports how many changelog files the dedup operator replayed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil

from conftest import FIXTURES, progress_lines
from spark_state_observer.cli.main import main
from spark_state_observer.model.checkpoint_listing import list_snapshots
from spark_state_observer.offline.checkpoint import inspect_checkpoint, verify_checksums
from spark_state_observer.offline.checkpoint.changelog_lineage import changelog_lineage

V2 = os.path.join(FIXTURES, "snapshot_health", "format_v2")
CHECKPOINT = os.path.join(V2, "checkpoint")
_V2_FILE = re.compile(r"^[0-9]+_[0-9a-f-]{36}\.(changelog|zip)$")


def _state_files(root: str) -> list[str]:
    return [os.path.join(d, n) for d, _, names in os.walk(os.path.join(root, "state")) for n in names]


def test_the_inspector_reads_a_v2_checkpoint_and_says_its_format() -> None:
    report = inspect_checkpoint(CHECKPOINT)
    assert report.checkpoint_format_version == 2 and not report.problems
    assert inspect_checkpoint(os.path.join(FIXTURES, "snapshot_health", "normal", "checkpoint")).checkpoint_format_version == 1
    # every state file is a v2 one and every partition of both operators has its restore worked out
    state = [os.path.basename(f) for f in _state_files(CHECKPOINT) if f.endswith((".changelog", ".zip"))]
    assert state and all(_V2_FILE.match(n) for n in state)
    assert sorted(len(op.partitions) for op in report.operators) == [8, 8]
    assert all(p.restore is not None and p.restore.missing_files == 0 for op in report.operators for p in op.partitions)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["inspect", CHECKPOINT, "--json"]) == 0
    assert json.loads(out.getvalue())["checkpoint_format_version"] == 2


def test_the_restore_of_a_v2_checkpoint_is_what_spark_replayed_at_the_restart() -> None:
    """The dedup operator reports its changelog replay on restart (the aggregation loads twice and reads 0)."""
    first = progress_lines(os.path.join(V2, "run2"))[0]
    dedupe = next(i for i, op in enumerate(first["stateOperators"]) if op["operatorName"] == "dedupe")
    replayed = first["stateOperators"][dedupe]["customMetrics"]["rocksdbNumReplayChangelogFiles"]
    report = inspect_checkpoint(CHECKPOINT)
    (op,) = [o for o in report.operators if o.operator_id == dedupe]
    assert replayed > 0 and sum(p.restore.replay_files for p in op.partitions if p.restore) == replayed
    listing, problems = list_snapshots(CHECKPOINT)
    assert not problems and sum(s.replay_files for (o, _, _), s in listing.items() if o == dedupe) == replayed


def test_an_orphan_of_a_retried_batch_is_not_what_a_restore_loads(tmp_path) -> None:
    """A second unique id for the last version (a retried batch leaves one): the commit log names the one that counts."""
    root = tmp_path / "ck"
    shutil.copytree(CHECKPOINT, root)
    before = inspect_checkpoint(str(root))
    p = before.operators[0].partitions[0]
    last = max(f for f in p.files if f.kind == "changelog" and f.version == p.latest_version)
    folder = root / "state" / str(before.operators[0].operator_id) / str(p.partition)
    (folder / f"{last.version}_00000000-0000-4000-8000-000000000000.changelog").write_bytes(b"x" * (last.size * 10 + 1000))
    after = inspect_checkpoint(str(root))
    q = after.operators[0].partitions[0]
    assert q.restore is not None and p.restore is not None
    assert (q.restore.replay_files, q.restore.replay_bytes) == (p.restore.replay_files, p.restore.replay_bytes)


def test_checksum_files_are_verified_on_request_and_a_mismatch_is_reported(tmp_path) -> None:
    crcs = [f for f in _state_files(CHECKPOINT) if f.endswith(".crc") and not os.path.basename(f).startswith(".")]
    assert crcs  # Spark 4.3 writes one beside every state file with format v2
    clean = verify_checksums(CHECKPOINT)
    assert clean.checked == len(crcs) and clean.mismatches == [] and clean.unreadable == []
    root = tmp_path / "ck"
    shutil.copytree(CHECKPOINT, root)
    victim = next(f for f in _state_files(str(root)) if f.endswith(".changelog"))
    data = bytearray(open(victim, "rb").read())
    data[len(data) // 2] ^= 0xFF  # one bit pattern changed, the size kept
    with open(victim, "wb") as f:
        f.write(data)
    found = verify_checksums(str(root))
    assert len(found.mismatches) == 1 and found.mismatches[0].startswith(victim) and "CRC32C" in found.mismatches[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["inspect", str(root), "--verify-checksums", "--json"]) == 1
    assert json.loads(out.getvalue())["checksums"]["mismatches"] == found.mismatches


def test_checksum_files_are_never_state_bytes() -> None:
    report = inspect_checkpoint(CHECKPOINT)
    state_bytes = sum(f.size for op in report.operators for p in op.partitions for f in p.files)
    on_disk = sum(os.path.getsize(f) for f in _state_files(CHECKPOINT) if _V2_FILE.match(os.path.basename(f)))
    assert state_bytes == on_disk
    assert sum(fp.snapshot_bytes + fp.replay_bytes for fp in report.footprint) == on_disk


def test_every_v2_changelog_names_the_files_it_builds_on() -> None:
    """The lineage a changelog starts with: the versions since the snapshot it builds on, each by a file that exists,
    and the same unique ids as the commit log names."""
    seen = 0
    for path in _state_files(CHECKPOINT):
        name = os.path.basename(path)
        if not name.endswith(".changelog"):
            continue
        version = int(name.split("_", 1)[0])
        lineage = changelog_lineage(path)
        folder = os.listdir(os.path.dirname(path))
        assert all(v < version for v in lineage)
        assert all(any(n.startswith(f"{v}_{uid}.") for n in folder) for v, uid in lineage.items())
        seen += bool(lineage)
    assert seen
    assert not inspect_checkpoint(CHECKPOINT).problems  # commit log and changelog headers agree


def _orphans_below_the_last_version(root: str) -> tuple[int, int]:
    """A larger orphan (another unique id) beside every changelog of partition 0's stores below the last version,
    and only the newest commit kept: the commit log then names the last version's file alone. (orphans, their bytes)"""
    report = inspect_checkpoint(root)
    count = size = 0
    for op in report.operators:
        p = op.partitions[0]
        folder = os.path.join(root, "state", str(op.operator_id), str(p.partition))
        for f in p.files:
            if f.kind == "changelog" and f.version < p.latest_version:
                with open(os.path.join(folder, f"{f.version}_00000000-0000-4000-8000-{f.version:012d}.changelog"), "wb") as out:
                    out.write(b"x" * (f.size * 10 + 1000))
                count, size = count + 1, size + f.size * 10 + 1000
    commits = sorted(int(n) for n in os.listdir(os.path.join(root, "commits")) if n.isdigit())
    for batch in commits[:-1]:
        os.remove(os.path.join(root, "commits", str(batch)))
    return count, size


def test_where_the_commit_log_is_silent_the_changelog_lineage_picks_the_files_a_restore_loads(tmp_path) -> None:
    root = str(tmp_path / "ck")
    shutil.copytree(CHECKPOINT, root)
    before = inspect_checkpoint(root)
    orphans, _ = _orphans_below_the_last_version(root)
    after = inspect_checkpoint(root)
    assert orphans and not after.problems
    for op_before, op_after in zip(before.operators, after.operators):
        p, q = op_before.partitions[0], op_after.partitions[0]
        assert p.restore is not None and q.restore is not None
        assert (q.restore.snapshot_version, q.restore.replay_files, q.restore.replay_bytes) == (
            p.restore.snapshot_version,
            p.restore.replay_files,
            p.restore.replay_bytes,
        )


def test_a_commit_log_that_names_another_file_than_the_changelog_lineage_is_reported(tmp_path) -> None:
    root = tmp_path / "ck"
    shutil.copytree(CHECKPOINT, root)
    report = inspect_checkpoint(str(root))
    op = report.operators[0]
    p = op.partitions[0]
    base = max(f.version for f in p.files if f.kind == "changelog" and f.version < p.latest_version)
    named = next(f.unique_id for f in p.files if f.kind == "changelog" and f.version == base)
    assert named is not None
    commit = root / "commits" / str(base - 1)  # batch b wrote version b + 1
    commit.write_text(commit.read_text().replace(named, "00000000-0000-4000-8000-000000000000"))
    problems = inspect_checkpoint(str(root)).problems
    assert any(f"builds on other files than the commit log names for version(s) {base}" in line for line in problems)
