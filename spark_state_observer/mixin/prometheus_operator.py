"""Prometheus Operator objects from a ``MixinConfig``: the rules as a ``PrometheusRule``, a
``ServiceMonitor`` for the event-log watcher's Service and a ``PodMonitor`` for Spark driver pods
running the listener.

Both monitors keep the observer's own labels (``honorLabels``): the observer puts the identity labels
(``namespace`` among them) on its series, and without it Prometheus would rename them ``exported_*``
and the rules would aggregate by the target's labels instead. When ``observer_selector`` pins a
``job``, the monitors set that job, so ``SparkStateObserverDown`` sees their ``up`` series.
"""

from __future__ import annotations

from typing import Any

from spark_state_observer.mixin.config import MixinConfig, parse_matchers
from spark_state_observer.mixin.rules import rule_documents

API_VERSION = "monitoring.coreos.com/v1"
NAME = "spark-state-observer"


def _metadata(config: MixinConfig, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": config.kubernetes.namespace, "labels": dict(config.kubernetes.labels)}


def _endpoint(config: MixinConfig, port_key: str) -> dict[str, Any]:
    endpoint: dict[str, Any] = {
        port_key: config.kubernetes.port,
        "path": "/metrics",
        "interval": config.kubernetes.scrape_interval,
        "honorLabels": True,
    }
    job = next(
        (value for label, op, value in parse_matchers(config.observer_selector, "observer_selector") if label == "job" and op == "="), None
    )
    if job is not None:
        endpoint["relabelings"] = [{"action": "replace", "targetLabel": "job", "replacement": job}]
    return endpoint


def prometheus_rule(config: MixinConfig) -> dict[str, Any]:
    docs = rule_documents(config)
    return {
        "apiVersion": API_VERSION,
        "kind": "PrometheusRule",
        "metadata": _metadata(config, NAME),
        "spec": {"groups": docs["recording.yml"]["groups"] + docs["rules.yml"]["groups"]},
    }


def service_monitor(config: MixinConfig) -> dict[str, Any]:
    k = config.kubernetes
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(k.watcher_selector)}, "endpoints": [_endpoint(config, "port")]}
    if k.watcher_namespaces:
        spec["namespaceSelector"] = {"matchNames": list(k.watcher_namespaces)}
    return {"apiVersion": API_VERSION, "kind": "ServiceMonitor", "metadata": _metadata(config, f"{NAME}-watcher"), "spec": spec}


def pod_monitor(config: MixinConfig) -> dict[str, Any]:
    k = config.kubernetes
    namespaces: dict[str, Any] = {"matchNames": list(k.driver_namespaces)} if k.driver_namespaces else {"any": True}
    spec = {
        "selector": {"matchLabels": dict(k.driver_selector)},
        "namespaceSelector": namespaces,
        "podMetricsEndpoints": [_endpoint(config, "port")],
    }
    return {"apiVersion": API_VERSION, "kind": "PodMonitor", "metadata": _metadata(config, f"{NAME}-drivers"), "spec": spec}


def objects(config: MixinConfig) -> dict[str, dict[str, Any]]:
    """File name -> object."""
    return {
        "prometheusrule.yaml": prometheus_rule(config),
        "servicemonitor.yaml": service_monitor(config),
        "podmonitor.yaml": pod_monitor(config),
    }
