"""deploy/: every name a rendered object refers to exists; workloads run Procfile roles."""

from __future__ import annotations

import re
import subprocess

import pytest

from app.server import options as web_options
from autoscaler.config import AutoscalerSettings
from stapel.settings import Settings
from tests.deploy.render import (
    DEPLOY,
    OVERLAYS,
    ROOT,
    by_key,
    component,
    containers,
    pod_spec,
    rendered,
)

PROCFILE = dict(
    line.split(": ", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line
)
ENTRYPOINT = ROOT / "bin" / "docker-entrypoint"


def of_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def config_env(objects: list[dict]) -> dict[str, str]:
    return by_key(objects)[("ConfigMap", "stapel-config")]["data"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_config_and_claim_references_exist(overlay):
    objects = rendered(overlay)
    index = by_key(objects)
    for owner, spec, container in containers(objects):
        for source in container.get("envFrom", []):
            assert ("ConfigMap", source["configMapRef"]["name"]) in index, owner["metadata"]
        for volume in spec.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"]["claimName"]
                assert ("PersistentVolumeClaim", claim) in index
        mounted = {m["name"] for m in container.get("volumeMounts", [])}
        assert mounted <= {v["name"] for v in spec.get("volumes", [])}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_selectors_match_their_pods_and_services_a_deployment(overlay):
    objects = rendered(overlay)
    templates = {}
    for deployment in of_kind(objects, "Deployment"):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
        templates[deployment["metadata"]["name"]] = (labels, pod_spec(deployment))
    for service in of_kind(objects, "Service"):
        selector = service["spec"]["selector"]
        matches = [s for labels, s in templates.values() if selector.items() <= labels.items()]
        assert len(matches) == 1, service["metadata"]["name"]
        port_names = {p["name"] for c in matches[0]["containers"] for p in c.get("ports", [])}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workloads_run_procfile_roles_through_the_entry_point(overlay):
    for owner, _, container in containers(rendered(overlay)):
        if container["image"].startswith("redis"):
            continue
        assert "command" not in container, "the image's entry point starts the role"
        (role,) = container["args"]
        assert role in PROCFILE or role == "migrate", owner["metadata"]["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_roles_that_write_under_var_have_it_mounted(overlay):
    """The root filesystem is read-only: a role whose Procfile line writes var/ (the web's
    metrics files, beat's schedule) needs a volume there, or its set-up step fails."""
    writers = 0
    for owner, _, container in containers(rendered(overlay)):
        role = (container.get("args") or [""])[0]
        if "var" not in re.findall(r"mkdir -p (\w+)", PROCFILE.get(role, "")):
            continue
        writers += 1
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
        assert "/app/var" in mounts, f"{owner['metadata']['name']}: {role} writes var/"
    assert writers >= 2  # web and beat


@pytest.mark.parametrize("pool", ["cpu", "gpu"])
def test_worker_roles_serve_their_pool_and_control(pool):
    line = PROCFILE[f"worker_{pool}"]
    assert f"STAPEL_POOL={pool}" in line and f"-Q {pool},control" in line
    assert f"-n {pool}@%h" in line
    assert "${STAPEL_WORKER_CONCURRENCY:-128}" in line


@pytest.mark.process
def test_entry_point_refuses_unknown_roles():
    for role in ("nope", "web;id", "Web"):
        done = subprocess.run([str(ENTRYPOINT), role], capture_output=True, text=True)
        assert done.returncode == 64 and "roles: migrate worker web" in done.stderr


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_listeners_bind_beyond_loopback_in_the_cluster_only(overlay):
    """The Procfile binds 127.0.0.1 by default; deploy/ says 0.0.0.0 where a port is served."""
    objects = rendered(overlay)
    assert PROCFILE["web"].endswith("python -m app.server") and "127.0.0.1" in PROCFILE["flower"]
    assert (web_options({})["address"], web_options({})["port"]) == ("127.0.0.1", 8000)
    assert Settings().metrics_bind == "127.0.0.1"
    assert config_env(objects)["STAPEL_METRICS_BIND"] == "0.0.0.0"
    env = {
        component(o): {v["name"]: v.get("value") for v in c.get("env", [])}
        for o, _, c in containers(objects)
    }
    assert env["web"]["STAPEL_BIND"] == "0.0.0.0:8000"
    assert env["flower"]["STAPEL_FLOWER_ADDRESS"] == "0.0.0.0"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_have_grace_spread_and_a_disruption_budget(overlay):
    objects = rendered(overlay)
    budgets = {
        tuple(sorted(p["spec"]["selector"]["matchLabels"].items()))
        for p in of_kind(objects, "PodDisruptionBudget")
    }
    for worker in of_kind(objects, "Deployment"):
        if not component(worker).startswith("worker-"):
            continue
        spec = pod_spec(worker)
        (container,) = spec["containers"]
        assert "replicas" not in worker["spec"], "the autoscaler owns replicas"
        pool = component(worker).removeprefix("worker-")
        assert spec["terminationGracePeriodSeconds"] == {"cpu": 900, "gpu": 300}[pool]
        assert {"readinessProbe", "livenessProbe"} <= container.keys()
        assert tuple(sorted(worker["spec"]["selector"]["matchLabels"].items())) in budgets
        spread = spec["topologySpreadConstraints"]
        assert {c["topologyKey"] for c in spread} >= {"kubernetes.io/hostname"}
        assert all(c["labelSelector"] == worker["spec"]["selector"] for c in spread)
        gpus = container["resources"]["limits"].get("nvidia.com/gpu")
        assert gpus == ("1" if pool == "gpu" else None)
        if pool == "gpu":
            assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
            assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in (
                spec["tolerations"]
            )
            assert container["image"].startswith("stapel-gpu:")


def test_cpu_worker_translates_with_the_cores_it_requests():
    """A container sees every core of its node: the thread count must come from the pod."""
    worker = by_key(rendered("small"))[("Deployment", "stapel-worker-cpu")]
    (container,) = pod_spec(worker)["containers"]
    env = {var["name"]: var.get("value") for var in container["env"]}
    assert env["STAPEL_THREADS"] == container["resources"]["requests"]["cpu"]
    assert container["resources"]["limits"]["cpu"] == container["resources"]["requests"]["cpu"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_single_beat_and_single_autoscaler(overlay):
    index = by_key(rendered(overlay))
    for name in ("stapel-beat", "stapel-autoscaler", "stapel-redis"):
        spec = index[("Deployment", name)]["spec"]
        assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"
    beat = index[("Deployment", "stapel-beat")]
    mounts = {m["mountPath"] for c in pod_spec(beat)["containers"] for m in c["volumeMounts"]}
    assert "/app/var" in mounts, "beat keeps its schedule in var/"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_configmap_settings_parse_and_every_routed_pool_has_workers(overlay):
    objects = rendered(overlay)
    env = config_env(objects)
    settings = AutoscalerSettings.from_env(env)
    core = Settings.from_env(env)
    assert settings.backend == "kubernetes"
    deployments = {d["metadata"]["name"] for d in of_kind(objects, "Deployment")}
    for pool in settings.pools:
        assert (pool.deployment in deployments) == pool.enabled, pool.name
    gpu = settings.pool("gpu")
    if not gpu.enabled:
        assert core.gpu_threshold > core.max_segments_per_job, "a job routed to gpu would wait"
    role = by_key(objects)[("Role", "stapel-autoscaler")]
    (scale_rule,) = [r for r in role["rules"] if "deployments/scale" in r["resources"]]
    assert set(scale_rule["resourceNames"]) == {p.deployment for p in settings.pools if p.enabled}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_images_come_from_this_repository_and_production_pins_them(overlay):
    images = {c["image"] for _, _, c in containers(rendered(overlay))}
    names = {re.sub(r"[:@].*", "", i) for i in images}
    assert names <= {"stapel", "stapel-gpu", "redis"}
    if overlay == "production":
        assert all(not i.endswith(":latest") and ":" in i for i in images), images


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_models_come_from_the_image_or_a_read_only_volume(overlay):
    objects = rendered(overlay)
    root = config_env(objects).get("STAPEL_MODEL_ROOT")
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "STAPEL_MODEL_ROOT=/app/models" in dockerfile and "COPY models models" in dockerfile
    if overlay == "small":
        assert root is None, "the image's demo models"
        return
    assert root == "/models"
    for owner, _, container in containers(objects):
        if component(owner) in {"web", "worker-cpu", "worker-gpu"}:
            mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
            assert mounts["/models"]["readOnly"] is True


def test_every_deploy_file_is_used():
    """No manifest lies in deploy/ that no kustomization lists."""
    listed = set()
    for kustomization in DEPLOY.rglob("kustomization.yaml"):
        text = kustomization.read_text()
        for item in re.findall(r"^  - ([\w./-]+)$", text, re.M):
            listed.add((kustomization.parent / item).resolve())
        listed.update(
            (kustomization.parent / f).resolve() for f in re.findall(r"- ([\w.-]+\.json)", text)
        )
    files = {p.resolve() for p in DEPLOY.rglob("*.yaml") if p.name != "kustomization.yaml"}
    files |= {p.resolve() for p in DEPLOY.rglob("*.json")}
    assert files <= listed, sorted(str(f) for f in files - listed)
