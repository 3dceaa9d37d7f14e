"""The Kubernetes base for the event-log watcher (deploy/kubernetes): kustomize renders it, the core
objects are valid against the Kubernetes schemas (kubernetes-validate, strict: unknown fields fail), the
ServiceMonitor against the Prometheus Operator CRD, and the pieces fit together: the Service selects the
watcher's pods, the ServiceMonitor selects the Service and its port and scrapes it as the mixin's
exported ServiceMonitor does, the watcher runs as non-root with resources and reads the event logs
read-only."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml
from crd_schema import errors as crd_errors

from conftest import REQUIRE_REAL, ROOT, need
from observer.mixin.config import MixinConfig
from observer.mixin.prometheus_operator import service_monitor

BASE = os.path.join(ROOT, "deploy", "kubernetes")
KUBERNETES_VERSION = "1.32"


def kubernetes_validate():  # type: ignore[no-untyped-def]
    try:
        import kubernetes_validate
    except ImportError:
        if REQUIRE_REAL:
            pytest.fail("kubernetes-validate is not installed (pip install kubernetes-validate)")
        pytest.skip("kubernetes-validate is not installed")
    return kubernetes_validate


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict]:
    """Kind -> object of the rendered base (PersistentVolumeClaims by name)."""
    result = subprocess.run([need("kubectl"), "kustomize", BASE], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    out = {}
    for obj in yaml.safe_load_all(result.stdout):
        key = obj["kind"] if obj["kind"] != "PersistentVolumeClaim" else f"PersistentVolumeClaim/{obj['metadata']['name']}"
        out[key] = obj
    return out


def test_core_objects_are_valid_kubernetes(rendered) -> None:
    kv = kubernetes_validate()
    core = [o for o in rendered.values() if not o["apiVersion"].startswith("monitoring.coreos.com/")]
    assert {o["kind"] for o in core} == {"ServiceAccount", "PersistentVolumeClaim", "Deployment", "Service"}
    for obj in core:
        kv.validate(obj, KUBERNETES_VERSION, strict=True)  # raises ValidationError


def test_validation_rejects_a_broken_deployment(rendered) -> None:
    kv = kubernetes_validate()
    broken = yaml.safe_load(yaml.safe_dump(rendered["Deployment"]))
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsNonroot"] = True
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, KUBERNETES_VERSION, strict=True)


def test_service_monitor_is_valid_and_scrapes_like_the_exported_one(rendered) -> None:
    monitor = rendered["ServiceMonitor"]
    assert crd_errors(monitor) == []
    exported = service_monitor(MixinConfig())["spec"]
    assert monitor["spec"]["endpoints"] == exported["endpoints"]
    assert monitor["spec"]["selector"] == exported["selector"], "the mixin's kubernetes.watcher_selector selects this Service"


def test_the_pieces_fit_together(rendered) -> None:
    deployment, service, monitor = rendered["Deployment"], rendered["Service"], rendered["ServiceMonitor"]
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    container = pod["spec"]["containers"][0]
    port = next(p for p in container["ports"] if p["name"] == "metrics")
    assert port["containerPort"] == 9108
    assert {p["name"] for p in service["spec"]["ports"]} == {monitor["spec"]["endpoints"][0]["port"]}
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    args = container["args"]
    assert args[:4] == ["watch", "/eventlogs", "--port", "9108"] and args[args.index("--history") + 1].startswith("sqlite:///")
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["SPARK_STATE_OBSERVER_HTTP_HOST"] == "0.0.0.0", "scraped from outside the pod"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/eventlogs"]["readOnly"] is True
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    claim = volumes[mounts["/eventlogs"]["name"]]["persistentVolumeClaim"]["claimName"]
    assert "ReadWriteMany" in rendered[f"PersistentVolumeClaim/{claim}"]["spec"]["accessModes"]


def test_the_watcher_runs_unprivileged_with_resources(rendered) -> None:
    pod = rendered["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
    container = pod["containers"][0]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"]["memory"] and container["resources"]["limits"]["memory"]
    assert pod["automountServiceAccountToken"] is False
