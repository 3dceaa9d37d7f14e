"""Record the restore corpus: every stateful operator kind restarted from its checkpoint in a new process.

    python scripts/record_restores.py                        # every recording below
    python scripts/record_restores.py restore_dedup ...      # some of them
    python scripts/record_restores.py --list

Each recording runs ``scripts/scenario_job.py --query restore_<kind>`` (``scripts/restore_queries.py``)
twice on one checkpoint, in two processes a few seconds apart: the first writes a state of ``keys``
entries (hundreds of thousands: big enough that loading it takes visible time), the second restores it
in its first batch. Both runs keep their event logs (slimmed as ``record_incidents.slim_event_log`` does:
the task ends of the stateful stages are what the restore's task-time figure and its truth are read
from). ``truth.json``, written here: the restart (``record_incidents.restart_facts``) and which operators
restored (every state operator of the second run's first batch, as that run reported it).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from record_incidents import SLIMMED_EVENTS, Recorder, record_scenarios, restart_facts, slim_event_log  # noqa: E402

DOWNTIME_SECONDS = 5


def restore(
    query: str,
    keys: int,
    rows_per_batch: int,
    fanout: int,
    provider: str = "rocksdb",
    batches: tuple[int, int] = (5, 4),
    scala: bool = False,
) -> Callable[[Recorder], dict[str, Any]]:
    """Two runs of ``restore_<query>`` on one checkpoint; the second restores ``keys`` entries per operator
    (``scala``: a query of ``scripts/scala_job.py``, Spark's Scala API, in its ``spark-shell``)."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        common = [
            "--query",
            f"restore_{query}",
            "--keys",
            str(keys),
            "--provider",
            provider,
            "--name",
            rec.name,
            "--batches-timeout",
            "1200",
        ]
        if scala:
            common += ["--checkpoint", rec.checkpoint, "--event-log", "--rows-per-batch", str(rows_per_batch), "--fanout", str(fanout)]
        else:
            common += ["--option", f"rows_per_batch={rows_per_batch}", "--option", f"fanout={fanout}"]
            # a busy machine starts Python workers slowly: Spark's 15 s for one to connect back failed the first tries
            common += ["--conf", "spark.python.authenticate.socketTimeout=120s"]
        script = "scala_job.py" if scala else "scenario_job.py"
        first = rec.run("--batches", str(batches[0]), *common, script=script)
        time.sleep(DOWNTIME_SECONDS)
        second = rec.run("--batches", str(batches[1]), *common, script=script)
        for facts in rec.runs:
            slim_event_log(os.path.join(rec.target, facts["run_dir"], "eventlog"))
        with open(os.path.join(rec.target, second["run_dir"], "progress.jsonl")) as f:
            first_batch = next(p for p in map(json.loads, f) if p["batchId"] == second["first_batch_id"])
        operators = sorted({op["operatorName"] for op in first_batch.get("stateOperators", [])})
        return {
            "recorded_by": "scripts/record_restores.py",
            "clean": False,
            "query": query,
            "provider": provider,
            "changelog": provider == "rocksdb",
            "partitions": 2,
            "keys": keys,
            "rows_per_batch": rows_per_batch * fanout,
            "restarts": [restart_facts(first, second)],
            "restored_operators": operators,
            # the first run writes new keys in every batch (rows per batch x fanout), nothing evicted: rising state
            # is what it shows, and a growth verdict on it is neither false nor the point of the recording
            "filling": [{"operator": op, "run": first["run_dir"], "until": first["process_ended"]} for op in operators],
            "kept": f"progress lines and event logs without {', '.join(sorted(SLIMMED_EVENTS))} and stateless task ends",
            "expected_events": ["query_restarted into run2", f"restore of {', '.join(operators)} in run2's first batch"],
        }

    return scenario


# the first run writes every key in its 5 batches (rows per batch x fanout x 5 >= keys); the join keeps all it read
SCENARIOS: dict[str, Callable[[Recorder], dict[str, Any]]] = {
    "restore_aggregation": restore("aggregation", 1_000_000, 2000, 100),
    "restore_aggregation_hdfs": restore("aggregation", 300_000, 600, 100, provider="hdfs"),
    "restore_dedup": restore("dedup", 1_000_000, 2000, 100),
    "restore_session": restore("session", 300_000, 600, 100),
    "restore_join": restore("join", 0, 500, 100),
    "restore_pandas_state": restore("pandas_state", 50_000, 100, 100),
    "restore_tws": restore("tws", 50_000, 100, 100),
    # the operators only Spark's Scala API has: (flatMap|map)GroupsWithState and Scala's transformWithState
    "restore_fmgws": restore("fmgws", 300_000, 600, 100, scala=True),
    "restore_tws_scala": restore("tws_scala", 300_000, 600, 100, scala=True),
}


def main() -> int:
    return record_scenarios(SCENARIOS, errors=(StopIteration,))


if __name__ == "__main__":
    sys.exit(main())
