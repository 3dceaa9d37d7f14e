"""Recording rules backfilled into TSDB blocks with ``promtool tsdb create-blocks-from rules``, one
dependency level at a time, so the alerts that read recorded series find them."""

from __future__ import annotations

import os
import shutil

import yaml

from spark_state_observer.mixin.prometheus_text import format_duration
from spark_state_observer.offline.backtest.rules import RecordingRule
from spark_state_observer.offline.prometheus_server import PrometheusServer, promtool


def backfill_level(
    server: PrometheusServer,
    rules: list[RecordingRule],
    level: int,
    segments: list[tuple[float, float]],
    step: float,
    work: str,
    promtool_binary: str | None,
    prometheus: str | None,
) -> PrometheusServer:
    """Write one level of recording rules as blocks (for each scraped stretch, never the gaps between),
    then restart the server so it serves them."""
    rules_path = os.path.join(work, f"recording-{level}.yml")
    with open(rules_path, "w") as f:
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": f"backtest-level-{level}",
                        "rules": [{"record": r.record, "expr": r.expr, **({"labels": r.labels} if r.labels else {})} for r in rules],
                    }
                ]
            },
            f,
        )
    outs = []
    for n, (start, end) in enumerate(segments):
        out = os.path.join(work, f"blocks-{level}-{n}")
        promtool(
            [
                "tsdb",
                "create-blocks-from",
                "rules",
                f"--start={int(start)}",
                f"--end={int(end) + 1}",
                f"--url={server.url}",
                f"--output-dir={out}",
                f"--eval-interval={format_duration(step)}",
                rules_path,
            ],
            promtool_binary,
        )
        outs.append(out)
    server.stop()
    for out in outs:
        if os.path.isdir(out):
            for block in os.listdir(out):
                shutil.move(os.path.join(out, block), os.path.join(server.data_dir, block))
    return PrometheusServer(server.data_dir, work, prometheus).start()
