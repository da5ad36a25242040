"""deploy/: every manifest parses, every name it refers to exists, RBAC fits the backend."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autoscaler.config import AutoscalerSettings
from autoscaler.victims import WorkerView

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
WORKLOADS = ("Deployment", "Job")


def kustomization() -> dict:
    return yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())


def load_all() -> dict[tuple[str, str], dict]:
    """Return (kind, name) -> object for every document of every listed resource file."""
    objects = {}
    for name in kustomization()["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / name).read_text()):
            key = (doc["kind"], doc["metadata"]["name"])
            assert key not in objects, f"{key} defined twice"
            objects[key] = doc
    return objects


OBJECTS = load_all()


def of_kind(kind: str) -> list[dict]:
    return [o for (k, _), o in OBJECTS.items() if k == kind]


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def containers() -> list[tuple[str, dict]]:
    return [
        (o["metadata"]["name"], c)
        for kind in WORKLOADS
        for o in of_kind(kind)
        for c in pod_spec(o)["containers"]
    ]


def test_kustomization_lists_every_file_and_only_existing_ones():
    listed = set(kustomization()["resources"])
    assert all((DEPLOY / name).is_file() for name in listed)
    on_disk = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk


def test_config_and_secret_references_exist():
    for owner, container in containers():
        for source in container.get("envFrom", []):
            for ref, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                if ref in source:
                    assert (kind, source[ref]["name"]) in OBJECTS, owner
        for var in container.get("env", []):
            key_ref = var.get("valueFrom", {}).get("secretKeyRef")
            if key_ref:
                secret = OBJECTS[("Secret", key_ref["name"])]
                assert key_ref["key"] in secret["stringData"], owner


def test_volumes_claims_and_images():
    for kind in WORKLOADS:
        for obj in of_kind(kind):
            for volume in pod_spec(obj).get("volumes", []):
                claim = volume["persistentVolumeClaim"]["claimName"]
                assert ("PersistentVolumeClaim", claim) in OBJECTS
    assert {c["image"] for _, c in containers()} == {"stapel"}
    assert kustomization()["images"] == [{"name": "stapel", "newTag": "latest"}]


def test_deployment_selectors_match_their_pods_and_services_match_a_deployment():
    labels = {}
    for deployment in of_kind("Deployment"):
        template = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= template.items()
        labels[deployment["metadata"]["name"]] = (template, pod_spec(deployment))
    for service in of_kind("Service"):
        selector = service["spec"]["selector"]
        matches = [
            spec for template, spec in labels.values() if selector.items() <= template.items()
        ]
        assert len(matches) == 1, service["metadata"]["name"]
        port_names = {p["name"] for c in matches[0]["containers"] for p in c.get("ports", [])}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names


def test_service_account_and_role_binding():
    autoscaler = OBJECTS[("Deployment", "stapel-autoscaler")]
    account = pod_spec(autoscaler)["serviceAccountName"]
    assert ("ServiceAccount", account) in OBJECTS
    for binding in of_kind("RoleBinding"):
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in OBJECTS
        for subject in binding["subjects"]:
            assert (subject["kind"], subject["name"]) in OBJECTS
    assert autoscaler["spec"]["strategy"]["type"] == "Recreate"


@pytest.mark.parametrize("pool, grace", [("cpu", 900), ("gpu", 300)])
def test_workers(pool, grace):
    worker = OBJECTS[("Deployment", f"stapel-worker-{pool}")]
    spec = pod_spec(worker)
    (container,) = spec["containers"]
    assert "replicas" not in worker["spec"], "the autoscaler owns replicas"
    assert spec["terminationGracePeriodSeconds"] == grace
    assert f"{pool}@%h" in container["command"] and f"{pool},control" in container["command"]
    assert {"readinessProbe", "livenessProbe"} <= container.keys()
    gpus = container["resources"]["requests"].get("nvidia.com/gpu")
    assert gpus == (1 if pool == "gpu" else None)


def test_cpu_worker_translates_with_the_cores_it_requests():
    """A container sees every core of its node: the thread count must come from the pod."""
    (container,) = pod_spec(OBJECTS[("Deployment", "stapel-worker-cpu")])["containers"]
    env = {var["name"]: var.get("value") for var in container["env"]}
    assert env["STAPEL_THREADS"] == str(container["resources"]["requests"]["cpu"])


def test_single_beat():
    beat = OBJECTS[("Deployment", "stapel-beat")]
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"]["type"] == "Recreate"


def test_configmap_settings_parse_and_name_the_worker_deployments():
    env = {
        **OBJECTS[("ConfigMap", "stapel-config")]["data"],
        **OBJECTS[("Secret", "stapel-secrets")]["stringData"],
    }
    settings = AutoscalerSettings.from_env(env)
    assert settings.backend == "kubernetes"
    for pool in settings.pools:
        assert ("Deployment", pool.deployment) in OBJECTS


def rbac_of(method: str, path: str) -> tuple[str, str, str]:
    """Map a request the backend made to the (apiGroup, resource, verb) RBAC checks."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    assert rest[0] == "namespaces"
    resource, named = rest[2], len(rest) > 3
    if len(rest) > 4:
        resource += "/" + rest[4]
    verb = {"PATCH": "patch", "GET": "get" if named else "list"}[method]
    return group, resource, verb


def test_role_allows_exactly_the_calls_the_backend_makes(backend, kube):
    backend.scale(4, [])
    backend.scale(1, [WorkerView(name) for name in backend.workers()])
    made = {rbac_of(r.method, r.path) for r in kube.requests}
    role = OBJECTS[("Role", "stapel-autoscaler")]
    allowed = {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert made == allowed
    (scale_rule,) = [r for r in role["rules"] if "deployments/scale" in r["resources"]]
    assert set(scale_rule["resourceNames"]) == {
        d["metadata"]["name"]
        for d in of_kind("Deployment")
        if d["metadata"]["name"].startswith("stapel-worker-")
    }
