"""Validate Prometheus Operator objects against the operator's CRD OpenAPI schemas (tests/data/crds,
copied from prometheus-operator/prometheus-operator; see tests/data/crds/README.md).

The API server prunes unknown fields instead of rejecting them, so a misspelt key would vanish silently;
here every object schema that lists its properties (and does not preserve unknown fields) rejects
others, which turns such a typo into a test failure.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import yaml
from jsonschema import Draft7Validator

CRDS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "crds")
FILES = {
    "PrometheusRule": "monitoring.coreos.com_prometheusrules.yaml",
    "ServiceMonitor": "monitoring.coreos.com_servicemonitors.yaml",
    "PodMonitor": "monitoring.coreos.com_podmonitors.yaml",
}


def _closed(schema: Any) -> Any:
    if isinstance(schema, dict):
        schema = {k: _closed(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


def schema(kind: str, version: str = "v1") -> dict:
    with open(os.path.join(CRDS, FILES[kind])) as f:
        crd = yaml.safe_load(f)
    assert crd["spec"]["names"]["kind"] == kind
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    openapi = copy.deepcopy(served["schema"]["openAPIV3Schema"])
    # metadata is validated by the API server itself, not by the CRD schema; check its basic shape here
    openapi["properties"]["metadata"] = {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
            "namespace": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    return _closed(openapi)


def errors(obj: dict) -> list[str]:
    """Schema violations of a PrometheusRule, ServiceMonitor or PodMonitor (empty: valid)."""
    api, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    assert api.startswith("monitoring.coreos.com/"), api
    validator = Draft7Validator(schema(kind, api.split("/", 1)[1]))
    return [f"{kind} at {list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(obj)]
