"""Whether a change leaves what `replay` prints alone: every recorded event log, in both machine formats.

    PYTHONPATH=/path/to/before python bench/replay_outputs.py dump /tmp/before
    PYTHONPATH=$PWD python bench/replay_outputs.py dump /tmp/after
    python bench/replay_outputs.py compare /tmp/before /tmp/after [--limit 5]

``dump`` replays each recording under tests/fixtures (each scenario's runs together, and each run alone) with
``--format events`` and ``--format prometheus`` of the tree on PYTHONPATH, one file per input and format.
``compare`` reads two dumps. Prometheus: the same samples, as sets (a family may come earlier or later),
leaving out the observer's own processing-time histogram. Events: every event the same and in order,
except the trend verdicts (``state_bounded``, ``state_unbounded``, ``snapshot_lagging``). Those must be the
same verdicts per query, run and operator, each at most ``--limit`` seconds from before; their evidence
may differ, as it is read at the batch judged (``evaluate_seconds``).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import io
import json
import os
import re
import sys
from typing import Any

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TREND = {"state_bounded", "state_unbounded", "snapshot_lagging"}
OWN_TIMING = re.compile(r"^spark_state_observer_processing_duration|^#")


def inputs() -> dict[str, list[str]]:
    """Each recorded event log alone, and each scenario's runs together, by a file-safe name."""
    groups: dict[str, list[str]] = {}
    for folder in sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "**", "eventlog"), recursive=True)):
        paths = sorted(os.path.join(folder, f) for f in os.listdir(folder))
        scenario = folder.rsplit("/run", 1)[0] if "/run" in folder else folder
        groups.setdefault(scenario, []).extend(paths)
        groups[folder] = paths
    return {os.path.relpath(k, ROOT).replace("/", "__"): v for k, v in groups.items()}


def dump(out: str) -> None:
    from spark_state_observer.cli.main import main

    os.makedirs(out, exist_ok=True)
    for name, paths in inputs().items():
        for fmt in ("events", "prometheus"):
            buf = io.StringIO()
            try:
                with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
                    main(["replay", "--format", fmt, *paths])
            except SystemExit:
                pass
            with open(os.path.join(out, f"{name}.{fmt}"), "w") as f:
                f.write(buf.getvalue())


def _key(e: dict[str, Any]) -> tuple[Any, ...]:
    a = e["attributes"]
    return (e["kind"], e["query_id"], e.get("run_id"), a.get("operator_index", a.get("operator_id")))


def compare(before: str, after: str, limit: float) -> int:
    """The number of inputs whose output moved beyond what a cadence may move; each is printed."""
    bad, shifts = 0, []
    for name in sorted(os.listdir(before)):
        with open(os.path.join(before, name)) as f:
            x = f.read().splitlines()
        with open(os.path.join(after, name)) as f:
            y = f.read().splitlines()
        if name.endswith(".prometheus"):
            if sorted(v for v in x if not OWN_TIMING.match(v)) != sorted(v for v in y if not OWN_TIMING.match(v)):
                bad += 1
                print("prometheus differs:", name)
            continue
        if x == y:
            continue
        ex, ey = [json.loads(v) for v in x], [json.loads(v) for v in y]
        if [e for e in ex if e["kind"] not in TREND] != [e for e in ey if e["kind"] not in TREND]:
            bad += 1
            print("events differ:", name)
            continue
        tx = sorted((e for e in ex if e["kind"] in TREND), key=lambda e: (_key(e), e["timestamp"]))
        ty = sorted((e for e in ey if e["kind"] in TREND), key=lambda e: (_key(e), e["timestamp"]))
        if [_key(e) for e in tx] != [_key(e) for e in ty]:
            bad += 1
            print("trend verdicts differ:", name)
            continue
        shift = max((abs(a["timestamp"] - b["timestamp"]) for a, b in zip(tx, ty)), default=0.0)
        shifts.append(shift)
        if shift > limit:
            bad += 1
            print(f"trend verdict {shift:.1f} s away:", name)
    print(f"{len(os.listdir(before))} outputs; {bad} beyond; trend verdict shifts (s): {sorted(round(s, 1) for s in shifts)}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("dump").add_argument("out")
    cmp = sub.add_parser("compare")
    cmp.add_argument("before")
    cmp.add_argument("after")
    cmp.add_argument("--limit", type=float, default=5.0, help="seconds a trend verdict may move")
    args = ap.parse_args()
    if args.command == "dump":
        dump(args.out)
        return 0
    return 1 if compare(args.before, args.after, args.limit) else 0


if __name__ == "__main__":
    sys.exit(main())
