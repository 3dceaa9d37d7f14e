"""Issue 51's incident shapes in a real headless Chromium, read as a person reads them: two executor losses
(each with its own time and reload on the Queries page) and a Kafka restart onto a topic grown from 4 to 6
partitions (its verdict names the backlog and the partitions; the drilldown has its Kafka offsets). The
histories are replayed from the recorded event logs under tests/fixtures/issue51."""

from __future__ import annotations

import glob
import os

import pytest
from test_ui_browser import open_page

from conftest import FIXTURES, REQUIRE_REAL, eventlog_dir, need, progress_lines
from incident_truth import screenshots_module
from spark_state_observer.offline.replay import replay

pytestmark = pytest.mark.slow
ISSUE51 = os.path.join(FIXTURES, "issue51")
shots = screenshots_module()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium = need("chromium")
    if REQUIRE_REAL:
        from playwright.sync_api import sync_playwright
    else:
        sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    db = str(tmp_path_factory.mktemp("issue51") / "h.db")
    runs = [glob.glob(os.path.join(ISSUE51, "executor_loss_twice", "run*"))[0]]
    runs += sorted(glob.glob(os.path.join(ISSUE51, "kafka_restart_grown", "run*")))
    replay([eventlog_dir(r) for r in runs], history=db)
    with shots.serve(db) as base, sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=chromium, args=shots.CHROMIUM_ARGS)
        yield base, launched.new_page(viewport={"width": 1400, "height": 900})
        launched.close()


def test_the_queries_page_names_both_executor_losses_each_with_its_reload(browser) -> None:
    base, page = browser
    text = open_page(base, page, "Queries")
    assert "Executor 1 lost at " in text and "Executor 2 lost at " in text
    line = next(line for line in text.splitlines() if "Executor 1 lost at " in line)
    assert line.count("; restore ") == 2 and "Executor 2 lost at " in line  # one line, each loss its own cost


def test_a_kafka_restart_onto_a_grown_topic_in_the_drilldown(browser) -> None:
    base, page = browser
    run = sorted(glob.glob(os.path.join(ISSUE51, "kafka_restart_grown", "run*")))[1]
    qid = progress_lines(run)[0]["id"]
    text = open_page(base, page, "Query drilldown", qid)
    assert "Kafka backlog " in text and " records at restart" in text and "events partitions 4 → 6" in text
    assert "Kafka offsets" in text
