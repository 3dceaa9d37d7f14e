"""Regenerate the committed mixin artefacts (alerts/, dashboards/, deploy/prometheus-operator/,
deploy/grafana/), the dashboards bundled in the package (spark_state_observer/mixin/bundled/) and the runbook the state
browser serves as a file (spark_state_observer/browser/static/runbook.md: links written before its /runbook page) from the default
configuration. Needs the ``mixin`` extra (grafana-foundation-sdk). tests/unit/test_mixin.py fails when
either is stale."""

from __future__ import annotations

import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from spark_state_observer.mixin.config import MixinConfig  # noqa: E402
from spark_state_observer.mixin.dashboards import render  # noqa: E402
from spark_state_observer.mixin.export import artefacts, write  # noqa: E402


def main() -> int:
    config = MixinConfig()
    files = artefacts(config)
    written = write(ROOT, files)
    written += write(os.path.join(ROOT, "spark_state_observer", "mixin", "bundled"), render(config))
    written += write(os.path.join(ROOT, "spark_state_observer", "browser", "static"), {"runbook.md": files["alerts/runbook.md"]})
    print(f"wrote {len(written)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
