"""Time of each MCP tool's answer over the recorded incident corpus, through the SDK's own in-process client.

The history is the browser tests' incident history (``scripts/screenshots.replay_incidents``: every recorded
incident replayed, 123 queries); ``--db`` keeps it between runs. Each tool is called ``--repeat`` times on
one server (the history's pages in the OS cache after the first call) and the median and range printed:
``list_queries`` judges every query, ``explain_query`` one (the crash-looping query with the most runs),
``restores_in_progress`` reads every query's restore events, ``size_state`` sizes from one query's newest batch.

    python bench/mcp_answers.py [--repeat 5] [--db /tmp/sso-mcp-bench.db]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def incidents_history(db: str) -> None:
    spec = importlib.util.spec_from_file_location("screenshots", os.path.join(ROOT, "scripts", "screenshots.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    module.replay_incidents(db)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db", default="/tmp/sso-mcp-bench.db")
    args = parser.parse_args()
    if not os.path.exists(args.db):
        incidents_history(args.db)

    import anyio
    from mcp import Client

    from spark_state_observer.mcp.server import build

    async def run() -> dict[str, list[float]]:
        times: dict[str, list[float]] = {}
        async with Client(build(args.db)) as client:
            listed = await client.call_tool("list_queries", {"state": "crash_loop", "limit": 1})
            loop = listed.structured_content["queries"][0]["query_id"]
            calls: dict[str, tuple[str, dict[str, Any]]] = {
                "list_queries (every query judged)": ("list_queries", {"limit": 200}),
                "explain_query (a crash loop)": ("explain_query", {"query": loop}),
                "restores_in_progress": ("restores_in_progress", {"include_finished": True}),
                "size_state (from a query)": ("size_state", {"from_query": loop}),
            }
            for label, (tool, arguments) in calls.items():
                for _ in range(args.repeat):
                    began = time.perf_counter()
                    result = await client.call_tool(tool, arguments)
                    times.setdefault(label, []).append(time.perf_counter() - began)
                    assert not result.is_error, result.content
        return times

    print(f"history {args.db}, median (min-max) of {args.repeat} calls, load average {os.getloadavg()[0]:.1f}")
    for label, values in anyio.run(run).items():
        print(f"| {label} | {statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
