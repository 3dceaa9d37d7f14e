"""Write the dashboards as Grafana classic dashboard JSON next to this file: ``python -m dashboards.generate``.

The JSON is committed (so users import files, not Python) and a test regenerates it and fails when the
committed files are stale. Panel ids are numbered here so they are stable across regenerations.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any, Callable

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.encoder import JSONEncoder

HERE = os.path.dirname(os.path.abspath(__file__))


def _builders() -> dict[str, Callable[[], db.Dashboard]]:
    from dashboards import overview, query_detail, restore, state_store

    return {"overview.json": overview.build, "query-detail.json": query_detail.build,
            "state-store.json": state_store.build, "restore.json": restore.build}


def render(builder: Callable[[], db.Dashboard]) -> dict[str, Any]:
    """The dashboard as a JSON object, with panel ids numbered in order."""
    model = json.loads(json.dumps(builder().build(), cls=JSONEncoder))
    for number, panel in enumerate(model["panels"], start=1):
        panel["id"] = number
    return model


def dashboards() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    with warnings.catch_warnings():  # the SDK points classic dashboards at its v2 API; Grafana 10-12 import classic JSON
        warnings.simplefilter("ignore", DeprecationWarning)
        return {name: json.dumps(render(build), indent=2, sort_keys=True) + "\n" for name, build in _builders().items()}


def main() -> int:
    for name, text in dashboards().items():
        with open(os.path.join(HERE, name), "w") as f:
            f.write(text)
        print(f"wrote dashboards/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
