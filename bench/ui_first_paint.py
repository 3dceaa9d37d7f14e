"""First paint of each state-browser page on a large history.

Two ways to make the history, both from real recorded data. The default is the browser tests' and
screenshots' history (``scripts/screenshots.build_history``): ``scripts/synthetic_history.py``'s 100,000
batches of a 200-partition query made from a recorded progress event plus a crash-looping query, every
recorded fixture and the recorded incident corpus (``tests/fixtures/incidents``), replayed through the
observer. ``--replicated`` grows the history the
older way: the recorded restart fixture is replayed into a history, then its
batches, operator rows, partition rows and events are copied over and over in SQL with batch ids and
timestamps shifted by one recorded run's span each time (the progress JSON's batchId and timestamp
follow). Each page is then run with ``streamlit.testing.v1.AppTest`` several times on a fresh app
(cold Streamlit caches, warm OS page cache), and the median wall time printed.

Query pages show the query with the most batches. The baseline, measured in the same run, is each page
on a small history: the incident corpus alone (its largest query has 155 batches).

``--chromium`` measures what a person waits for instead: the time from opening a page's URL in a real
headless Chromium (``/usr/bin/chromium``) until its script run is over and every chart of it is drawn
(first full paint), against ``spark-state-observer ui`` started afresh for each run, after the Queries
page (where a person comes from: the server has imported its code and read each query's newest batches
for the verdicts; the page's own series are not cached), the same pages, the same baseline.

    python bench/ui_first_paint.py [--batches 100000] [--repeat 5] [--db /tmp/sso-ui-bench.db] [--replicated] [--reuse]
                                   [--pages "Query drilldown,Queries"] [--chromium]
"""

from __future__ import annotations

import argparse
import glob
import os
import sqlite3
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from spark_state_observer.offline.replay import replay  # noqa: E402

PAGES = ("Applications", "Queries", "Query drilldown", "Restores", "Partitions", "Placement", "Runs", "Checkpoint", "State contents")


def build(db: str, batches: int) -> None:
    """Replay the recorded restart runs, then replicate them until the query has ``batches`` batches."""
    runs = sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "rocksdb_restart", "run*", "eventlog")))
    seed = db + ".seed"
    for path in (db, seed):
        if os.path.exists(path):
            os.remove(path)
    replay(runs, history=seed)
    conn = sqlite3.connect(db)
    conn.execute(f"ATTACH '{seed}' AS seed")
    conn.executescript("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;")
    schema = [r[0] for r in conn.execute("SELECT sql FROM seed.sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'")]
    for sql in schema:
        conn.execute(sql)
    conn.execute(f"PRAGMA user_version = {conn.execute('PRAGMA seed.user_version').fetchone()[0]}")
    n, lo, hi, max_batch = conn.execute("SELECT COUNT(*), MIN(ts), MAX(ts), MAX(batch_id) FROM seed.batches").fetchone()
    period = (hi - lo) + (hi - lo) / max(n - 1, 1)  # one copy after the other, spaced like the recorded batches
    copies = -(-batches // n)
    conn.execute("INSERT INTO queries SELECT * FROM seed.queries")
    conn.execute("UPDATE queries SET last_seen = first_seen + ?", (copies * period,))
    conn.execute("CREATE TEMP TABLE k (k INTEGER PRIMARY KEY)")
    conn.execute("WITH RECURSIVE c(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM c WHERE k + 1 < ?) INSERT INTO k SELECT k FROM c", (copies,))
    shift_ts, shift_id = f"ts + k * {period!r}", f"batch_id + k * {max_batch + 1}"
    new_run = "CASE WHEN k = 0 THEN run_id ELSE run_id || '-' || k END"
    conn.execute(
        f"""INSERT INTO batches SELECT query_id, {new_run}, {shift_id}, {shift_ts}, duration_ms, input_rows, input_rps,
                     processed_rps, watermark + k * {period!r}, state_rows, state_memory_bytes, durations,
                     json_set(progress, '$.batchId', {shift_id}, '$.runId', {new_run},
                              '$.timestamp', strftime('%Y-%m-%dT%H:%M:%fZ', {shift_ts}, 'unixepoch'))
                     FROM k, seed.batches ORDER BY k, ts LIMIT ?""",
        (batches,),
    )
    last_ts = conn.execute("SELECT MAX(ts) FROM batches").fetchone()[0]
    for table in ("operators", "partitions"):
        cols = [r[1] for r in conn.execute(f"PRAGMA seed.table_info({table})")]
        exprs = [new_run if c == "run_id" else shift_id if c == "batch_id" else shift_ts if c == "ts" else c for c in cols]
        conn.execute(f"INSERT INTO {table} SELECT {', '.join(exprs)} FROM k, seed.{table} WHERE {shift_ts} <= ?", (last_ts,))
    conn.execute(
        f"""INSERT INTO events (query_id, run_id, ts, kind, attributes)
                     SELECT query_id, {new_run}, {shift_ts}, kind, attributes FROM k, seed.events WHERE {shift_ts} <= ?""",
        (last_ts,),
    )
    conn.execute(
        f"""INSERT INTO runs SELECT {new_run}, query_id, started + k * {period!r}, last_seen + k * {period!r},
                     ended + k * {period!r}, outcome, exception FROM k, seed.runs WHERE started + k * {period!r} <= ?""",
        (last_ts,),
    )
    conn.commit()
    conn.execute("DETACH seed")
    conn.close()
    os.remove(seed)


def _screenshots():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("screenshots", os.path.join(ROOT, "scripts", "screenshots.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def build_large(db: str, batches: int) -> None:
    """The browser tests' large history: synthetic batches, the recorded fixtures and incidents."""
    _screenshots().build_history(db, batches)


def build_baseline(db: str) -> None:
    """The incident corpus alone: the same pages on a small history."""
    for path in (db, db + "-wal", db + "-shm"):
        if os.path.exists(path):
            os.remove(path)
    _screenshots().replay_incidents(db)


def biggest_query(db: str) -> str:
    return sqlite3.connect(db).execute("SELECT query_id FROM batches GROUP BY query_id ORDER BY COUNT(*) DESC LIMIT 1").fetchone()[0]


def first_paint(db: str, page: str, repeat: int) -> list[float]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["SPARK_STATE_OBSERVER_UI_HISTORY"] = db
    os.environ["SPARK_STATE_OBSERVER_UI_CHECKPOINT_ROOTS"] = tempfile.mkdtemp(prefix="sso-bench-roots-")
    times = []
    query_id = biggest_query(db)
    for _ in range(repeat):
        at = AppTest.from_file(os.path.join(ROOT, "spark_state_observer", "browser", "app.py"), default_timeout=120)
        at.query_params["page"] = page  # the page's old-style link (AppTest has no URL path)
        at.query_params["query"] = query_id
        started = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - started)
        if at.exception:
            raise SystemExit(f"{page}: {at.exception[0].value}")
        st.cache_data.clear()  # every run is a first paint
    return times


# the run is over, no element still waits for its code (a lazily loaded element shows a skeleton until its
# chunk arrives: without this check a page whose charts had not mounted yet counted as drawn), every chart drawn
DRAWN = """() => {
    const app = document.querySelector("[data-testid='stApp']");
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (document.querySelector("[data-testid='stSkeleton']")) return false;
    const charts = [...document.querySelectorAll("[data-testid='stVegaLiteChart']")];
    return charts.every(c => [...c.querySelectorAll('canvas, svg.marks')].some(e => e.clientWidth > 0 && e.clientHeight > 0));
}"""


def full_paint(db: str, page: str, repeat: int) -> list[float]:
    """Seconds from opening the page's URL until its run is over and every chart is drawn, in Chromium;
    a fresh server per run, the Queries page opened first."""
    from playwright.sync_api import sync_playwright

    from spark_state_observer.browser import nav

    shots = _screenshots()
    query_id = biggest_query(db)
    roots = (tempfile.mkdtemp(prefix="sso-bench-roots-"),)
    times = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=shots.CHROMIUM_ARGS)
        for _ in range(repeat):
            with shots.serve(db, roots) as base:
                tab = browser.new_page(viewport={"width": 1400, "height": 900})
                tab.goto(f"{base}/{nav.QUERIES}", wait_until="domcontentloaded")  # where a person comes from
                tab.get_by_role("heading", name="Queries").first.wait_for(timeout=120_000)
                tab.wait_for_function(DRAWN, timeout=120_000, polling=50)
                started = time.perf_counter()
                tab.goto(f"{base}/{nav.BY_TITLE[page].path}?query={query_id}", wait_until="domcontentloaded")
                tab.get_by_role("heading", name=shots.HEADINGS[page]).first.wait_for(timeout=120_000)
                tab.wait_for_function(DRAWN, timeout=120_000, polling=50)
                times.append(time.perf_counter() - started)
                tab.close()
        browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=100_000)
    parser.add_argument("--replicated", action="store_true", help="replicate the restart fixture instead of the synthetic history")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db", default=os.path.join(tempfile.gettempdir(), "sso-ui-bench.db"))
    parser.add_argument("--reuse", action="store_true", help="keep an existing --db of the right size")
    parser.add_argument("--pages", default=",".join(PAGES), help="comma-separated page titles")
    parser.add_argument("--chromium", action="store_true", help="first full paint in Chromium instead of AppTest's script time")
    args = parser.parse_args()
    pages = [p.strip() for p in args.pages.split(",") if p.strip()]
    have = 0
    if args.reuse and os.path.exists(args.db):
        have = sqlite3.connect(args.db).execute("SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM batches GROUP BY query_id)").fetchone()[0]
    if have != args.batches:
        started = time.perf_counter()
        (build if args.replicated else build_large)(args.db, args.batches)
        print(
            f"built {args.db}: {args.batches:,} batches, {os.path.getsize(args.db) / 1e9:.2f} GB in {time.perf_counter() - started:.0f} s"
        )
    small = os.path.join(tempfile.mkdtemp(prefix="sso-ui-baseline-"), "incidents.db")
    build_baseline(small)
    how = "Chromium, first full paint" if args.chromium else "AppTest"
    measure = full_paint if args.chromium else first_paint
    print(f"{how}, {args.repeat} runs per page, cold Streamlit caches; seconds, median (min-max); load {os.getloadavg()[0]:.1f}")
    print(f"{'page':<18} {'large history':>22} {'baseline: incidents':>22} {'ratio':>6}")
    for page in pages:
        large, base = measure(args.db, page, args.repeat), measure(small, page, args.repeat)
        cell = [f"{statistics.median(t):.3f} ({min(t):.2f}-{max(t):.2f})" for t in (large, base)]
        print(f"{page:<18} {cell[0]:>22} {cell[1]:>22} {statistics.median(large) / statistics.median(base):>5.1f}x")


if __name__ == "__main__":
    main()
