"""Screenshots of every page of the state browser for the README, in a real headless Chromium.

Builds a history from real recorded data (``scripts/synthetic_history.py``: a 200-partition query with
unbounded state after a restart and a crash-looping query, plus every recorded fixture and the recorded
incident corpus ``tests/fixtures/incidents`` replayed into the same file), serves it with ``spark-state-observer ui`` on a free loopback port, opens each page by
its URL and writes ``docs/screenshots/<page>.png``.

    python scripts/screenshots.py [--history DB] [--batches 20000] [--out docs/screenshots] [--chromium /usr/bin/chromium]

The functions are shared with the Chromium tests (``tests/integration/test_ui_browser.py``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from typing import Any, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
# (file name, page, the query it shows by name): one picture per page, plus two recorded incidents' verdicts
SHOTS = [
    ("applications", "Applications", None),
    ("queries", "Queries", None),
    ("query_drilldown", "Query drilldown", "synthetic_dedupe"),
    ("incident_crash_loop", "Query drilldown", "crash_loop_503"),
    ("incident_executor_loss", "Query drilldown", "executor_loss"),
    ("restores", "Restores", "restore_demo"),
    ("partitions", "Partitions", "synthetic_dedupe"),
    ("placement", "Placement", "executor_loss"),
    ("runs", "Runs", "crash_loop_503"),
    ("checkpoint", "Checkpoint", "restore_demo"),
    ("state_contents", "State contents", "restore_demo"),
]
MAX_HEIGHT = 4000  # pixels of a picture: the top of a long page (verdict, first charts) is what the README needs
MAX_BYTES = 300_000


INCIDENTS = os.path.join(ROOT, "tests", "fixtures", "incidents")


def _keep_everything() -> Any:
    """Settings whose retention keeps recordings of any age (the corpus is older than a week soon)."""
    from spark_state_observer.settings import Settings

    return Settings.from_env(history_max_age_seconds=10 * 365 * 86400.0, history_max_bytes=float(1 << 40))


def incident_truths() -> dict[str, dict]:
    """Scenario name -> its ``truth.json`` (what happened, written by scripts/record_incidents.py). The growth
    corpus (scripts/record_growth.py) is left out: it keeps progress lines only, without the run's end the
    browser needs, and tests/unit/test_growth_verdict.py checks the browser's text on it."""
    found = {}
    for path in sorted(glob.glob(os.path.join(INCIDENTS, "*", "truth.json"))):
        with open(path) as f:
            truth = json.load(f)
        if "growth" not in truth:
            found[os.path.basename(os.path.dirname(path))] = truth
    return found


def incident_recordings(scenario: str) -> list[str]:
    """The runs of one recorded incident in order: each run's event log, or its progress lines where the
    recording kept only those."""
    runs = sorted(glob.glob(os.path.join(INCIDENTS, scenario, "run*")), key=lambda p: int(p.rsplit("run", 1)[1]))
    return [
        os.path.join(run, "eventlog")
        if os.path.isdir(os.path.join(run, "eventlog"))
        else sorted(glob.glob(os.path.join(run, "progress.jsonl*")))[0]
        for run in runs
    ]


def replay_incidents(db: str) -> dict[str, dict]:
    """Replay every recorded incident into the history, one scenario at a time (its runs together, so a
    restart follows its previous run); returns the scenarios' truths."""
    from spark_state_observer.offline.replay import replay

    truths = incident_truths()
    for scenario in truths:
        result = replay(incident_recordings(scenario), _keep_everything(), history=db)
        if result.errors:
            raise RuntimeError(f"incident {scenario} did not replay cleanly: {result.errors[:3]}")
    return truths


def record_restore(workdir: str, history: str | None = None, name: str = "restore_demo") -> tuple[str, str]:
    """A real stateful query (``scripts/scenario_job.py``, local[2], RocksDB with changelog) run twice on one
    checkpoint, in two processes, with the observer writing its history (``history``, else a new file in
    ``workdir``): the second run restores the first's state. Returns (history, checkpoint root): the Restores page's prediction (the inspector on
    this checkpoint) and outcome (the restore measured in the history) are of the same query."""
    root = os.path.join(workdir, "checkpoints")
    history = history or os.path.join(workdir, "restore.db")
    for n, batches in enumerate((6, 4), start=1):
        subprocess.run(
            [sys.executable, os.path.join(ROOT, "scripts", "scenario_job.py"), "--checkpoint", os.path.join(root, name)]
            + ["--out", os.path.join(workdir, f"run{n}"), "--batches", str(batches), "--name", name, "--history", history],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=dict(
                os.environ,
                PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                # the job's retention must keep what the history already holds, however old
                SPARK_STATE_OBSERVER_HISTORY_MAX_AGE_SECONDS=str(10 * 365 * 86400.0),
                SPARK_STATE_OBSERVER_HISTORY_MAX_BYTES=str(float(1 << 40)),
            ),
            timeout=600,
        )
    return history, root


def build_history(db: str, batches: int, incidents: str | None = None) -> None:
    """The synthetic history plus every recorded fixture and incident, in one file. ``incidents``: a history of
    the incidents already replayed (``replay_incidents``), copied and added to instead of replaying them again."""
    import importlib.util

    from spark_state_observer.offline.replay import replay

    spec = importlib.util.spec_from_file_location("synthetic_history", os.path.join(ROOT, "scripts", "synthetic_history.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    if incidents:
        shutil.copyfile(incidents, db)
    module.build(db, batches, fresh=not incidents)
    runs = sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "*", "run*", "eventlog")))
    replay(runs, _keep_everything(), history=db)
    if not incidents:
        replay_incidents(db)


def query_ids(db: str) -> dict[str, str]:
    """Query name -> id (the newest query of a name)."""
    with sqlite3.connect(db) as conn:
        return {name: qid for qid, name in conn.execute("SELECT query_id, name FROM queries ORDER BY last_seen")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(history: str, roots: tuple[str, ...] = ()) -> Iterator[str]:
    """``spark-state-observer ui`` on a free loopback port; yields its base URL; stopped by its pid."""
    port = free_port()
    cli = shutil.which("spark-state-observer")
    command = [cli] if cli else [sys.executable, "-m", "spark_state_observer.cli"]
    command += ["ui", "--history", history, "--port", str(port)]
    for root in roots:
        command += ["--checkpoint-root", root]
    env = dict(
        os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), STREAMLIT_SERVER_FILE_WATCHER_TYPE="none"
    )  # a file saved meanwhile must not turn into a "rerun?" prompt
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/_stcore/health", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the browser did not start: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}") from None
                time.sleep(0.3)
        yield base
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def url(base: str, page: str, query_id: str | None = None, **extra: str) -> str:
    params = {"page": page, **({"query": query_id} if query_id else {}), **extra}
    return base + "/?" + urllib.parse.urlencode(params)


RUNNING = (
    "() => !document.querySelector('[data-testid=\"stStatusWidgetRunningIcon\"]') && "
    "!document.querySelector('[data-testid=\"stStatusWidgetRunningManIcon\"]')"
)


def settle(page: Any, heading: str, timeout_ms: int = 90_000, draw_ms: int = 1500) -> None:
    """Wait until the page's heading shows and Streamlit has finished running the script (its status
    widget shows up a moment after a run starts, so it is waited for twice), then ``draw_ms`` for the
    charts, which draw after the script ends (a screenshot needs them; a check of the page's text does not)."""
    page.get_by_role("heading", name=heading).first.wait_for(timeout=timeout_ms)
    for _ in range(2):
        page.wait_for_timeout(800)
        page.wait_for_function(RUNNING, timeout=timeout_ms)
    page.wait_for_timeout(draw_ms)


def full_height(page: Any, width: int, limit: int = 12000) -> None:
    """Make the viewport as tall as the page's content, at most ``limit`` (Streamlit scrolls inside its own
    container, so a 'full page' screenshot would stop at the window)."""
    height = page.evaluate("""() => Math.max(...['stMain', 'stAppViewContainer', 'stMainBlockContainer']
        .map(id => document.querySelector(`[data-testid="${id}"]`)).filter(Boolean).map(e => e.scrollHeight))""")
    page.set_viewport_size({"width": width, "height": int(min(max(height + 40, 600), limit))})
    page.wait_for_timeout(1500)


def visible_text(page: Any) -> str:
    return page.locator("section.stMain, [data-testid='stMain']").first.inner_text()


HEADINGS = {
    "Applications": "Applications",
    "Queries": "Queries",
    "Query drilldown": "Query ",
    "Restores": "Restores and reloads",
    "Partitions": "Partitions of",
    "Placement": "Placement of",
    "Runs": "Runs of",
    "Checkpoint": "Checkpoint",
    "State contents": "State contents",
}


def shrink(path: str) -> int:
    """Re-encode a screenshot with a palette (a UI has few colours) until it is under MAX_BYTES; its size."""
    from PIL import Image

    with Image.open(path) as image:
        rgb = image.convert("RGB")
    for colors in (256, 128, 64):
        rgb.quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)
        if os.path.getsize(path) <= MAX_BYTES:
            break
    return os.path.getsize(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", default=None, help="an existing history (else one is built)")
    parser.add_argument("--batches", type=int, default=20_000)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "screenshots"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--checkpoint-root", default=None, help="with --history: the checkpoint root of its restore_demo query")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    history, root = args.history, args.checkpoint_root
    if history is None:
        workdir = tempfile.mkdtemp(prefix="sso-shots-")
        history = os.path.join(workdir, "history.db")
        build_history(history, args.batches)
        _, root = record_restore(workdir, history)  # a real checkpoint, and its restore in the same history
    ids = query_ids(history)
    os.makedirs(args.out, exist_ok=True)
    total = 0
    with serve(history, (root,) if root else ()) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": args.width, "height": 900})
        for file, name, query in SHOTS:
            page.set_viewport_size({"width": args.width, "height": 900})
            page.goto(url(base, name, ids.get(query) if query else None), wait_until="domcontentloaded")
            settle(page, HEADINGS[name])
            full_height(page, args.width, MAX_HEIGHT)
            path = os.path.join(args.out, file + ".png")
            page.screenshot(path=path, full_page=True)
            size = shrink(path)
            total += size
            print(f"{path}: {size / 1000:.0f} kB")
        browser.close()
    print(f"{len(SHOTS)} pictures, {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
