"""Record the growth corpus: every stateful operator, bounded and unbounded, from real Spark runs.

    python scripts/record_growth.py                   # every recording below
    python scripts/record_growth.py growth_tws_ttl    # some of them
    python scripts/record_growth.py --list

Each recording is one run of ``scripts/scenario_job.py --query NAME`` (a pipeline of
``scripts/growth_queries.py``) for ``--duration`` seconds, kept under ``tests/fixtures/incidents/<name>/``
as the incident corpus is (``scripts/record_incidents.py``), so ``bench/precision.py`` judges it with the
rest. Only the progress lines are kept (zstd): the growth verdict reads nothing else, and the event logs
of twenty runs would weigh megabytes. ``truth.json`` is written here from the pipeline's construction
(``growth_queries.SHAPES``: bounded or not) and the operators the run itself reported: bounded runs are
clean (no incident may fire), unbounded ones list each operator whose state grows for ever.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from growth_queries import SHAPES, Shape  # noqa: E402
from record_incidents import Recorder, record_scenarios, slim_event_log  # noqa: E402

ROWS_PER_SECOND = 50  # session_open needs every one of its 50 keys each second


def growth(query: str, seconds: int, provider: str = "rocksdb", scala: bool = False) -> Callable[[Recorder], dict[str, Any]]:
    """One run of ``query`` for ``seconds``; its truth from ``SHAPES[query]`` (``SCALA_SHAPES``: a Scala query
    of ``scripts/scala_job.py``) and the operators it reported."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        shape = SCALA_SHAPES[query] if scala else SHAPES[query]
        args = [
            "--query",
            query,
            "--duration",
            str(seconds),
            "--rows-per-second",
            str(ROWS_PER_SECOND),
            "--provider",
            provider,
            "--name",
            rec.name,
        ]
        facts = rec.run("--checkpoint", rec.checkpoint, *args, script="scala_job.py") if scala else rec.run(*args)
        run_dir = os.path.join(rec.target, facts["run_dir"])
        progress = os.path.join(run_dir, "progress.jsonl")
        with open(progress) as f:
            lines = [json.loads(line) for line in f]
        operators = sorted({op["operatorName"] for p in lines for op in p.get("stateOperators", [])})
        keep_progress_only(run_dir, keep_event_log=shape.event_log)
        truth: dict[str, Any] = {
            "clean": shape.bounded,
            "query": query,
            "provider": provider,
            "rows_per_second": ROWS_PER_SECOND,
            "duration_seconds": facts["process_ended"] - facts["process_started"],
            "growth": [growth_entry(shape, op, facts["process_started"]) for op in operators],
            "why": shape.why,
            "kept": "progress lines (zstd) and the slimmed event log" if shape.event_log else "progress lines only (zstd)",
        }
        truth["expected_events"] = expected_events(shape)
        return truth

    return scenario


def growth_entry(shape: Shape, operator: str, started: float) -> dict[str, Any]:
    """One operator's line of the truth's ``growth``: bounded or not, and how it grows (``bounded_first``: the verdict
    test expects bounded, then unbounded)."""
    entry: dict[str, Any] = {"operator": operator, "bounded": shape.bounded, "from": started, "grows_in": shape.grows_in}
    if shape.bounded_first:
        entry["bounded_first"] = True
    return entry


def expected_events(shape: Shape) -> list[str]:
    """What the observer must say of a run of ``shape``: the truth's ``expected_events``."""
    if shape.bounded:
        return ["state_bounded on every operator, never state_unbounded"]
    if shape.bounded_first:
        return ["state_bounded while the watermark keeps pace, then state_unbounded once it stops and the rows keep rising"]
    if shape.grows_in == "rows":
        return ["state_unbounded on every operator once the growth window shows it"]
    return ["state_bounded on the rows first (100 keys, flat), then state_unbounded on the size once it has risen for a second window"]


def keep_progress_only(run_dir: str, keep_event_log: bool = False) -> None:
    """Drop the event log (``keep_event_log``: slim it, ``record_incidents.slim_event_log``) and compress the
    progress lines (replay reads ``.zstd`` as Spark's zstd logs)."""
    import shutil

    import zstandard

    if keep_event_log:
        slim_event_log(os.path.join(run_dir, "eventlog"))
    else:
        shutil.rmtree(os.path.join(run_dir, "eventlog"), ignore_errors=True)
    path = os.path.join(run_dir, "progress.jsonl")
    with open(path, "rb") as src, open(path + ".zstd", "wb") as dst:
        dst.write(zstandard.ZstdCompressor(level=19).compress(src.read()))
    os.remove(path)
    os.remove(os.path.join(run_dir, "signals.jsonl"))


# the operators only Spark's Scala API has (``scripts/scala_job.py``: a new key every 10 rows, as ``tws_*`` above)
SCALA_SHAPES = {
    "fmgws_timeout": Shape(True, "flatMapGroupsWithState: each key's state is removed when its 3 s processing-time timeout fires"),
    "fmgws_no_timeout": Shape(False, "flatMapGroupsWithState without a timeout: a new key per 10 rows, kept for ever"),
    "tws_scala_ttl": Shape(True, "Scala transformWithState: a 3 s TTL expires each key's value"),
    "tws_scala_no_ttl": Shape(False, "Scala transformWithState without a TTL: a new key per 10 rows, kept for ever"),
    # 100 keys: the rows stay at 100 while each key's value holds every row it saw (its bytes grow for ever)
    "fmgws_collect_fixed_keys": Shape(
        False, "flatMapGroupsWithState keeping every row of 100 fixed keys in a list: 100 rows, values growing", grows_in="size"
    ),
    "tws_scala_list_fixed_keys": Shape(
        False, "Scala transformWithState appending every row of 100 fixed keys to a ListState: 100 rows, lists growing", grows_in="size"
    ),
}

# an unbounded verdict needs a whole rising window after the first (slow) batches; on a busy machine a run's
# first progress comes a minute or more after its start
SECONDS = {True: 150, False: 240}
# a state whose rows stay flat and whose bytes grow is judged on its bytes, which need longer to tell (three windows)
SECONDS_SCALA = {"fmgws_collect_fixed_keys": 360, "tws_scala_list_fixed_keys": 360}
SCENARIOS: dict[str, Callable[[Recorder], dict[str, Any]]] = {
    **{
        f"growth_{query}": growth(query, SECONDS[shape.bounded] + (20 if "join" in query or "session" in query else 0))
        for query, shape in SHAPES.items()
    },
    "growth_count_fixed_keys_hdfs": growth("count_fixed_keys", 240, provider="hdfs"),
    "growth_count_new_keys_hdfs": growth("count_new_keys", 240, provider="hdfs"),
    "growth_session_open_hdfs": growth("session_open", 170, provider="hdfs"),
    "growth_dedup_new_keys_hdfs": growth("dedup_new_keys", 240, provider="hdfs"),
    **{
        f"growth_{query}": growth(query, SECONDS_SCALA.get(query, SECONDS[shape.bounded]), scala=True)
        for query, shape in SCALA_SHAPES.items()
    },
    "growth_fmgws_collect_fixed_keys_hdfs": growth(
        "fmgws_collect_fixed_keys", SECONDS_SCALA["fmgws_collect_fixed_keys"], provider="hdfs", scala=True
    ),
}


def main() -> int:
    return record_scenarios(SCENARIOS)


if __name__ == "__main__":
    sys.exit(main())
