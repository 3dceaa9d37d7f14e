"""The Kubernetes base for a fleet (deploy/kubernetes): kustomize renders it, the core objects are valid
against the Kubernetes schemas (kubernetes-validate, strict: unknown fields fail), the ServiceMonitor
against the Prometheus Operator CRD, and the pieces fit together: each watcher pod of the StatefulSet
takes its shard from its ordinal, the headless Service selects the watchers, the ServiceMonitor selects
that Service and its port (not the browser's) and scrapes it as the mixin's exported ServiceMonitor does,
the disruption budget covers the watchers, the browser serves the same history from the same image, and
both run as non-root with resources, probes and a read-only root filesystem."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml
from crd_schema import errors as crd_errors

from conftest import REQUIRE_REAL, ROOT, need
from spark_state_observer.mixin.config import MixinConfig
from spark_state_observer.mixin.prometheus_operator import service_monitor

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


WATCHER = "StatefulSet/spark-state-observer-watcher"
WATCHER_SERVICE = "Service/spark-state-observer-watcher"
BROWSER = "Deployment/spark-state-observer-browser"
BROWSER_SERVICE = "Service/spark-state-observer-browser"
MONITOR = "ServiceMonitor/spark-state-observer-watcher"


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict]:
    """Kind/name -> object of the rendered base."""
    result = subprocess.run([need("kubectl"), "kustomize", BASE], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return {f"{obj['kind']}/{obj['metadata']['name']}": obj for obj in yaml.safe_load_all(result.stdout)}


def test_core_objects_are_valid_kubernetes(rendered) -> None:
    kv = kubernetes_validate()
    core = [o for o in rendered.values() if not o["apiVersion"].startswith("monitoring.coreos.com/")]
    assert sorted(o["kind"] for o in core) == [
        "Deployment",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "Service",
        "Service",
        "ServiceAccount",
        "StatefulSet",
    ]
    for obj in core:
        kv.validate(obj, KUBERNETES_VERSION, strict=True)  # raises ValidationError


@pytest.mark.parametrize("workload", [WATCHER, BROWSER])
def test_validation_rejects_a_broken_workload(rendered, workload: str) -> None:
    kv = kubernetes_validate()
    broken = yaml.safe_load(yaml.safe_dump(rendered[workload]))
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsNonroot"] = True
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, KUBERNETES_VERSION, strict=True)


def test_service_monitor_is_valid_and_scrapes_like_the_exported_one(rendered) -> None:
    monitor = rendered[MONITOR]
    assert crd_errors(monitor) == []
    exported = service_monitor(MixinConfig())["spec"]
    assert monitor["spec"]["endpoints"] == exported["endpoints"]
    assert monitor["spec"]["selector"] == exported["selector"], "the mixin's kubernetes.watcher_selector selects this Service"


def _env(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container["env"]}


def test_each_watcher_takes_its_shard_from_its_ordinal(rendered) -> None:
    watcher = rendered[WATCHER]
    container = watcher["spec"]["template"]["spec"]["containers"][0]
    args, env = container["args"], _env(container)
    assert args[:4] == ["watch", "/eventlogs", "--port", "9108"]
    assert args[args.index("--shard") + 1] == "$(SHARD_INDEX)/$(SHARD_COUNT)"
    assert env["SHARD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']"
    assert env["SHARD_COUNT"]["value"] == str(watcher["spec"]["replicas"]), "N of --shard K/N is the number of pods"
    assert watcher["spec"]["podManagementPolicy"] == "Parallel"
    # the read positions live on each pod's own claim, so a restarted shard resumes where it stopped
    state = args[args.index("--state-file") + 1]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    claims = {t["metadata"]["name"]: t for t in watcher["spec"]["volumeClaimTemplates"]}
    assert state.startswith(mounts["data"] + "/") and claims["data"]["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_the_pieces_fit_together(rendered) -> None:
    watcher, service, monitor = rendered[WATCHER], rendered[WATCHER_SERVICE], rendered[MONITOR]
    pod = watcher["spec"]["template"]
    assert watcher["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert watcher["spec"]["serviceName"] == service["metadata"]["name"] and service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    container = pod["spec"]["containers"][0]
    port = next(p for p in container["ports"] if p["name"] == "metrics")
    assert port["containerPort"] == 9108
    assert {p["name"] for p in service["spec"]["ports"]} == {monitor["spec"]["endpoints"][0]["port"]}
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    env = _env(container)
    assert env["SPARK_STATE_OBSERVER_HTTP_HOST"]["value"] == "0.0.0.0", "scraped from outside the pod"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/eventlogs"]["readOnly"] is True
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    claim = volumes[mounts["/eventlogs"]["name"]]["persistentVolumeClaim"]["claimName"]
    assert "ReadWriteMany" in rendered[f"PersistentVolumeClaim/{claim}"]["spec"]["accessModes"]
    budget = rendered["PodDisruptionBudget/spark-state-observer-watcher"]
    assert budget["spec"]["selector"]["matchLabels"] == watcher["spec"]["selector"]["matchLabels"] and budget["spec"]["maxUnavailable"] == 1


def test_the_browser_reads_the_watchers_history_from_the_same_image(rendered) -> None:
    watcher = rendered[WATCHER]["spec"]["template"]["spec"]["containers"][0]
    browser_pod = rendered[BROWSER]["spec"]["template"]
    browser = browser_pod["spec"]["containers"][0]
    assert browser["image"] == watcher["image"]
    assert browser["args"][0] == "ui" and browser["args"][browser["args"].index("--history") + 1] == "$(HISTORY_URL)"
    assert watcher["args"][watcher["args"].index("--history") + 1] == "$(HISTORY_URL)"
    for name in ("HISTORY_URL", "PGPASSWORD"):
        assert _env(browser)[name] == _env(watcher)[name], name
    assert "@" in _env(watcher)["HISTORY_URL"]["value"] and ":" not in _env(watcher)["HISTORY_URL"]["value"].split("@")[0].split("//")[1], (
        "the password comes from the Secret, not the URL"
    )
    service = rendered[BROWSER_SERVICE]
    assert service["spec"]["selector"].items() <= browser_pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() != rendered[WATCHER_SERVICE]["spec"]["selector"].items()
    assert "metrics" not in {p["name"] for p in service["spec"]["ports"]}, "the ServiceMonitor must find no target here"
    port = browser["ports"][0]
    assert browser["readinessProbe"]["httpGet"] == {"path": "/_stcore/health", "port": port["name"]}
    assert ["--port", str(port["containerPort"])] == browser["args"][3:5]


@pytest.mark.parametrize("workload", [WATCHER, BROWSER])
def test_workloads_run_unprivileged_with_resources_and_probes(rendered, workload: str) -> None:
    pod = rendered[workload]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
    container = pod["containers"][0]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"]["memory"] and container["resources"]["limits"]["memory"]
    assert container["readinessProbe"] and container["livenessProbe"]
    assert pod["automountServiceAccountToken"] is False
    assert any(m["mountPath"] == "/tmp" for m in container["volumeMounts"]), "a writable /tmp on a read-only root"


@pytest.fixture(scope="module")
def over_a_bucket(tmp_path_factory) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    """Kind/name -> object of an overlay of the base with the object-store component (N watchers over one bucket)."""
    overlay = tmp_path_factory.mktemp("overlay")
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(BASE, overlay)],
                "components": [os.path.relpath(os.path.join(BASE, "object-store"), overlay)],
            }
        )
    )
    result = subprocess.run([need("kubectl"), "kustomize", str(overlay)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return {f"{obj['kind']}/{obj['metadata']['name']}": obj for obj in yaml.safe_load_all(result.stdout)}


def test_watchers_sharded_over_one_bucket(over_a_bucket) -> None:
    kv = kubernetes_validate()
    for obj in over_a_bucket.values():
        if not obj["apiVersion"].startswith("monitoring.coreos.com/"):
            kv.validate(obj, KUBERNETES_VERSION, strict=True)
    watcher = over_a_bucket[WATCHER]
    pod = watcher["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args, env = container["args"], _env(container)
    assert args[:2] == ["watch", "s3a://$(EVENTLOG_BUCKET)/eventlogs"] and env["EVENTLOG_BUCKET"]["value"]
    assert args[args.index("--shard") + 1] == "$(SHARD_INDEX)/$(SHARD_COUNT)"
    assert env["SHARD_COUNT"]["value"] == str(watcher["spec"]["replicas"]) and watcher["spec"]["replicas"] > 2
    # no shared event-log volume left; the mirror sits beside the positions, on each pod's own claim
    assert "PersistentVolumeClaim/spark-event-logs" not in over_a_bucket
    assert not [v for v in pod["volumes"] if v["name"] == "eventlogs"]
    assert [m["mountPath"] for m in container["volumeMounts"]] == ["/var/lib/spark-state-observer", "/tmp"]
    assert args[args.index("--state-file") + 1].startswith("/var/lib/spark-state-observer/")
    # credentials from the pod's web identity, never in the manifests
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} & set(env)
    assert pod["automountServiceAccountToken"] is True
    account = over_a_bucket[f"ServiceAccount/{pod['serviceAccountName']}"]
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")
    # the rest of the base is untouched: every shard is still scraped, the browser still reads the same history
    assert over_a_bucket[WATCHER_SERVICE]["spec"]["selector"].items() <= watcher["spec"]["template"]["metadata"]["labels"].items()
    assert MONITOR in over_a_bucket and over_a_bucket["PodDisruptionBudget/spark-state-observer-watcher"]["spec"]["maxUnavailable"] == 1
    assert env["HISTORY_URL"] == _env(over_a_bucket[BROWSER]["spec"]["template"]["spec"]["containers"][0])["HISTORY_URL"]
