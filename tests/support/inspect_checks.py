"""Check the checkpoint inspector against the files on disk, counted independently."""

from __future__ import annotations

import os
import re

from spark_state_observer.offline.checkpoint import inspect_checkpoint

_FILE = re.compile(r"^\d+(_[0-9a-f-]{36})?\.(delta|snapshot|zip|changelog)$")


def assert_inspector_matches_files(checkpoint: str, last_batch: int) -> None:
    report = inspect_checkpoint(checkpoint)
    assert report.last_committed_batch == last_batch
    commits = sorted(int(n) for n in os.listdir(os.path.join(checkpoint, "commits")) if n.isdigit())
    assert report.last_committed_batch == commits[-1]
    on_disk: dict[tuple[int, int, str], int] = {}
    for root, _dirs, files in os.walk(os.path.join(checkpoint, "state")):
        rel = os.path.relpath(root, os.path.join(checkpoint, "state")).split(os.sep)
        if len(rel) >= 2 and rel[0].isdigit() and rel[1].isdigit():
            store = rel[2] if len(rel) > 2 else "default"
            n = sum(1 for f in files if _FILE.match(f))
            if n:
                on_disk[(int(rel[0]), int(rel[1]), store)] = n
    seen = {(op.operator_id, p.partition, p.store): len(p.files) for op in report.operators for p in op.partitions if p.files}
    assert seen == on_disk
    for op in report.operators:
        for p in op.partitions:
            assert p.restore is not None and p.restore.target_version == last_batch + 1
            assert p.restore.missing_files == 0
    assert report.estimate is not None and report.estimate.stores == len(on_disk)
