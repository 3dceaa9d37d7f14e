"""The state browser (streamlit_app) on histories replayed from real recorded runs, a real checkpoint
written by Spark, and a real headless Chromium against the served app."""

from __future__ import annotations

import io
import json
import os
import re

import pytest

from conftest import (
    ROOT,
    eventlog_dir,
    fixture_runs,
    progress_lines,
)

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from spark_state_observer.history.loaders import load_queries
from spark_state_observer.offline.replay import replay
from ui_text import as_shown

APP = os.path.join(ROOT, "spark_state_observer", "browser", "app.py")
RESTART = fixture_runs("rocksdb_restart")
FAILED_QUERY = progress_lines(fixture_runs("schema_failure")[0])[0]["id"]


@pytest.fixture(scope="module")
def restart_db(tmp_path_factory) -> str:
    db = str(tmp_path_factory.mktemp("ui") / "restart.db")
    replay([eventlog_dir(r) for r in RESTART], history=db)
    return db


@pytest.fixture(scope="module")
def all_db(tmp_path_factory) -> str:
    db = str(tmp_path_factory.mktemp("ui") / "all.db")
    replay([eventlog_dir(r) for r in fixture_runs()], history=db)
    return db


def app(
    monkeypatch, history: str, roots: list[str] = (), page: str = "Queries", query_id: str | None = None, opened: tuple[str, ...] = ()
) -> AppTest:
    """The page after its first run; ``opened``: keys of folded sections (lazy expanders) opened before it."""
    monkeypatch.setenv("SPARK_STATE_OBSERVER_UI_HISTORY", history)
    monkeypatch.setenv("SPARK_STATE_OBSERVER_UI_CHECKPOINT_ROOTS", os.pathsep.join(roots))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["page"] = page  # a link of the older ?page=Title form: it opens the page it names
    if query_id is not None:
        at.query_params["query"] = query_id
    for key in opened:
        at.session_state[key] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["page"] == page
    return at


def texts(at: AppTest) -> str:
    parts = [e.value for kind in ("error", "info", "warning", "caption", "markdown", "header", "subheader") for e in at.get(kind)]
    return "\n".join(as_shown(p) for p in parts)


def chart_titles(at: AppTest) -> list[str]:
    """Titles of the Vega-Lite charts drawn (layered charts carry it on their first layer)."""
    titles = []
    for element in at.get("vega_lite_chart"):
        spec = json.loads(element.proto.spec)
        title = spec.get("title") or next((layer.get("title") for layer in spec.get("layer", []) if layer.get("title")), None)
        titles.append(title if isinstance(title, str) else (title or {}).get("text"))
    return titles


def frames(at: AppTest) -> list:
    return [d.value for d in at.dataframe]


def test_queries_page_lists_every_recorded_query_with_health_and_restart(monkeypatch, all_db) -> None:
    at = app(monkeypatch, all_db)
    table = frames(at)[0]
    queries = load_queries(all_db)
    assert len(table) == len(queries) == len({p["id"] for run in fixture_runs() for p in progress_lines(run)})
    progress = {p["id"]: 0 for run in fixture_runs() for p in progress_lines(run)}
    for run in fixture_runs():
        for p in progress_lines(run):
            progress[p["id"]] += 1
    for row in table.itertuples():
        qid = next(q for q in progress if q[:8] in row.query)
        assert row.batches == progress[qid]
        # every recorded run was stopped cleanly, but for the restart the checkpoint refused (schema_failure)
        assert row.health.endswith("failed" if qid == FAILED_QUERY else "stopped"), (row.query, row.health)
    restarted = table[(table.runs == 2) & table.health.str.endswith("stopped")].iloc[0]
    assert restarted["last restart"] != "-" and "s down" in restarted["last restart"]
    assert restarted["last restore"] != "-"
    assert all(len(trend) == row.batches for trend, row in zip(table["batch ms trend"], table.itertuples()))
    assert f"{len(progress) - 1} stopped" in texts(at) and "1 failed" in texts(at)


def test_open_drilldown_from_the_queries_page(monkeypatch, restart_db) -> None:
    at = app(monkeypatch, restart_db)
    at.session_state["more_state"] = at.session_state["more_lag"] = True  # both folded groups of charts opened
    at.main.button[0].click().run()
    assert at.session_state["page"] == "Query drilldown"
    progress = progress_lines(RESTART[0]) + progress_lines(RESTART[1])
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["batches in range"] == str(len(progress))
    assert metrics["newest batch"] == str(progress[-1]["batchId"])
    assert progress[0]["name"] in as_shown(at.header[0].value)
    events = frames(at)[0]
    assert {"start", "restart", "restore", "stop / failure"} <= set(events.event)  # kinds in plain words
    # the event strip, phases, rates; opened: state rows, memory, churn, watermark lag, RocksDB commit latency
    assert chart_titles(at) == [
        "Events",
        "Batch phases (stacked)",
        "Rates",
        "State rows per operator",
        "State memory per operator",
        "Additions (rows updated) vs evictions (rows removed)",
        "Watermark lag (batch time - watermark)",
        "RocksDB commit latency (all operators, newest 300 batches)",
    ]
    shown = at.json[0].value
    assert (
        f'"batchId": {progress[-1]["batchId"]}' in shown.replace('":', '": ').replace('":  ', '": ')
        or f'"batchId":{progress[-1]["batchId"]}' in shown
    )


def test_drilldown_shows_any_batch_progress(monkeypatch, restart_db) -> None:
    progress = progress_lines(RESTART[0])
    at = app(monkeypatch, restart_db, page="Query drilldown", query_id=progress[0]["id"])
    at.selectbox(key="batch_run").select(progress[0]["runId"]).run()
    at.number_input(key="batch_id").set_value(2).run()
    assert '"batchId":2' in at.json[0].value.replace(" ", "")
    assert f'"runId":"{progress[0]["runId"]}"' in at.json[0].value.replace(" ", "")
    at.number_input(key="batch_id").set_value(999).run()
    assert "has no batch 999" in texts(at)


def test_unknown_query_is_reported(monkeypatch, restart_db) -> None:
    at = app(monkeypatch, restart_db, page="Query drilldown", query_id="no-such-query")
    assert "Unknown query no-such-query:" in texts(at)


def test_empty_and_missing_history_are_explained(monkeypatch, tmp_path) -> None:
    from spark_state_observer.history.store import HistoryStore

    empty = str(tmp_path / "empty.db")
    HistoryStore(empty).close()
    for page in ("Queries", "Query drilldown", "Runs"):
        assert "is empty: no query has reported a batch yet" in texts(app(monkeypatch, empty, page=page))
    missing = str(tmp_path / "nope.db")
    at = app(monkeypatch, missing)
    assert f"history database {missing} does not exist" in texts(at)
    assert not os.path.exists(missing)  # reading never creates the file


def test_runs_page_compares_before_and_after_the_restart(monkeypatch, restart_db) -> None:
    at = app(monkeypatch, restart_db, page="Runs")
    listing, table = frames(at)[:2]
    assert listing["run id"].tolist() == [progress_lines(r)[0]["runId"] for r in reversed(RESTART)]  # every run, newest first
    before, after = progress_lines(RESTART[0]), progress_lines(RESTART[1])
    assert list(table.columns) == [f"before ({before[0]['runId'][:8]})", f"after ({after[0]['runId'][:8]})"]
    assert table.loc["batches"].tolist() == [str(len(before)), str(len(after))]
    assert table.loc["batch ids"].tolist() == [
        f"{before[0]['batchId']}-{before[-1]['batchId']}",
        f"{after[0]['batchId']}-{after[-1]['batchId']}",
    ]
    assert table.loc["restore seconds"].iloc[0] == "-" and float(table.loc["restore seconds"].iloc[1]) >= 0
    assert float(table.loc["restart downtime s"].iloc[1]) > 0
    assert chart_titles(at) == ["Batch duration", "Processed rate", "State rows"]


def test_partitions_page_shows_snapshot_lag_from_the_history(monkeypatch, restart_db) -> None:
    at = app(monkeypatch, restart_db, page="Partitions")
    lag = frames(at)[0]
    last = progress_lines(RESTART[1])[-1]
    reported = [
        (i, k) for i, op in enumerate(last["stateOperators"]) for k in op.get("customMetrics", {}) if k.startswith("SnapshotLastUploaded")
    ]
    assert list(lag.columns[:3]) == ["partition", "store", "snapshot lag (versions)"]  # key columns first
    assert len(lag) == len(reported) and set(lag.batch) == {last["batchId"]}
    assert (lag["snapshot lag (versions)"] >= 0).all()
    assert chart_titles(at) == [f"operator {i}" for i in sorted(lag.operator.unique())]  # the partitions x batches heatmaps
    assert "No checkpoint root is configured" in texts(at)


def test_paths_outside_the_roots_are_refused(monkeypatch, restart_db, tmp_path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    os.symlink("/etc", root / "escape")
    at = app(monkeypatch, restart_db, roots=[str(root)], page="Checkpoint")
    assert "No streaming checkpoint found" in texts(at)
    for typed in ("/etc", "../../..", "escape/ssl"):
        at.text_input(key="ckpt_path").input(typed).run()
        assert "refused:" in texts(at) and "outside the configured checkpoint roots" in texts(at)
    at.text_input(key="ckpt_path").input("missing-checkpoint").run()
    assert "Cannot inspect this checkpoint" in texts(at) and "no such directory" in texts(at)


def test_live_history_shows_new_runs_on_refresh(monkeypatch, tmp_path) -> None:
    """The browser reads while a writer appends (WAL, read-only connection): Refresh shows the new run."""
    db = str(tmp_path / "live.db")
    replay([eventlog_dir(RESTART[0])], history=db)
    at = app(monkeypatch, db)
    assert frames(at)[0].runs.tolist() == [1]
    replay([eventlog_dir(RESTART[1])], history=db)
    at.sidebar.button[0].click().run()
    table = frames(at)[0]
    assert table.runs.tolist() == [2]
    assert table.batches.tolist() == [len(progress_lines(RESTART[0])) + len(progress_lines(RESTART[1]))]


# --- the on-call view: verdicts, root cause, restores, fleet, URL state --------------------------------
FAILURE = fixture_runs("schema_failure")
PAGES = ("Applications", "Queries", "Query drilldown", "Restores", "Partitions", "Runs", "Checkpoint", "State contents")
SYNTHETIC = os.path.join(ROOT, "scripts", "synthetic_history.py")


@pytest.fixture(scope="module")
def synthetic_db(tmp_path_factory) -> str:
    """A synthetic history made by the repo's script from recorded events (3,000 batches: enough for
    bucketed charts over the default range and 200 partitions; the Chromium tests use 100,000)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("synthetic_history", SYNTHETIC)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    db = str(tmp_path_factory.mktemp("synthetic") / "synthetic.db")
    module.build(db, 3000)
    return db


def everything_shown(at: AppTest) -> str:
    """Every text the page shows, tables included (cells as text)."""
    return (
        texts(at)
        + "\n"
        + "\n".join(frame.astype(str).to_string() for frame in frames(at))
        + "\n"
        + "\n".join(str(m.value) for m in at.metric)
    )


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_replayed_and_synthetic_histories(monkeypatch, all_db, synthetic_db, page) -> None:
    for db in (all_db, synthetic_db):
        at = app(monkeypatch, db, page=page)
        shown = everything_shown(at)
        assert "Traceback (most recent call last):" not in shown and "None" not in shown.replace("None of", "")
        assert "no batches in the chosen range" not in shown
        if page != "Applications":  # the query picker is on every page but the fleet's
            assert at.sidebar.selectbox(key="query_id").value is not None


def test_partitions_of_200_store_instances_over_many_batches(monkeypatch, synthetic_db) -> None:
    """More batches than heatmap columns and 200 partitions: the lag is read (it used to come back empty)."""
    import sqlite3

    with sqlite3.connect(synthetic_db) as conn:
        qid = conn.execute("SELECT query_id FROM queries WHERE name = 'synthetic_dedupe'").fetchone()[0]
    at = app(monkeypatch, synthetic_db, page="Partitions", query_id=qid)
    assert chart_titles(at) == ["operator 0", "operator 1"]
    lag = frames(at)[0]
    assert sorted(set(lag.partition)) == list(range(200)) and len(lag) == 400  # newest figure per instance and operator
    assert "no per-partition figures" not in texts(at)


def test_queries_page_puts_the_verdict_and_root_cause_first(monkeypatch, all_db) -> None:
    at = app(monkeypatch, all_db)
    table = frames(at)[0]
    assert list(table.columns[:5]) == ["query", "verdict", "since", "runbook", "health"]
    failed = table[table.health.str.endswith("failed")].iloc[0]
    assert failed.name == 0  # the most severe first
    assert failed.verdict.startswith("Failed at start at ") and "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in failed.verdict
    assert failed.runbook == "./runbook?section=sparkstreamingqueryfailed"  # the browser's own runbook page
    restarted = table[table.runs == 2].iloc[0] if (table.runs == 2).sum() == 1 else table[table.verdict.str.contains("Restarted")].iloc[0]
    assert "Restarted at" in restarted.verdict and "restore" in restarted.verdict
    assert "2 operators, slowest stateStoreSave" in restarted["last restore"]  # the larger operator is not hidden
    recorded = len({p["id"] for run in fixture_runs() for p in progress_lines(run)})
    assert f"{recorded} queries" in texts(at) and "1 queries" not in texts(at)


def test_synthetic_incidents_are_named_by_their_verdicts(monkeypatch, synthetic_db) -> None:
    at = app(monkeypatch, synthetic_db)
    table = frames(at)[0].set_index("query")
    loop = next(v for q, v in table.verdict.items() if q.startswith("synthetic_crash_loop"))
    dedupe = next(v for q, v in table.verdict.items() if q.startswith("synthetic_dedupe"))
    assert loop.startswith("Crash loop: 5 restarts in 2 min; last error org.apache.spark.SparkRuntimeException")
    # named by the growth signal's evidence: the rows it grew from and to, how fast, and that nothing was evicted
    grew = re.match(r"State unbounded: dedupe rows ([\d,]+) → ([\d,]+) in [\d.]+ s \(\+([\d.]+)/s\), nothing evicted", dedupe)
    assert grew is not None, dedupe
    start, end, rate = (float(g.replace(",", "")) for g in grew.groups())
    assert end > start and rate > 0, dedupe
    assert list(table.index).index(next(q for q in table.index if q.startswith("synthetic_crash_loop"))) == 0


def test_drilldown_opens_with_the_verdict_the_trace_folded_and_the_newest_batch(monkeypatch, all_db) -> None:
    qid = progress_lines(FAILURE[0])[0]["id"]
    at = app(monkeypatch, all_db, page="Query drilldown", query_id=qid)
    assert "Failed at start" in as_shown(at.error[0].value) and "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in as_shown(
        at.error[0].value
    )
    assert at.expander[0].label.startswith("Full exception of run ")
    assert "Stateful operators in the metadata" in at.code[0].value  # more than the root-cause line: the text the history kept
    # the newest run failed before its first batch: the batch shown is the newest batch the query has
    last = progress_lines(FAILURE[0])[-1]
    assert at.selectbox(key="batch_run").value == last["runId"] and at.number_input(key="batch_id").value == last["batchId"]
    assert f'"batchId":{last["batchId"]}' in at.json[0].value.replace(" ", "")


def test_query_that_never_completed_a_batch_gets_the_cause_not_range_advice(monkeypatch, tmp_path) -> None:
    db = str(tmp_path / "failed_start.db")
    replay([eventlog_dir(FAILURE[1])], history=db)
    at = app(monkeypatch, db, page="Query drilldown")
    shown = everything_shown(at)
    assert "has not completed a batch" in shown and "widen" not in shown
    assert "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in as_shown(at.error[0].value)
    at = app(monkeypatch, db, page="Runs")
    runs = frames(at)[0]
    assert len(runs) == 1 and runs["batch ids"].iloc[0] == "none (failed at start)"
    assert runs["root cause"].iloc[0].startswith("org.apache.spark.SparkRuntimeException: [STREAMING_STATEFUL_OPERATOR")
    assert "a comparison needs two" in texts(at) and len(frames(at)) == 1  # no run compared with itself


def test_restores_page_shows_each_restart_and_operator(monkeypatch, restart_db) -> None:
    at = app(monkeypatch, restart_db, page="Restores")
    metrics = {m.label: m.value for m in at.metric}
    from spark_state_observer.history.loaders import load_events

    events = load_events(restart_db, progress_lines(RESTART[0])[0]["id"])
    restores = [{"attributes": a} for a in events[events.kind == "restore"].attributes]
    assert len(restores) == 2  # one per state operator of the recorded restart
    assert metrics["restarts"] == "1" and metrics["restores measured"] == str(len(restores))
    per_restart = frames(at)[0]
    for s in restores:
        column = f"restore {s['attributes']['operator_index']} {s['attributes']['operator']}"
        assert per_restart[column].iloc[0] == fmt_duration(s["attributes"]["duration_seconds"])
    assert chart_titles(at)[0].startswith("Restores (first batch after a restart)")
    # the restore as it went, partition by partition (tests/unit/test_restore_progress.py checks the figures)
    assert "Latest restore, as it went" in [h.value for h in at.subheader]
    bars = sorted(b.proto.text.replace("\\", "").split("; slowest")[0] for b in at.get("progress"))  # as shown, unescaped
    finished = events[events.kind == "restore_finished"].attributes
    expected = sorted(
        f"{a['operator_index']} {a['operator']}: 2 of 2 partitions, restored in {fmt_duration(a['duration_seconds'])}" for a in finished
    )
    assert len(bars) == 2 and bars == expected, bars


RESTORE_REASONS = [
    "![x](http://127.0.0.1:1/x.png) [link](http://evil)",
    '<img src="http://127.0.0.1:1/y.png" onerror="alert(1)"> <a href="http://evil">a</a> **bold** :red[x]',
]


@pytest.mark.parametrize("reason", RESTORE_REASONS, ids=["markdown", "html"])
def test_restores_page_shows_a_written_reason_as_text_not_markup(monkeypatch, restart_db, tmp_path, reason: str) -> None:
    """Issue 48: any writer to a shared history can put markup in a restore's ``reason``; the page shows it literally."""
    import shutil
    import sqlite3

    from markdown_it import MarkdownIt

    db = str(tmp_path / "shared.db")
    shutil.copy(restart_db, db)
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT id, attributes FROM events WHERE kind IN ('restore_started', 'restore_progress', 'restore_finished')")
        changed = [(json.dumps({**json.loads(a), "reason": reason}), i) for i, a in rows.fetchall()]
        con.executemany("UPDATE events SET attributes = ? WHERE id = ?", changed)
    assert changed
    at = app(monkeypatch, db, page="Restores")
    said = [c.value for c in at.caption if "From the restoring batch's tasks" in c.value]
    assert len(said) == 1
    assert f"as they end ({reason});" in as_shown(said[0])  # the literal, as a person reads it
    markdown = MarkdownIt("commonmark", {"html": True}).enable(["linkify", "strikethrough"])
    html = markdown.render(said[0])
    assert "<img" not in html and "<a " not in html and "<strong>" not in html, html  # no element made of it
    shown = [e.value for kind in ("caption", "markdown", "header", "subheader", "info", "warning", "error") for e in at.get(kind)]
    shown += [b.proto.text for b in at.get("progress")]
    made = [h for h in map(markdown.render, shown) if re.search(r"<(img|a)\b[^>]*(127\.0\.0\.1:1|evil)", h)]
    assert not made, made  # nor anywhere else on the page


def fmt_duration(seconds: float) -> str:
    from spark_state_observer.browser.fmt import duration

    return duration(seconds)


def test_url_holds_the_view_and_a_changed_url_wins(monkeypatch, all_db) -> None:
    """Every page, query, run and batch has a URL; going Back (an older URL) restores the older view. An old
    ``?page=Title`` link opens its page, whose path then names it (the query string keeps the selection)."""
    qid = progress_lines(FAILURE[0])[0]["id"]
    first = progress_lines(FAILURE[0])[0]["runId"]
    at = app(monkeypatch, all_db, page="Runs", query_id=qid)
    assert as_shown(at.header[0].value).startswith("Runs of demo_dedup_window (e608b948)")
    assert "page" not in at.query_params and at.query_params["query"] in (qid, [qid])  # the page is in the path now
    at.query_params.clear()  # what Back to a drilldown link does: the browser reruns with the older URL
    at.query_params.update({"page": "Query drilldown", "query": qid, "run": first, "batch": "1"})
    at.run()
    assert at.session_state["page"] == "Query drilldown" and at.number_input(key="batch_id").value == 1
    assert '"batchId":1' in at.json[0].value.replace(" ", "")
    at.number_input(key="batch_id").set_value(0).run()  # a change made in the page goes into the URL
    assert at.query_params["batch"] in ("0", ["0"]) and at.query_params["run"] in (first, [first])
    assert '"batchId":0' in at.json[0].value.replace(" ", "")
    at.number_input(key="batch_id").set_value(2).run()  # the newest batch is the drilldown's default: a short link
    assert "batch" not in at.query_params and "run" not in at.query_params
    assert '"batchId":2' in at.json[0].value.replace(" ", "")


def recorded_app_name(eventlog: str) -> str:
    """What Spark wrote in a recorded event log's application start (``spark.app.name``)."""
    from spark_state_observer.capture.codecs import open_decompressed
    from spark_state_observer.offline.eventlog import expand

    with io.BufferedReader(open_decompressed(expand([eventlog])[0])) as stream:
        return next(json.loads(line)["App Name"] for line in stream if b"SparkListenerApplicationStart" in line)


def test_pages_have_paths_and_views_read_only_through_the_data_layer() -> None:
    """One URL path per page; a view imports no other view and loads nothing itself (no cache, database or
    file reader of its own): ``spark_state_observer.browser.data`` is the one place that loads and caches."""
    import ast

    from spark_state_observer.browser import nav
    from spark_state_observer.browser.views import RENDER

    assert len({r.path for r in nav.ROUTES}) == len(nav.ROUTES) == len(RENDER) and set(RENDER) == set(nav.BY_PATH)
    views = os.path.join(ROOT, "spark_state_observer", "browser", "views")
    for name in sorted(os.listdir(views)):
        if not name.endswith(".py") or name == "__init__.py":
            continue
        with open(os.path.join(views, name)) as f:
            source = f.read()
        tree = ast.parse(source)
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
        }
        assert not any(m and m.startswith("spark_state_observer.browser.views") for m in imported), (name, imported)
        assert not imported & {
            "sqlite3",
            "spark_state_observer.history.loaders",
            "spark_state_observer.history.browse",
            "spark_state_observer.offline.state_reader",
        }, name
        assert "cache_data" not in source and "cache_resource" not in source and "open(" not in source, name


def test_charts_break_their_lines_across_the_restart(monkeypatch, restart_db) -> None:
    """The recorded restart: the query was down between its two runs. Every line of the drilldown is drawn
    as one path per stretch of batches, so the downtime is a gap, not a line from the last batch of the
    first run to the first batch of the second."""
    import pyarrow as pa

    before, after = progress_lines(RESTART[0]), progress_lines(RESTART[1])
    at = app(monkeypatch, restart_db, page="Query drilldown", query_id=before[0]["id"])
    # a first paint draws the events, phases and rates; the state and lag charts wait, folded, until opened
    assert chart_titles(at) == ["Events", "Batch phases (stacked)", "Rates"]
    assert [e.label for e in at.expander[1:]] == [
        "State per operator: rows, memory, additions and evictions",
        "Watermark lag and RocksDB commit latency",
        "Commit history: min / avg / max per window of consecutive batches",
    ]
    assert len(at.table) == 2  # the configuration and the commit summary; the per-window history waits too
    rates = next(e for e in at.get("vega_lite_chart") if "Rates" in e.proto.spec)
    spec = json.loads(rates.proto.spec)
    layer = spec["layer"][0] if "layer" in spec else spec
    assert layer["mark"]["invalid"].startswith("break-paths")  # a row without a value cuts the path
    rows = [r for d in rates.proto.datasets for r in pa.ipc.open_stream(d.data.data).read_all().to_pylist() if "series" in r]
    for name in ("input", "processed"):
        points = sorted((r for r in rows if r["series"] == name), key=lambda r: r["time"])
        assert sum(r["value"] is not None for r in points) == len(before) + len(after), name
        cuts = [i for i, r in enumerate(points) if r["value"] is None]
        assert cuts == [len(before)], (name, cuts)  # one cut, between the last batch of the first run and the first of the second
        assert points[cuts[0] - 1]["time"] < points[cuts[0]]["time"] < points[cuts[0] + 1]["time"]


def test_drilldown_shows_the_effective_configuration(monkeypatch, all_db) -> None:
    """From the recorded runs' own progress: RocksDB with and without changelog checkpointing, the HDFS-backed
    store, their shuffle partitions; the trigger, which no report carries, is said to be unknown."""
    expected = {
        "rocksdb_restart": ("RocksDB", "on"),
        "rocksdb_nochangelog_snappy": ("RocksDB", "off"),
        "hdfs": ("HDFS-backed", "not applicable"),
    }
    for fixture, (provider, changelog) in expected.items():
        progress = progress_lines(fixture_runs(fixture)[-1])
        at = app(monkeypatch, all_db, page="Query drilldown", query_id=progress[0]["id"])
        assert at.expander[0].label == "Effective configuration"
        panel = at.table[0].value.map(as_shown).set_index("setting")
        assert panel.loc["state store provider", "value"].startswith(provider), fixture
        assert panel.loc["changelog checkpointing", "value"] == changelog, fixture
        partitions = progress[-1]["stateOperators"][0]["numShufflePartitions"]
        assert panel.loc["shuffle (state) partitions", "value"] == str(partitions)
        assert panel.loc["trigger", "value"] == "unknown" and "does not carry" in panel.loc["trigger", "from"]
        assert panel.loc["sink", "value"] == progress[-1]["sink"]["description"]


def test_drilldown_commit_history_gives_min_avg_max_per_window(monkeypatch, restart_db) -> None:
    """Like Flink's checkpoint history: min / avg / max of each commit figure over the batches, then per
    window of consecutive batches of one run (newest first), from the recorded progress."""
    progress = progress_lines(RESTART[0]) + progress_lines(RESTART[1])
    at = app(monkeypatch, restart_db, page="Query drilldown", query_id=progress[0]["id"], opened=("more_commits",))
    assert "Commits" in [as_shown(h.value) for h in at.subheader]
    summary = at.table[1].value.map(as_shown).set_index("figure")
    durations = [p["batchDuration"] for p in progress]
    row = summary.loc["batch duration"]
    assert (row["min"], row["max"], row["batches"]) == (
        fmt_duration(min(durations) / 1000),
        fmt_duration(max(durations) / 1000),
        str(len(progress)),
    )
    assert row["avg"] == fmt_duration(sum(durations) / len(durations) / 1000)
    commit = [sum(op["commitTimeMs"] for op in p["stateOperators"]) for p in progress]
    assert summary.loc["state commit (commitTimeMs)", "max"] == fmt_duration(max(commit) / 1000)
    assert summary.loc["state rows", "newest"] == f"{sum(op['numRowsTotal'] for op in progress[-1]['stateOperators']):,}"
    history = at.table[2].value.map(as_shown)
    runs = [p["runId"][:8] for p in (progress_lines(RESTART[1])[0], progress_lines(RESTART[0])[0])]
    assert history.run.iloc[0] == runs[0] and history.run.iloc[-1] == runs[1]  # newest first; no window spans both runs
    newest = history.iloc[0]["batch duration min / avg / max"].split(" / ")
    assert len(newest) == 3 and history.iloc[0]["batches"].endswith(str(progress[-1]["batchId"]))


def test_applications_page_has_one_row_per_query_with_its_whole_verdict(monkeypatch, all_db, tmp_path) -> None:
    """One row per query, each with its own verdict, most severe first, shown whole (a static table that
    wraps: the root cause is not cut to 'org.apa…'); a query links to its drilldown, an application to its
    queries; filters and the application picker scope the pages."""
    from spark_state_observer.browser import data

    at = app(monkeypatch, all_db, page="Applications")
    fleet = at.table[0].value
    recorded = {p["id"] for run in fixture_runs() for p in progress_lines(run)}
    assert len(fleet) == len(recorded)
    links = [re.search(r"\(\./drilldown\?query=([^)]+)\)$", q).group(1) for q in fleet["query"]]
    assert set(links) == recorded
    names = {recorded_app_name(eventlog_dir(run)) for run in fixture_runs()}  # replay names the application from its logs
    assert {as_shown(a).split("](")[0].lstrip("[") for a in fleet.application} == names
    for qid, cell in zip(links, fleet.verdict):
        whole = data.query_verdicts(all_db, data.token(all_db), qid)[0].text
        assert whole in as_shown(cell), (whole, cell)  # every query's own verdict, whole
    assert "Failed at start" in as_shown(fleet.verdict.iloc[0]) and links[0] == FAILED_QUERY  # the most severe first
    assert "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in as_shown(fleet.verdict.iloc[0])
    db = str(tmp_path / "apps.db")
    import sqlite3

    with sqlite3.connect(all_db) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
        dst.execute(
            "UPDATE queries SET app = CASE WHEN query_id = ? THEN 'billing' ELSE 'orders' END, app_labels = '{\"cluster\": \"prod\"}'",
            (FAILED_QUERY,),
        )
    monkeypatch.setenv("SPARK_STATE_OBSERVER_UI_HISTORY", db)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert at.session_state["page"] == "Applications"  # several applications: the fleet is the first page
    fleet = at.table[0].value.map(as_shown)
    assert (
        fleet.application.str.startswith("[billing]").sum() == 1 and fleet.application.str.startswith("[orders]").sum() == len(recorded) - 1
    )
    assert set(fleet.labels) == {"cluster=prod"}
    at.text_input(key="app_filter").input("ord").run()
    assert len(at.table[0].value) == len(recorded) - 1
    at.multiselect(key="app_health").select("failed").run()
    assert len(at.table) == 0 and "0 queries in 0 applications" in texts(at)
    at.multiselect(key="app_health").unselect("failed").run()
    at.selectbox(key="open_app").select("orders")
    at.button[0].click().run()
    assert at.session_state["page"] == "Queries"
    assert len(frames(at)[0]) == len(recorded) - 1 and "of orders" in texts(at)


def test_partition_heatmaps_give_each_store_instance_a_row(monkeypatch, restart_db) -> None:
    """Issue 51: the heatmaps collapsed into one line (a fixed height is the whole chart's in Streamlit, and its
    axis and legend took it all). Each row now has a height of its own: one row per instance the history reports."""
    import json

    at = app(monkeypatch, restart_db, page="Partitions")
    lag = frames(at)[0]
    specs = [json.loads(e.proto.spec) for e in at.get("vega_lite_chart")]
    heatmaps = [s for s in specs if s.get("mark", {}).get("type") == "rect"]
    assert heatmaps
    for spec in heatmaps:
        op = int(spec["title"].split()[-1])
        instances = len(lag[lag.operator == op][["partition", "store"]].drop_duplicates())
        assert spec["encoding"]["y"]["field"] == "instance" and instances > 1
        assert spec["height"] == {"step": 24}  # a few instances: each row at its tallest, never squeezed into one line
