"""A hostile corpus for the offline parts (issue 23): mixin configurations, backtest inputs and the state
browser's formatting, generated, plus the browser in a real headless Chromium on a history whose every
text field holds markup.

Every generated case must end in the part's own clear error (``MixinConfigError``, ``BacktestError``) or
in a valid result: never another exception, never a message that prints a value whole, never an
exported rule that promtool refuses (one real ``promtool check rules`` run checks every accepted
configuration, and that Prometheus refuses the durations the configuration refuses). ``corpus_sizes``
says how many cases each part has; docs/hostile-offline.md records the count.
"""

from __future__ import annotations

import dataclasses
import glob
import html
import itertools
import json
import math
import os
import re
import resource
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import FIXTURES, REQUIRE_REAL
from spark_state_observer.browser import fmt
from spark_state_observer.browser.parts import verdicts as verdict_view
from spark_state_observer.browser.verdict import Verdict
from spark_state_observer.mixin.config import MixinConfig, MixinConfigError, Thresholds, load_config
from spark_state_observer.offline import backtest as bt
from spark_state_observer.offline.backtest import recording, settings

MESSAGE_LIMIT = 600  # characters: an error message names the key and shows a bounded excerpt


# --- mixin configurations --------------------------------------------------------------------------------
THRESHOLDS = [f.name for f in dataclasses.fields(Thresholds)]
ODD_NUMBERS = [
    ".inf",
    "-.inf",
    ".nan",
    ".NaN",
    "1.0e+400",
    "-1.0e+400",
    "123456789012345678901234567890",
    "1.0e+15",
    "1.0e+16",
    "-1",
    "-0.0",
    "0",
    "1.5",
    "3",
    "true",
    "'5'",
    "null",
    "[1]",
    "{a: 1}",
    "0x10",
    "0o17",
    "1_000",
    "9" * 5000,
    "2.5e-300",
]
DURATIONS = [
    "0",
    "0s",
    "0m",
    "10m",
    "1h30m",
    "90s",
    "1y",
    "292y",
    "293y",
    "1y2w3d4h5m6s7ms",
    "106751d23h47m16s854ms",
    "106751d23h47m16s855ms",
    "9223372036854ms",
    "9223372036855ms",
    "12345678901234567890m",
    "99999999999999999999999999s",
    "",
    "1m1m",
    "1s1m",
    "1d1y",
    "1.5m",
    "-1m",
    "1M",
    "1 m",
    " 1m",
    "1m ",
    "1e3s",
    "PT1M",
    "m",
    "10",
    "1ms1s",
    "1µs",
    "1ns",
    "٣m",
    "1h\n",
    "1h\\n",
    "1h'",
    '1h"',
    "{{ 1m }}",
]
VALUES = [
    "prod",
    'pr"od',
    "pr\\\\od",
    "a\\nb",
    "a\\tb",
    "\\u00e9t\\u00e9",
    "\\x41",
    "\\101",
    "\\q",
    "\\.",
    "\\x4",
    "\\u12",
    "\\xff",
    "\\U0010FFFF",
    "\\U00110000",
    "\\ud800",
    "é ü 名",
    "{{ $labels.x }}",
    "}",
    "a,b",
    "",
    "x" * 300,
]
REGEXES = [".*", "a|b", "(", "[a-", "a{2,1}", "(?=x)", "(a)\\\\1", "a++", "\\\\d+", "[[:alpha:]]", "(?i)x", "\\\\pL"]
LABELS = ["env", "_x", "9env", "en-v", "__name__", "é", ""]


def _selectors() -> Iterator[str]:
    for label, op, value in itertools.product(LABELS[:2] + LABELS[2:5], ("=", "!="), VALUES):
        yield f'{label}{op}"{value}"'
    for label, op, value in itertools.product(("env", "job"), ("=~", "!~"), REGEXES):
        yield f'{label}{op}"{value}"'
    yield 'env="a" , team=~"b.*", zone!="c"'
    yield 'env="a",'
    yield 'env="a" team="b"'
    yield "env=prod"
    yield 'env="a\nb"'
    yield 'env="a\tb"'
    yield 'env="unterminated'
    yield "ä" * 5000


def _bomb(breadth: int, depth: int, under: str) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * breadth)}]"]
    for level in range(1, depth):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * breadth)}]")
    return "\n".join(lines) + f"\n{under}: *l{depth - 1}\n"


def yaml_bombs() -> list[str]:
    docs = []
    for breadth, depth in itertools.product(range(2, 10), range(3, 13)):
        docs.append(_bomb(breadth, depth, "thresholds"))
    for under in ("selector", "static_labels", "test_labels", "for_durations"):
        docs.append(_bomb(9, 9, under))
    docs.append("a: &a [*a]\n")
    docs.append("thresholds: &t {restore_seconds: *t}\n")
    for depth in (31, 33, 100, 1000, 5000):
        docs.append("x: " + "[" * depth + "]" * depth + "\n")
        docs.append("".join("  " * i + f"k{i}:\n" for i in range(depth)) + "  " * depth + "v\n")
    for aliases in (99, 101, 500):
        docs.append("base: &b x\nlist: [" + ", ".join(["*b"] * aliases) + "]\n")
    merge = "m0: &m0 {a: 1, b: 2, c: 3, d: 4}\n" + "".join(
        f"m{i}: &m{i}\n  <<: [{', '.join([f'*m{i - 1}'] * 4)}]\n  k{i}: {i}\n" for i in range(1, 12)
    )
    docs.append(merge)
    docs.append("x: '" + "y" * (300 * 1024) + "'\n")
    docs.append("a: 1\n" * 5)
    docs.append("\x00\x01\x02")
    docs.append("a: !!python/object/apply:os.system ['true']\n")
    docs.append("a: !!binary " + "QUJD" * 10 + "\n")
    return docs


def _threshold_docs() -> Iterator[tuple[str, str]]:
    for name, value in itertools.product(THRESHOLDS, ODD_NUMBERS):
        yield name, f"thresholds:\n  {name}: {value}\n"


def _write(tmp_path: Any, n: int, text: str | bytes, suffix: str = ".yaml") -> str:
    path = os.path.join(str(tmp_path), f"c{n}{suffix}")
    with open(path, "wb") as f:
        f.write(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    return path


def _load(path: str) -> MixinConfig | MixinConfigError:
    """The configuration, or its clear error; any other exception fails the test where it happens."""
    try:
        return load_config(path)
    except MixinConfigError as exc:
        assert len(str(exc)) <= MESSAGE_LIMIT, str(exc)[:200]
        return exc


def test_yaml_bombs_and_odd_documents_are_refused_in_bounded_memory(tmp_path) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    docs = yaml_bombs()
    outcomes = [_load(_write(tmp_path, n, doc)) for n, doc in enumerate(docs)]
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 150, f"the bombs took {grown_mb:.0f} MB"
    refused = [o for o in outcomes if isinstance(o, MixinConfigError)]
    assert len(refused) == len(docs), [d[:60] for d, o in zip(docs, outcomes) if not isinstance(o, MixinConfigError)]
    assert any("aliases are expanded" in str(o) for o in refused) and any("recursive" in str(o) for o in refused)
    assert any("nested deeper" in str(o) for o in refused) and any("more than 100 aliases" in str(o) for o in refused)
    # JSON: deep nesting and a lone surrogate are refused clearly too
    for n, text in enumerate(["[" * 100000 + "]" * 100000, '{"selector": "\\ud800"}', '{"thresholds": {"restore_seconds": 1e999}}']):
        assert isinstance(_load(_write(tmp_path, 10_000 + n, text, ".json")), MixinConfigError)


def test_odd_threshold_values_are_numbers_or_clear_errors(tmp_path) -> None:
    cases = list(_threshold_docs())
    for n, (name, doc) in enumerate(cases):
        outcome = _load(_write(tmp_path, n, doc))
        if isinstance(outcome, MixinConfigError):  # names the key, or says the document is not YAML at all
            assert name in str(outcome) or "is not valid YAML" in str(outcome), (doc[:80], str(outcome))
        else:
            value = getattr(outcome.thresholds, name)
            assert math.isfinite(value) and 0 <= value <= 1e15, (doc[:80], value)


def selector_cases() -> list[dict[str, Any]]:
    """Selectors, observer selectors, test and Kubernetes labels, namespaces, runbook URLs, group prefixes, label names."""
    cases: list[dict[str, Any]] = [{"selector": s} for s in _selectors()]
    cases += [{"observer_selector": s} for s in _selectors() if "job" in s or "env" in s]
    cases += [{"observer_selector": ""}, {"observer_selector": "   "}]
    cases += [{"test_labels": {name: value}} for name, value in itertools.product(LABELS, ['a"b', "a\\b", "a\nb", "é", "{{x}}"])]
    cases += [
        {"kubernetes": {key: {name: value}}}
        for key, name, value in itertools.product(
            ("labels", "watcher_selector", "driver_selector"),
            ("app", "example.com/app", "-bad", "a" * 64, "Bad/x"),
            ("x", "a b", 'a"b', "a\nb", "-x", "y" * 64, ""),
        )
    ]
    cases += [{"kubernetes": {"namespace": ns}} for ns in ("monitoring", "Mon", "a_b", "-a", "a" * 64, "")]
    cases += [{"runbook_base_url": url} for url in ("https://x/{{ .Foo }}", "https://x/\"<y>'", "https://x/\n")]
    cases += [
        {"expected_running_selector": m}
        for m in ('query="orders"', 'query=~"orders|pay.*"', 'query=~"("', "x", "{{x}}", 'query="a\nb"', 'query=~"(?=x)"')
    ]
    cases += [{"runbook_base_url": url} for url in ("http://127.0.0.1:8501/runbook", "http://localhost/", "")]
    cases += [{"rule_group_prefix": p} for p in ("", "  ", 'a"b', "<x>", "名前")]
    cases += [{"app_label": label} for label in LABELS] + [{"static_labels": [label]} for label in LABELS]
    return cases


# --- backtest inputs --------------------------------------------------------------------------------------
INTERVAL_VALUES: list[Any] = [
    0,
    -1,
    -0.0,
    0.5,
    0.999,
    1,
    1.0,
    15,
    86400,
    86400.001,
    1e300,
    float("nan"),
    float("inf"),
    float("-inf"),
    "15",
    "abc",
    "",
    None,
    [1],
    10**400,
    True,
    2**63,
    5e-324,
]


def test_backtest_settings_are_in_range_or_clear_errors() -> None:
    cases = [
        (name, bounds, value)
        for name, bounds in (
            ("--scrape-interval", settings.INTERVAL_RANGE),
            ("--eval-interval", settings.INTERVAL_RANGE),
            ("--tail", settings.TAIL_RANGE),
            ("--idle-keep", settings.IDLE_KEEP_RANGE),
            ("--max-scrapes", settings.MAX_SCRAPES_RANGE),
        )
        for value in INTERVAL_VALUES
    ]
    cases += [("--scrape-interval", settings.INTERVAL_RANGE, v / 7) for v in range(-50, 100)]
    for name, bounds, value in cases:
        try:
            got = settings.check_setting(name, value, bounds)
        except bt.BacktestError as exc:
            assert str(exc).startswith(name) and len(str(exc)) < 200
        else:
            assert math.isfinite(got) and bounds[0] <= got <= bounds[1]


RULE_SHAPES = [
    "groups: [[1]]\n",
    "groups: [{rules: [[1]]}]\n",
    "groups: [{rules: [{alert: A}]}]\n",
    "groups: [{rules: [{alert: A, expr: up, for: ten}]}]\n",
    "groups: [{rules: [{alert: A, expr: up, labels: [1]}]}]\n",
    "groups: [{rules: [{record: r}]}]\n",
    "groups: {}\n",
    "\xff\xfe",
]


def test_hostile_rule_files_are_clear_errors(tmp_path) -> None:
    """``backtest --rules``: the same bombs as a rule file, and shapes that are not a rule file's."""
    for n, doc in enumerate([*yaml_bombs(), *RULE_SHAPES]):
        path = _write(tmp_path, n, doc.encode("latin-1") if doc.startswith("\xff") else doc, ".yml")
        with pytest.raises(bt.BacktestError) as refused:
            bt.load_rules([path])
        assert len(str(refused.value)) < MESSAGE_LIMIT


def _log_with_gap(tmp_path: Any, gap: float, name: str) -> str:
    """A real recorded log cut to its application start, query start and two batches, the second moved
    ``gap`` seconds after the first (the shape of two batches a year apart)."""
    import datetime as dt

    (source,) = glob.glob(os.path.join(FIXTURES, "rocksdb_plain_log", "run*", "eventlog", "*", "*"))
    with open(source) as f:
        lines = f.read().splitlines()
    start = next(line for line in lines if '"SparkListenerApplicationStart"' in line)
    query = next(line for line in lines if "QueryStartedEvent" in line)
    first, second = [json.loads(line) for line in lines if "QueryProgressEvent" in line][:2]
    stamp = dt.datetime.fromisoformat(first["progress"]["timestamp"].replace("Z", "+00:00")) + dt.timedelta(seconds=gap)
    second["progress"]["timestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    path = os.path.join(str(tmp_path), name)
    with open(path, "w") as f:
        f.write("\n".join([start, query, json.dumps(first), json.dumps(second)]) + "\n")
    return path


IDLE_KEEP = 300.0
GAPS = [0.0, 10.0, 59.0, 299.0, 301.0, 400.0, 3600.0, 86400.0, 30 * 86400.0, 365 * 86400.0, 10 * 365 * 86400.0]


def test_scrapes_stay_bounded_whatever_the_gap_between_events(tmp_path) -> None:
    idle_keep = IDLE_KEEP
    for n, (gap, interval) in enumerate(itertools.product(GAPS, (5.0, 15.0, 60.0))):
        log = _log_with_gap(tmp_path, gap, f"log{n}")
        om = os.path.join(str(tmp_path), f"s{n}.om")
        recorder, _signals, events, errors = recording.record_series([log], om, interval, idle_keep=idle_keep)
        assert events == 3 and not errors  # the streaming events: the query's start and its two batches
        bound = 2 * (idle_keep / interval + 2)  # after each of the two batches, at most idle_keep of scrapes
        assert recorder.scrapes <= bound, (gap, interval, recorder.scrapes)
        if gap <= idle_keep or gap > idle_keep + 2 * interval:  # in between, the next scrape may fall right after
            assert bool(recorder.gaps) == (gap > idle_keep), (gap, interval, recorder.gaps)
        if recorder.gaps:
            skipped = sum(b - a for a, b in recorder.gaps)
            assert skipped >= gap - idle_keep - 2 * interval
        assert os.path.getsize(om) < 50 * 1024 * 1024
    capped, *_ = recording.record_series(
        [_log_with_gap(tmp_path, 3000.0, "capped")], os.path.join(str(tmp_path), "c.om"), 5.0, max_scrapes=7
    )
    assert capped.scrapes == 7 and capped.capped_at is not None


# --- the browser's formatting -----------------------------------------------------------------------------
BASE_PAYLOADS = [
    '<meta http-equiv="refresh" content="0;url=http://127.0.0.1:9/">',
    '<form action="http://127.0.0.1:9/"><input type="password"></form>',
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<iframe src=http://127.0.0.1:9/></iframe>",
    "![img](http://127.0.0.1:9/i.png)",
    "[link](http://127.0.0.1:9/)",
    "[ref][r]\n\n[r]: http://127.0.0.1:9/",
    "<http://127.0.0.1:9/>",
    "http://127.0.0.1:9/ www.example.com user@example.com",
    "&lt;b&gt; &#60;i&#62; &amp; &copy;",
    ":red[x] :material/home: :smile:",
    "$x^2$ $$y$$",
    "**b** *i* _u_ ~~s~~ `c` ``d``",
    "# h1",
    "> quote",
    "- item\n* item\n1. item",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "```\ncode\n```",
    "    indented",
    "line\\\nbreak  \nhard",
    "\\<escaped\\>",
    "`` ` ``",
    "a" + "`" * 7 + "b",
    "\x00\x01\x1b[31mred\x1b[0m\x7f",
    "\u202eevil\u202c \u2028 \u2029",
    "名前 émoji 😀",
    "<!-- comment -->",
    "<![CDATA[x]]>",
    "<?php ?>",
    "javascript:alert(1)",
    "[x](javascript:alert(1))",
    "<a href='javascript:alert(1)'>x</a>",
    "\t\ttabs",
    "trailing\\",
    "%3Cscript%3E",
    "{{ $labels.x }}",
    "' OR 1=1 --",
    "x" * 5000,
    "",
]


def payloads() -> list[str]:
    out = []
    for p in BASE_PAYLOADS:
        out += [p, f"prefix {p}", f"{p} suffix", p + p, f"\n{p}\n", p.upper()]
    for a, b in zip(BASE_PAYLOADS, BASE_PAYLOADS[1:]):
        out += [f"{a}\n\n{b}", f"{a}{b}"]
    return out


_ALLOWED_TAGS = re.compile(r"</?(p|code|strong)>")


def _markdown() -> Any:
    if not REQUIRE_REAL:
        pytest.importorskip("markdown_it")
    from markdown_it import MarkdownIt

    return MarkdownIt("gfm-like")


# what remark-gfm (Streamlit's markdown) links in plain text, and Streamlit's icon shortcodes
LINKED_BY_STREAMLIT = [
    re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.IGNORECASE | re.ASCII),
    re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.ASCII),
    re.compile(r":material/\w+:"),
]


def test_data_formatted_for_markdown_renders_as_its_own_text() -> None:
    """Through a real CommonMark + GFM parser: one paragraph of text and code spans, nothing else, showing
    the text itself; no URL, address or icon shortcode left in plain text for Streamlit's plugins to link."""
    md = _markdown()
    cases = payloads()
    for p in cases:
        flat = fmt.one_line(p).strip()
        assert "\n" not in fmt.md(p) and "\n" not in fmt.code(p)
        if not flat:
            continue
        rendered = md.render(fmt.md(p)).strip()
        assert rendered.startswith("<p>") and rendered.endswith("</p>"), (p, rendered)
        inner = rendered[3:-4]
        assert set(re.findall(r"<[^>]*>", inner)) <= {"<code>", "</code>"}, (p, rendered)
        assert html.unescape(re.sub(r"</?code>", "", inner)) == flat, (p, rendered)
        plain = html.unescape(re.sub(r"<code>.*?</code>", " ", inner))
        assert not any(pattern.search(plain) for pattern in LINKED_BY_STREAMLIT), (p, plain)
        code = md.render(fmt.code(p)).strip()
        assert code.startswith("<p><code>") and code.endswith("</code></p>") and code.count("<") == 4, (p, code)
        assert html.unescape(code[9:-11]) == fmt.one_line(p), (p, code)


def test_a_verdict_line_is_its_text_and_the_runbook_link_only() -> None:
    md = _markdown()
    runbook = "https://example.com/runbook.md"
    cases = payloads()
    for p in cases:
        v = Verdict("failed", f"Failed at 10:00: {p}", 0.0, p, p, p)
        rendered = md.render(verdict_view.line(v, runbook)).strip()
        tags = re.findall(r"<[^>]*>", rendered)
        allowed = {"<p>", "</p>", "<strong>", "</strong>", "<code>", "</code>", f'<a href="{runbook}#{v.anchor}">', "</a>"}
        assert set(tags) <= allowed, (p, tags)
        assert fmt.one_line(f"Failed at 10:00: {p}").strip() in html.unescape(re.sub(r"<[^>]*>", "", rendered)), p


def corpus_sizes() -> dict[str, int]:
    """Generated cases per part (the Chromium page test aside: its pages and payloads are in hostile_history)."""
    return {
        "mixin: YAML bombs and odd documents": len(yaml_bombs()) + 3,
        "mixin: thresholds": len(list(_threshold_docs())),
        "mixin: durations (each also as a promtool probe)": 2 * len(DURATIONS),
        "mixin: selectors, label values, names": len(selector_cases()),
        "backtest: settings": 5 * len(INTERVAL_VALUES) + 150,
        "backtest: rule files (bombs, shapes)": len(yaml_bombs()) + len(RULE_SHAPES),
        "backtest: gaps x intervals": 3 * len(GAPS) + 1 + 1,
        "browser: markdown formatting": len(payloads()),
        "browser: verdict lines": len(payloads()),
    }


def test_the_corpus_has_at_least_1200_cases() -> None:
    sizes = corpus_sizes()
    assert sum(sizes.values()) >= 1200, sizes
