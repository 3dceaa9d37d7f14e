"""Browser pages on checkpoints written by real Spark: the checkpoint and state pages, and the restores page's prediction."""

from __future__ import annotations

import json
import os

import pytest
from test_ui import app, as_shown, fmt_duration, frames, restart_db, texts  # noqa: F401  (restart_db: the module's fixture)

from spark_state_observer.history.loaders import load_queries


@pytest.fixture(scope="module")
def checkpoint_root(spark, tmp_path_factory) -> tuple[str, str, dict]:
    """A real checkpoint of a small stateful query (count per key over JSON files), run to completion."""
    root = tmp_path_factory.mktemp("ckroot")
    source = root / "in"
    source.mkdir()
    keys = {f"key-{i}": i % 4 + 1 for i in range(12)}
    with open(source / "part-0.json", "w") as f:
        f.writelines("".join(f'{{"k": "{key}"}}\n' for _ in range(n)) for key, n in keys.items())
    checkpoint = str(root / "ck" / "counts")
    query = (
        spark.readStream.schema("k STRING")
        .json(str(source))
        .groupBy("k")
        .count()
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .queryName("ui_counts")
        .start()
    )
    query.awaitTermination(240)
    return str(root / "ck"), checkpoint, keys


@pytest.mark.slow
def test_checkpoint_and_state_pages_on_a_real_checkpoint(monkeypatch, restart_db, checkpoint_root) -> None:
    root, checkpoint, keys = checkpoint_root
    at = app(monkeypatch, restart_db, roots=[root], page="Checkpoint")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["last committed batch"] == "0" and "restore time (estimate)" in metrics
    parts = frames(at)[1]
    assert len(parts) == 2 and set(parts.partition) == {0, 1}  # the fixture session's shuffle partitions
    # the only checkpoint under the root is another query's: Partitions shows it with a warning naming that query
    at = app(monkeypatch, restart_db, roots=[root], page="Partitions")
    warning = " ".join(as_shown(w.value) for w in at.warning)
    with open(os.path.join(checkpoint, "metadata")) as f:
        owner = json.loads(f.readline())["id"]
    assert f"This checkpoint belongs to query {owner}, which is not in this history" in warning
    assert "None of the checkpoints under the roots belongs to it" in warning
    at = app(monkeypatch, restart_db, roots=[root], page="Restores")  # prediction (inspector) next to the outcome (history)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["restore estimate"] != "-" and metrics["last measured restore"] != "-"

    at = app(monkeypatch, restart_db, roots=[root], page="State contents")
    at.toggle(key="state_enabled").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    operators = frames(at)[0]
    assert operators.operatorName.tolist()[0].startswith("stateStore")
    assert "struct<k:string>" in at.code[0].value.replace(" ", "")
    assert f"{len(keys)} rows in 2 partitions" in texts(at)
    at.text_input(key="state_key").input("key-7").run()
    rows = frames(at)[1]
    assert len(rows) == 1 and "key-7" in rows.key[0] and f"'count': {keys['key-7']}" in rows.value[0]


@pytest.mark.slow
def test_restores_page_sets_the_inspectors_prediction_next_to_the_measured_restore_of_the_same_checkpoint(
    monkeypatch, restarted_run
) -> None:
    """A real query run twice on one checkpoint (two processes, the observer writing the history): the
    Restores page, given the checkpoint's root, shows the inspector's estimate for that checkpoint per
    operator next to the restore the history measured, and compares only measured (not low-confidence)
    figures; the prediction is not calibrated on the restore it is compared with."""
    import dataclasses

    from spark_state_observer.history.loaders import load_events
    from spark_state_observer.offline.checkpoint import inspect_checkpoint
    from spark_state_observer.offline.checkpoint.restore import estimate_restore, rates_from_history

    history, root = restarted_run["history"], restarted_run["root"]
    queries = load_queries(history)
    assert len(queries) == 1
    qid = queries.query_id.iloc[0]
    checkpoint = os.path.join(root, "restore_demo")
    events = load_events(history, qid)
    restores = events[events.kind == "restore"]
    assert restores.ts.nunique() == 1  # one restart: no restore before it, so the prediction uses the inspector's defaults
    rates = None
    report = inspect_checkpoint(checkpoint)
    assert report.query_id == qid and report.estimate is not None and report.estimate.basis == "defaults"
    at = app(monkeypatch, history, roots=[root], page="Restores")
    assert not any("belongs to query" in w.value for w in at.warning)  # the checkpoint is this query's
    metrics = {m.label: m.value for m in at.metric}
    # the page's one estimate is the Checkpoint page's: the inspector's, refined by the restore the history measured
    refined = inspect_checkpoint(checkpoint, rates_from_history(history, qid)).estimate
    assert refined is not None and metrics["restore estimate"] == fmt_duration(refined.seconds)
    assert f"The estimate is {refined.described()}" in texts(at)
    # an estimate that saw no extra time has no duration (signals.restore.NOT_VISIBLE): the others' sum
    assert metrics["last measured restore"] == fmt_duration(sum(a["duration_seconds"] or 0.0 for a in restores.attributes))
    table = frames(at)[-1].set_index("operator")
    compared = []
    for op in report.operators:
        row = table.loc[f"{op.operator_id} {op.name}"]
        estimate = estimate_restore(dataclasses.replace(report, operators=[op]), rates)
        measured = next(a for a in restores.attributes if a["operator_index"] == op.operator_id)
        assert row["prediction"] == fmt_duration(estimate.seconds)
        assert row["last measured restore"] == fmt_duration(measured["duration_seconds"])
        assert row["measured by"] == f"{measured['method']} ({measured['confidence']})"
        if measured["confidence"] == "low" or measured["duration_seconds"] is None:
            assert row["outcome / prediction"] == "-"
        else:
            assert row["outcome / prediction"] == f"{measured['duration_seconds'] / estimate.seconds:.1f}x"
            compared.append((measured["duration_seconds"], estimate.seconds))
    assert compared, "Spark measured no operator's load time (load_metrics) in this restore"
    ratio = sum(m for m, _ in compared) / sum(e for _, e in compared)
    assert metrics["outcome / prediction"] == f"{ratio:.1f}x the prediction"
