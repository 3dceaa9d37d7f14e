"""Record the capacity fixtures: RocksDB memory Spark reports on a local cluster, against the estimate.

    python scripts/record_capacity.py [SCENARIO ...]     # writes tests/fixtures/capacity/<scenario>/

Each scenario runs ``executor_loss_job.run`` without a kill (the demo's dedup + window query: two stateful
operators, RocksDB with changelog checkpointing) on ``local-cluster[E,1,1024]`` with P shuffle partitions, in
a fresh process, and keeps its event log (the Spark configuration in ``SparkListenerEnvironmentUpdate``, the
progress, the per-task state metrics placement reads) and ``progress.jsonl``. Scenarios: ``e2_p4`` ... ``e3_p16``
(2 and 3 executors, 4, 8 and 16 partitions) and ``bounded_e2_p8`` (``boundedMemoryUsage=true``, where Spark
reports each instance's memory as the shared total divided by the instances, SPARK-53002). The estimate
against the measure is in docs/capacity.md (``python scripts/record_capacity.py --table`` prints it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "capacity")
BOUNDED = "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage=true"
SCENARIOS: dict[str, list[str]] = {
    **{f"e{e}_p{p}": ["--executors", str(e), "--shuffle-partitions", str(p)] for e in (2, 3) for p in (4, 8, 16)},
    "bounded_e2_p8": ["--executors", "2", "--shuffle-partitions", "8", "--conf", BOUNDED],
}
COMMON = ["--no-kill", "--rows-per-second", "200", "--batches-before", "4", "--batches-after", "0", "--locality-wait", "10s"]


def child(name: str, out: str) -> None:
    import executor_loss_job

    executor_loss_job.run(executor_loss_job.parser().parse_args(["--out", out, *COMMON, *SCENARIOS[name], "--name", f"capacity_{name}"]))


def record(name: str) -> None:
    target = os.path.join(FIXTURES, name)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, name)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--out", out]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": os.path.join(HERE, "..")})
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(target)
        shutil.copy(os.path.join(out, "progress.jsonl"), target)
        shutil.copytree(
            os.path.join(out, "eventlog"), os.path.join(target, "eventlog"), ignore=shutil.ignore_patterns("*.crc", "appstatus*")
        )


def table() -> str:
    """Estimate against measure per recorded run and executor (Markdown): each fixture replayed, its capacity series read."""
    from spark_state_observer.metrics import catalog
    from spark_state_observer.offline.replay import replay

    columns = (
        catalog.EXECUTOR_STORE_INSTANCES,
        catalog.EXECUTOR_ROCKSDB_MEMORY_REPORTED,
        catalog.EXECUTOR_ROCKSDB_MEMORY_ESTIMATE,
        catalog.EXECUTOR_ROCKSDB_MEMORY_CEILING,
        catalog.EXECUTOR_ROCKSDB_SST,
    )
    lines = [
        "| run | executor | instances | Spark's report | estimate (expected) | estimate / report | ceiling | SST |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in SCENARIOS:
        path = os.path.join(FIXTURES, name, "eventlog")
        if not os.path.isdir(path):
            continue
        values: dict[tuple[str, str], float] = {}
        for spec, labels, value in replay([path]).observer.tracker.app_values():
            if spec in columns:
                values[(spec.name, dict(labels)["executor"])] = value
        for ex in sorted({e for _, e in values}, key=lambda e: (e == "total", e)):
            n, rep, est, top, sst = (values.get((spec.name, ex)) for spec in columns)
            ratio = f"{est / rep:.2f}" if est and rep else "-"
            lines.append(f"| {name} | {ex} | {n:.0f} | {_kib(rep)} | {_kib(est)} | {ratio} | {_kib(top)} | {_kib(sst)} |")
    return "\n".join(lines)


def _kib(n: float | None) -> str:
    return "-" if n is None else f"{n / 1024:,.0f} KiB"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    ap.add_argument("--child")
    ap.add_argument("--out")
    ap.add_argument("--table", action="store_true", help="print the estimate-against-measure table of the recorded fixtures")
    args = ap.parse_args()
    if args.table:
        print(table())
        return 0
    if args.child:
        child(args.child, args.out)
        return 0
    failed = []
    for name in args.scenarios:
        try:
            record(name)
        except subprocess.CalledProcessError as exc:  # a loaded machine can time a run out: record the others
            print(f"{name}: failed ({exc}); run it again", file=sys.stderr)
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
