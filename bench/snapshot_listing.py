"""What the snapshot-health listing and the checksum verification cost, at many state partitions.

    python bench/snapshot_listing.py [--partitions 200] [--operators 2] [--versions 100]

A checkpoint laid out as RocksDB with changelog checkpointing leaves it (``--operators`` x ``--partitions``
store folders, each with ``--versions`` changelog files, a snapshot zip every 10 versions, an ``SSTs/``
folder), written to a temporary folder as empty files, is listed by ``spark_state_observer.model.checkpoint_listing``
as the live observer does every ``snapshot_scan_seconds`` on its worker: wall time per listing (median and
min-max of ``--repeats``). Then the pure-Python CRC32C that ``inspect --verify-checksums`` runs: MB/s over
a 4 MB buffer.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def build(root: str, operators: int, partitions: int, versions: int) -> int:
    files = 0
    for op in range(operators):
        for part in range(partitions):
            folder = os.path.join(root, "state", str(op), str(part))
            os.makedirs(os.path.join(folder, "SSTs"))
            for v in range(1, versions + 1):
                names = [f"{v}.changelog"] + ([f"{v}.zip"] if v % 10 == 0 else [])
                for name in names:
                    open(os.path.join(folder, name), "wb").close()
                    files += 1
    return files


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--operators", type=int, default=2)
    ap.add_argument("--versions", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()

    from spark_state_observer.model.checkpoint_listing import list_snapshots
    from spark_state_observer.offline.checkpoint.checksums import crc32c

    with tempfile.TemporaryDirectory() as tmp:
        files = build(tmp, args.operators, args.partitions, args.versions)
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            listing, problems = list_snapshots(tmp)
            times.append(time.perf_counter() - started)
        assert len(listing) == args.operators * args.partitions and not problems
    print(
        f"listing {args.operators} x {args.partitions} store folders, {files} state files: "
        f"median {statistics.median(times) * 1000:.1f} ms (min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f})"
    )
    data = os.urandom(4 << 20)
    started = time.perf_counter()
    crc32c(data)
    seconds = time.perf_counter() - started
    print(f"CRC32C (pure Python): {len(data) / seconds / 1e6:.1f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
