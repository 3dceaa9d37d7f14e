"""A large history for the state browser, generated from real recorded events (never typed by hand).

Templates are the recorded events of ``tests/fixtures``: a progress event of the RocksDB restart run
(two state operators, a dedupe and an aggregation), its started and clean terminated events, and the
terminated event of the recorded failed restart (a real Spark exception). From them the script writes a
zstd event log of two queries, varying ids, batch ids, times and figures, then replays it into a
history with ``observer.replay.replay`` (so the signals are the observer's own):

- ``synthetic_dedupe``: ``--batches`` batches (default 100,000), one every 10 s, 200 shuffle partitions
  (Spark reports SnapshotLastUploaded for the 5 most lagging store instances, so the instances vary);
  run 1 evicts as much as it adds, then a restart with a restore, and in run 2 the dedupe's state grows
  by about 400 rows/s with no evictions (the observer's state_unbounded).
- ``synthetic_crash_loop``: a few batches, then five runs that fail at start with the recorded
  exception, 30 s apart (the observer's crash_loop).

    python scripts/synthetic_history.py OUT.db [--batches 100000] [--keep-log DIR]
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import glob
import json
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from typing import Any, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from spark_state_observer.offline.eventlog import read_records  # noqa: E402

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
PARTITIONS = 200
REPORTED_INSTANCES = 5  # spark.sql.streaming.stateStore.numStateStoreInstanceMetricsToReport's default
INTERVAL = 10.0
START = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc).timestamp()
NAMESPACE = uuid.UUID("6f1c1d3e-8a43-4d8e-9a57-0b7f3c3f0a11")


def _records(pattern: str) -> list[Any]:
    return [r for r in read_records(sorted(glob.glob(os.path.join(FIXTURES, pattern)))) if hasattr(r, "kind")]


def templates() -> dict[str, dict]:
    """The recorded events the synthetic ones are made from."""
    restart = _records("rocksdb_restart/run2/eventlog")
    failed = _records("schema_failure/run2/eventlog")
    first = _records("rocksdb_restart/run1/eventlog")
    return {
        "started": next(r.payload for r in restart if r.kind == "started"),
        "progress": [r.payload for r in restart if r.kind == "progress"][-1],
        "clean": next(r.payload for r in first if r.kind == "terminated"),
        "failed": next(r.payload for r in failed if r.kind == "terminated" and r.payload.get("exception")),
    }


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ts * 1000) % 1000:03d}Z"


def _uid(*parts: object) -> str:
    return str(uuid.uuid5(NAMESPACE, "/".join(map(str, parts))))


def started(t: dict, query_id: str, run_id: str, name: str, ts: float) -> dict:
    e = copy.deepcopy(t["started"])
    e.update(id=query_id, runId=run_id, name=name, timestamp=iso(ts))
    return e


def terminated(t: dict, query_id: str, run_id: str, failed: bool) -> dict:
    e = copy.deepcopy(t["failed" if failed else "clean"])
    e.update(id=query_id, runId=run_id)
    return e


class Progress:
    """Progress events made from the recorded one: the same fields, new ids, times and figures."""

    def __init__(self, template: dict, query_id: str, name: str, rng: random.Random) -> None:
        self.p = copy.deepcopy(template)
        self.p.update(id=query_id, name=name)
        self.rng = rng
        for op in self.p["stateOperators"]:
            op["numShufflePartitions"] = PARTITIONS
            op["numStateStoreInstances"] = PARTITIONS
            for key in [k for k in op["customMetrics"] if k.startswith("SnapshotLastUploaded")]:
                del op["customMetrics"][key]
        self.rows = {op["operatorName"]: float(op["numRowsTotal"]) for op in self.p["stateOperators"]}

    def event(self, run_id: str, batch_id: int, ts: float, grow: bool, restore: bool) -> dict:
        p, rng = self.p, self.rng
        rows_in = int(rng.gauss(4000, 300))
        duration = max(200, int(rng.gauss(1500, 250))) + (6000 if restore else 0)
        phases = {"latestOffset": 1, "getBatch": 2, "queryPlanning": max(5, int(duration * 0.05)), "walCommit": 40, "commitOffsets": 35}
        phases["addBatch"] = duration - sum(phases.values())
        phases["triggerExecution"] = duration
        p.update(
            runId=run_id,
            batchId=batch_id,
            timestamp=iso(ts),
            batchDuration=duration,
            durationMs=phases,
            numInputRows=rows_in,
            inputRowsPerSecond=round(rows_in / INTERVAL, 1),
            processedRowsPerSecond=round(rows_in / (duration / 1000.0), 1),
        )
        p["eventTime"] = {"avg": iso(ts - 5), "max": iso(ts - 0.02), "min": iso(ts - 10), "watermark": iso(ts - 20)}
        for source in p.get("sources", []):
            source.update(
                numInputRows=rows_in, inputRowsPerSecond=p["inputRowsPerSecond"], processedRowsPerSecond=p["processedRowsPerSecond"]
            )
        for op in p["stateOperators"]:
            name = op["operatorName"]
            added = rows_in if name == "dedupe" else int(rows_in * 0.05)
            removed = 0 if (grow and name == "dedupe") else max(0, int(added * rng.uniform(0.97, 1.03)))
            self.rows[name] = max(0.0, self.rows[name] + added - removed)
            op.update(
                numRowsTotal=int(self.rows[name]),
                numRowsUpdated=added,
                numRowsRemoved=removed,
                memoryUsedBytes=int(self.rows[name] * 96 + 4096),
            )
            custom = op["customMetrics"]
            for key in [k for k in custom if k.startswith("SnapshotLastUploaded")]:
                del custom[key]
            for k in range(REPORTED_INSTANCES):  # the most lagging instances vary from batch to batch
                partition = (batch_id * 7 + k * 41) % PARTITIONS
                custom[f"SnapshotLastUploaded.partition_{partition}_default"] = max(-1, batch_id - 10 - (partition % 13))
            if "rocksdbLoadLatencyMs" in custom:
                custom["rocksdbLoadLatencyMs"] = (4200 + rng.randint(0, 900)) if restore else rng.randint(0, 3)
            if "rocksdbNumLoadedFromDfs" in custom:
                custom["rocksdbNumLoadedFromDfs"] = PARTITIONS if restore else 0
        return p


def events(batches: int, seed: int = 7) -> Iterator[dict]:
    """Every event of the two queries, in time order."""
    t = templates()
    rng = random.Random(seed)
    big, loop = _uid("synthetic_dedupe"), _uid("synthetic_crash_loop")
    gen = Progress(t["progress"], big, "synthetic_dedupe", rng)
    split = int(batches * 0.6)
    ts = START
    run = _uid(big, 1)
    yield started(t, big, run, "synthetic_dedupe", ts - 5)
    for b in range(batches):
        if b == split:  # a clean stop, a minute down, a restart that restores 200 stores per operator
            yield terminated(t, big, run, failed=False)
            ts += 60
            run = _uid(big, 2)
            yield started(t, big, run, "synthetic_dedupe", ts - 5)
        yield {
            "Event": "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent",
            "progress": gen.event(run, b, ts, grow=b >= split, restore=b == split),
        }
        ts += INTERVAL
    yield terminated(t, big, run, failed=False)
    small = Progress(t["progress"], loop, "synthetic_crash_loop", rng)
    ts += 120
    run = _uid(loop, 1)
    yield started(t, loop, run, "synthetic_crash_loop", ts - 5)
    for b in range(20):
        yield {
            "Event": "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent",
            "progress": small.event(run, b, ts, grow=False, restore=False),
        }
        ts += INTERVAL
    yield terminated(t, loop, run, failed=True)
    for attempt in range(2, 7):  # five restarts, each failing before its first batch
        ts += 30
        run = _uid(loop, attempt)
        yield started(t, loop, run, "synthetic_crash_loop", ts)
        yield terminated(t, loop, run, failed=True)


def write_log(folder: str, batches: int) -> str:
    import zstandard

    log_dir = os.path.join(folder, "eventlog_v2_synthetic-1")
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, "events_1_synthetic-1.zstd")
    with open(path, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as out:
        for event in events(batches):
            out.write(json.dumps(event, separators=(",", ":")).encode() + b"\n")
    return log_dir


def build(db: str, batches: int, keep_log: str | None = None, fresh: bool = True) -> None:
    """Write the synthetic log and replay it into ``db``; ``fresh=False`` adds to a history already there."""
    from spark_state_observer.offline.replay import replay
    from spark_state_observer.settings import Settings

    folder = keep_log or tempfile.mkdtemp(prefix="sso-synthetic-")
    try:
        log_dir = write_log(folder, batches)
        for path in (db, db + "-wal", db + "-shm") if fresh else ():
            if os.path.exists(path):
                os.remove(path)
        keep = Settings.from_env(history_max_age_seconds=10 * 365 * 86400.0, history_max_bytes=float(1 << 40))
        result = replay([log_dir], settings=keep, history=db)  # keep every batch, however old
        if result.errors:
            raise SystemExit("replay problems: " + "; ".join(result.errors[:3]))
    finally:
        if keep_log is None:
            shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("--batches", type=int, default=100_000)
    parser.add_argument("--keep-log", default=None, help="write the event log into this folder and keep it")
    args = parser.parse_args()
    started_at = time.perf_counter()
    build(args.db, args.batches, args.keep_log)
    print(f"{args.db}: {args.batches:,} batches, {os.path.getsize(args.db) / 1e6:,.0f} MB in {time.perf_counter() - started_at:.0f} s")


if __name__ == "__main__":
    main()
