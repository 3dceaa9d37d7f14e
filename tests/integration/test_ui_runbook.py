"""The runbook page of the state browser in a real headless Chromium: the verdicts' links (``?section=``) and the
alerts' (``#anchor``) open the page scrolled to their section."""

from __future__ import annotations

import pytest

from conftest import REQUIRE_REAL, need
from incident_truth import screenshots_module

pytestmark = pytest.mark.slow
shots = screenshots_module()
DONE = "[data-testid='stApp'][data-test-script-state='notRunning']"
IN_VIEW = "id => { const e = document.getElementById(id); if (!e) return false; const r = e.getBoundingClientRect(); return r.top >= 0 && r.top < window.innerHeight / 2; }"


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    chromium = need("chromium")
    if REQUIRE_REAL:
        from playwright.sync_api import sync_playwright
    else:
        sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    history = str(tmp_path_factory.mktemp("runbook") / "empty.db")
    with shots.serve(history) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=shots.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        yield base, page
        browser.close()


def _open(page, url: str) -> None:
    page.goto(url, wait_until="domcontentloaded")
    page.get_by_role("heading", name="Runbook").first.wait_for(timeout=90_000)
    page.wait_for_function(f'() => !!document.querySelector("{DONE}")', timeout=90_000)


@pytest.mark.parametrize(
    ("address", "anchor"),
    [
        ("runbook?section=sparkstatepartitionsmigrating", "sparkstatepartitionsmigrating"),  # a verdict's link
        ("runbook?section=executor-lost", "executor-lost"),  # the section with no alert of its own
        ("runbook#sparkstateskewed", "sparkstateskewed"),  # an alert's runbook_url under the browser's address
    ],
)
def test_a_runbook_link_opens_its_section_in_view(browser_page, address: str, anchor: str) -> None:
    base, page = browser_page
    _open(page, f"{base}/{address}")
    page.wait_for_function(IN_VIEW, arg=anchor, timeout=30_000)
    heading = page.locator(f"[id='{anchor}']")
    assert heading.count() == 1
    # far down the page: in view because the page scrolled there, not because it is at the top
    scrolled = "id => { let e = document.getElementById(id), most = window.scrollY; for (; e; e = e.parentElement) most = Math.max(most, e.scrollTop); return most; }"
    assert page.evaluate(scrolled, anchor) > 2000
    text = shots.visible_text(page)
    assert "**Do**" not in text and "Do:" in text  # rendered Markdown, not the raw file
    assert "Traceback" not in text


def test_an_unknown_section_says_so(browser_page) -> None:
    base, page = browser_page
    _open(page, f"{base}/runbook?section=no-such-alert")
    assert "No runbook section by that name" in shots.visible_text(page)
