"""Grafana dashboards built with grafana-foundation-sdk (the ``mixin`` extra) from a ``MixinConfig``.

``render(config)`` returns file name -> classic dashboard JSON. Panel ids are numbered here so they are
stable across regenerations. Only export imports this package: a plain install ships the default
dashboards as package data (``spark_state_observer/mixin/bundled``) and never needs the SDK.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

from spark_state_observer.mixin.config import MixinConfig


def _builders() -> dict[str, Callable[..., Any]]:
    from spark_state_observer.mixin.dashboards import overview, query_detail, restore, state_store

    return {
        "overview.json": overview.build,
        "query-detail.json": query_detail.build,
        "state-store.json": state_store.build,
        "restore.json": restore.build,
    }


SCHEMAS = ("classic", "v2")


def render(config: MixinConfig, schema: str = "classic") -> dict[str, str]:
    """File name -> JSON text of every dashboard for ``config``: classic JSON, or Grafana's v2 resources
    (``spark_state_observer.mixin.dashboards.v2``: the same panels)."""
    with warnings.catch_warnings():  # the SDK points classic dashboards at its v2 API; Grafana 10-12 import classic JSON
        warnings.simplefilter("ignore", DeprecationWarning)
        from grafana_foundation_sdk.cog.encoder import JSONEncoder

        from spark_state_observer.mixin.dashboards.panels import Context

        ctx = Context.of(config)
        out = {}
        for name, build in _builders().items():
            model = json.loads(json.dumps(build(ctx).build(), cls=JSONEncoder))
            for number, panel in enumerate(model["panels"], start=1):
                panel["id"] = number
            out[name] = json.dumps(model, indent=2, sort_keys=True) + "\n"
        if schema == "v2":
            from spark_state_observer.mixin.dashboards.v2 import to_v2

            out = {
                name: json.dumps(to_v2(json.loads(text)), cls=JSONEncoder, indent=2, sort_keys=True) + "\n" for name, text in out.items()
            }
        return out
