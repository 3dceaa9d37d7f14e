"""Record the clean hour: one application with several bounded stateful queries, over an hour, under load.

    python scripts/record_clean_hour.py                    # clean_hour_load (66 minutes)
    python scripts/record_clean_hour.py --seconds 120      # a short try, same name

Runs ``scripts/clean_hour_job.py`` once (a new process, ``local[2]``, RocksDB with changelog, 2 s trigger)
while the machine is shared with other jobs, and keeps it under ``tests/fixtures/incidents/clean_hour_load/run1``
as the incident corpus is kept, so ``bench/precision.py`` judges it with the rest. The event log is Spark's
own; when it weighs more than ``LONG_RUN_EVENTLOG_LIMIT`` compressed it is slimmed
(``record_incidents.slim_event_log``: no stage submitted/completed, task start or environment events, no
task ends of stateless stages; every kept line unchanged, recompressed with zstd), and if even that is too
big only the progress lines are kept. ``truth.json`` says what ran (queries, operators, trigger, rate, the
load average each minute) and ``"clean": true``: nothing was done to the queries, so nothing may fire.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from record_growth import keep_progress_only  # noqa: E402
from record_incidents import LONG_RUN_EVENTLOG_LIMIT, SLIMMED_EVENTS, Recorder, dir_size, slim_event_log  # noqa: E402

NAME = "clean_hour_load"


def compress(path: str) -> None:
    """``path`` as ``path.zstd`` (zstd level 19), the original removed."""
    import zstandard

    with open(path, "rb") as src, open(path + ".zstd", "wb") as dst:
        dst.write(zstandard.ZstdCompressor(level=19).compress(src.read()))
    os.remove(path)


def record(seconds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorder(NAME, sys.executable, tmp)
        out = os.path.join(rec.target, "run1")
        cmd = [sys.executable, os.path.join(HERE, "clean_hour_job.py"), "--out", out, "--checkpoints", tmp, "--duration", str(seconds)]
        cmd += ["--name", NAME]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=os.path.join(HERE, "..")))
        with open(os.path.join(out, "run.json")) as f:
            facts = json.load(f)
        facts["run_dir"] = "run1"
        rec.runs.append(facts)
        eventlog = os.path.join(out, "eventlog")
        full = dir_size(eventlog)
        kept = "Spark's event log as written (zstd) and the progress lines"
        if full > LONG_RUN_EVENTLOG_LIMIT:
            slim_event_log(eventlog)
            kept = f"the event log without {', '.join(sorted(SLIMMED_EVENTS))} and stateless task ends (zstd 19)"
        if dir_size(eventlog) > LONG_RUN_EVENTLOG_LIMIT:
            keep_progress_only(out)
            kept = "progress lines only (zstd): even the slimmed event log was too big"
        else:
            compress(os.path.join(out, "progress.jsonl"))  # the same lines as the log's progress events, for reading by eye
        loads = [m["load1"] for m in facts["load_average_per_minute"]]
        rec.finish(
            {
                "recorded_by": "scripts/record_clean_hour.py",
                "clean": True,
                "duration_seconds": facts["process_ended"] - facts["process_started"],
                "master": "local[2]",
                "provider": "rocksdb",
                "changelog": True,
                "trigger_seconds": facts["trigger_seconds"],
                "rows_per_second": facts["rows_per_second"],
                "partitions": facts["partitions"],
                "queries": [{"name": q["query_name"], "operators": q["operators"]} for q in facts["queries"]],
                "load_average": {"min": min(loads), "median": sorted(loads)[len(loads) // 2], "max": max(loads), "cores": os.cpu_count()},
                "eventlog_bytes_as_written": full,
                "kept": kept,
                "expected_events": [],
                "note": "nothing done to any query (no restart, no executor change, no stall, no burst): nothing may fire",
            }
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=66 * 60)
    args = ap.parse_args()
    record(args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
