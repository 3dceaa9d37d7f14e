"""The browser in a real Chromium: from the queries page to a drilldown."""

from __future__ import annotations

import os
import sys

import pytest
from test_ui import RESTART, restart_db  # noqa: F401  (restart_db: the module's fixture)

from conftest import (
    REQUIRE_REAL,
    ROOT,
    Server,
    free_port,
    need,
    progress_lines,
)


@pytest.mark.slow
def test_browser_navigates_from_queries_to_a_drilldown(restart_db, tmp_path) -> None:
    chromium = need("chromium")
    if REQUIRE_REAL:
        from playwright.sync_api import sync_playwright
    else:
        sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    port = free_port()
    # this tree's cli (an installed console script may belong to another checkout)
    server = Server(
        [sys.executable, "-m", "observer.cli", "ui", "--history", restart_db, "--port", str(port)],
        f"http://127.0.0.1:{port}/_stcore/health",
        cwd=ROOT,
    )
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium,
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--no-first-run",
                ],
            )
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/", wait_until="networkidle")
            page.get_by_role("heading", name="Queries").wait_for(timeout=60_000)
            page.get_by_text("1 stopped").first.wait_for(timeout=60_000)
            page.wait_for_timeout(1500)
            page.screenshot(path=str(tmp_path / "queries.png"), full_page=True)
            page.get_by_role("button", name="Open the drilldown of").click()
            name = progress_lines(RESTART[0])[0]["name"]
            page.get_by_role("heading", name=f"Query {name}").wait_for(timeout=60_000)
            page.get_by_text("Batch phases (stacked)").first.wait_for(timeout=60_000)
            page.wait_for_timeout(2000)
            assert "page=Query+drilldown" in page.url or "page=Query%20drilldown" in page.url
            page.screenshot(path=str(tmp_path / "drilldown.png"), full_page=True)
            browser.close()
    finally:
        server.stop()
    assert server.proc.returncode is not None
    for shot in ("queries.png", "drilldown.png"):
        assert os.path.getsize(tmp_path / shot) > 20_000  # the README's pictures come from scripts/screenshots.py
