"""The hostile offline corpus under the real tools: promtool and Prometheus take the exported durations, selectors and rules
as the observer does, and no page element is made from data in a real Chromium."""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from test_hostile_offline import DURATIONS, _load, _log_with_gap, _write, selector_cases

from conftest import REQUIRE_REAL, need
from spark_state_observer.mixin.config import MixinConfig, MixinConfigError, load_config
from spark_state_observer.mixin.prometheus_text import MAX_DURATION_MS
from spark_state_observer.mixin.rules import rule_files
from spark_state_observer.offline import backtest as bt
from spark_state_observer.offline.backtest import formats, settings


def _rules_out(config: MixinConfig, out: str) -> list[str]:
    os.makedirs(out)
    paths = []
    for name, text in rule_files(config).items():
        path = os.path.join(out, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        paths.append(path)
    return paths


def _promtool_check(paths: list[str]) -> dict[str, bool]:
    """One real ``promtool check rules`` over many files: file -> whether promtool accepted it."""
    promtool = need("promtool")
    done = subprocess.run([promtool, "check", "rules", *paths], capture_output=True, text=True, timeout=600)
    verdicts: dict[str, bool] = {}
    current = None
    for line in (done.stdout + "\n" + done.stderr).splitlines():
        if line.startswith("Checking "):
            current = line[len("Checking ") :].strip()
        elif current is not None and current not in verdicts and ("SUCCESS" in line or "FAILED" in line):
            verdicts[current] = "SUCCESS" in line
    for path in paths:  # a file promtool could not parse at all is reported on stderr only
        verdicts.setdefault(path, False)
    return verdicts


def test_durations_are_taken_exactly_when_prometheus_takes_them(tmp_path) -> None:
    """``for`` and the monitors' scrape interval: accepted ones pass promtool, refused ones promtool refuses too."""
    accepted: dict[str, str] = {}
    probes: dict[str, tuple[str, bool]] = {}
    for n, value in enumerate(DURATIONS):
        outcome = _load(_write(tmp_path, n, yaml.safe_dump({"for_durations": {"SparkStateUnbounded": value}})))
        # a grace and retention long enough for any scrape interval: only the grammar decides here
        fleet = {"grace_seconds": 1e15, "history_max_age_seconds": 1e15, "query_status_retention_days": 1e9}
        monitor = _load(_write(tmp_path, 1000 + n, yaml.safe_dump({"kubernetes": {"scrape_interval": value}, "fleet": fleet})))
        assert isinstance(outcome, MixinConfigError) == isinstance(monitor, MixinConfigError), value
        probe = os.path.join(str(tmp_path), f"probe{n}.yml")
        with open(probe, "w") as f:
            yaml.safe_dump({"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "for": value}]}]}, f)
        probes[probe] = (value, isinstance(outcome, MixinConfig))
        if isinstance(outcome, MixinConfig):
            seconds = outcome.for_minutes("SparkStateUnbounded") * 60
            assert 0 <= seconds * 1000 <= MAX_DURATION_MS
            accepted.update(dict.fromkeys(_rules_out(outcome, os.path.join(str(tmp_path), f"out{n}")), value))
        else:
            assert "SparkStateUnbounded" in str(outcome)
    if not shutil.which("promtool") and not REQUIRE_REAL:
        pytest.skip("promtool is not installed")
    verdicts = _promtool_check([*accepted, *probes])
    assert all(verdicts[p] for p in accepted), [v for p, v in accepted.items() if not verdicts[p]]
    for probe, (value, ours) in probes.items():
        assert verdicts[probe] == ours, f"for {value!r}: promtool {'takes' if verdicts[probe] else 'refuses'} it, the mixin does not agree"


def test_selectors_and_label_values_export_rules_promtool_accepts_or_are_refused(tmp_path) -> None:
    """Each case alone decides acceptance; the accepted selectors are then exported eight at a time (their
    matchers joined into one selector) and every exported rule file goes through one promtool run."""
    cases = selector_cases()
    taken: dict[str, list[str]] = {"selector": [], "observer_selector": []}
    others: list[MixinConfig] = []
    for n, case in enumerate(cases):
        outcome = _load(_write(tmp_path, n, json.dumps(case, ensure_ascii=False), ".json"))
        if isinstance(outcome, MixinConfigError):
            assert str(outcome) and "\n" not in str(outcome), case
            continue
        assert "\n" not in outcome.selector + outcome.observer_selector
        key = next(iter(case))
        if key in taken and str(case[key]).strip():
            taken[key].append(str(case[key]))
        else:
            others.append(outcome)
    assert len(taken["selector"]) >= 40 and len(taken["observer_selector"]) >= 40 and len(others) >= 10
    exported: list[str] = []
    for key, matchers in taken.items():
        for i in range(0, len(matchers), 8):
            joined = load_config(_write(tmp_path, 20_000 + i, json.dumps({key: ", ".join(matchers[i : i + 8])}), ".json"))
            exported += _rules_out(joined, os.path.join(str(tmp_path), f"{key}{i}"))
    for n, config in enumerate(others):
        exported += _rules_out(config, os.path.join(str(tmp_path), f"other{n}"))
    if not shutil.which("promtool") and not REQUIRE_REAL:
        pytest.skip("promtool is not installed")
    verdicts = _promtool_check(exported)
    assert all(verdicts.values()), [p for p, ok in verdicts.items() if not ok][:5]


@pytest.mark.slow
def test_two_batches_a_year_apart_backtest_in_minutes_of_scrapes_and_say_so(tmp_path) -> None:
    need("prometheus")
    need("promtool")
    rules = [os.path.join(os.path.dirname(__file__), "..", "..", "alerts", name) for name in ("recording.yml", "rules.yml")]
    report = bt.run_backtest([_log_with_gap(tmp_path, 365 * 86400.0, "year")], rules, work_dir=str(tmp_path / "bt"))
    assert report.scrapes <= 2 * (settings.DEFAULT_IDLE_KEEP / settings.DEFAULT_SCRAPE_INTERVAL + 2)
    assert len(report.gaps) == 1 and report.gaps[0][1] - report.gaps[0][0] > 364 * 86400
    assert os.path.getsize(tmp_path / "bt" / "series.om") < 20 * 1024 * 1024
    table = formats.render_table(report)
    assert "Idle gaps compressed: 1 gap(s)" in table and "no alert is evaluated inside them" in table
    assert "Idle gaps compressed" in html.unescape(formats.render_html(report))
    # the stall after the first batch is evaluated in its own stretch, and ends with it
    stalls = [f for f in report.firings if f.alert == "SparkStreamingQueryStalled"]
    assert stalls and all(f.resolved_at is not None or f.pending_at >= report.gaps[0][1] for f in stalls)


# --- the browser in Chromium ------------------------------------------------------------------------------
PAGES = ["Applications", "Queries", "Query drilldown", "Restores", "Partitions", "Placement", "Runs", "Checkpoint", "State contents"]


FROM_DATA = """(host) => {
    const found = [];
    // Vega draws an empty <form class="vega-bindings"> per chart (for widgets bound to its parameters): not from data
    const elements = ['meta[http-equiv]', 'form:not(.vega-bindings)', 'form.vega-bindings *', 'iframe', 'object', 'embed', 'input[type=password]'];
    for (const selector of elements) {
        document.querySelectorAll(selector).forEach(() => found.push(selector));
    }
    document.querySelectorAll('script').forEach(s => { if (s.textContent.includes('__hostile')) found.push('script from data'); });
    for (const el of document.querySelectorAll('*')) {
        for (const a of el.attributes) {
            const risky = ['href', 'src', 'action', 'formaction', 'srcdoc', 'data', 'content', 'poster', 'background', 'xlink:href'];
            if ((risky.includes(a.name) || a.name.startsWith('on')) && (a.value.includes(host) || a.value.includes('__hostile'))) {
                found.push(`${el.tagName.toLowerCase()} ${a.name}=${a.value.slice(0, 80)}`);
            }
        }
    }
    if (window.__hostile) found.push('a script from data ran');
    return found;
}"""


def _settle(page: Any, shots: Any, heading: str) -> None:
    """The page's heading is shown and Streamlit's script run is over (text from data is drawn by then;
    ``shots.settle`` also waits for the charts, which draw no text from data as markup)."""
    page.get_by_role("heading", name=heading).first.wait_for(timeout=90_000)
    for _ in range(2):
        page.wait_for_timeout(400)
        page.wait_for_function(shots.RUNNING, timeout=90_000)
    page.wait_for_timeout(500)


@pytest.mark.slow
def test_no_element_is_made_from_data_on_any_page_in_chromium(tmp_path) -> None:
    import hostile_history

    from incident_truth import screenshots_module

    chromium = need("chromium")
    if REQUIRE_REAL:
        from playwright.sync_api import sync_playwright
    else:
        sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    shots = screenshots_module()
    db = str(tmp_path / "hostile.db")
    ids = hostile_history.build(db, str(tmp_path / "logs"))
    visits = [(page, ids["crash_loop_503"]) for page in PAGES] + [("Placement", ids["executor_loss"])]
    with shots.serve(db) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=shots.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            for name, qid in visits:
                page.goto(shots.url(base, name, qid), wait_until="domcontentloaded")
                _settle(page, shots, shots.HEADINGS[name])
                assert page.url.startswith(base), (name, page.url)  # no meta refresh took the page away
                assert page.evaluate(FROM_DATA, hostile_history.HOSTILE_HOST) == [], name
                text = shots.visible_text(page)
                assert "Traceback" not in text and "StreamlitAPIException" not in text, name
                if name in ("Query drilldown", "Restores", "Runs", "Partitions", "Placement"):
                    assert hostile_history.QUERY_NAME in text, (name, text[:500])  # shown literally
                if name == "Query drilldown":
                    assert "org.apache.spark.SparkException: <" in text and qid in text, text[:800]
        finally:
            browser.close()
