"""The hardening every container must have, asserted on every rendered object."""

from __future__ import annotations

import base64
import os
import re
import subprocess

import pytest

from tests.deploy.render import DEPLOY, OVERLAYS, ROOT, by_key, component, containers, rendered

IMAGE_UID = int(re.search(r"^ARG UID=(\d+)$", (ROOT / "Dockerfile").read_text(), re.M)[1])
REDIS_UID = 999
"""The uid of the official redis image's `redis` user."""
WRITABLE = {"/tmp", "/app/var"}
"""The only paths the image writes to (the Dockerfile and docs/operations.md say so)."""
SECRET_KEYS = {
    ("web", "web"): {"DATABASE_URL", "REDIS_PASSWORD", "STAPEL_METRICS_TOKEN"},
    ("worker-cpu", "worker"): {"DATABASE_URL", "REDIS_PASSWORD"},
    ("worker-gpu", "worker"): {"DATABASE_URL", "REDIS_PASSWORD"},
    ("beat", "beat"): {"REDIS_PASSWORD"},
    ("beat", "control"): {"DATABASE_URL", "REDIS_PASSWORD"},
    ("callbacks", "callbacks"): {"DATABASE_URL", "REDIS_PASSWORD"},
    ("flower", "flower"): {"FLOWER_BASIC_AUTH", "REDIS_PASSWORD"},
    ("autoscaler", "autoscaler"): {"DATABASE_URL", "REDIS_PASSWORD"},
    ("migrate", "migrate"): {"DATABASE_URL"},
    ("redis", "redis"): {"REDIS_PASSWORD"},
}
"""Each container gets exactly the secret keys it uses."""


def all_containers():
    return [
        pytest.param(overlay, c, s, o, id=f"{overlay}-{o['metadata']['name']}-{c['name']}")
        for overlay in OVERLAYS
        for o, s, c in containers(rendered(overlay))
    ]


def effective(pod_spec: dict, container: dict, field: str):
    """A container's security setting, falling back to the pod's as Kubernetes does."""
    own = container.get("securityContext", {})
    return own[field] if field in own else pod_spec.get("securityContext", {}).get(field)


@pytest.mark.parametrize("overlay, container, spec, owner", all_containers())
def test_every_container_is_locked_down(overlay, container, spec, owner):
    uid = REDIS_UID if container["image"].startswith("redis") else IMAGE_UID
    assert effective(spec, container, "runAsNonRoot") is True
    assert effective(spec, container, "runAsUser") == uid
    assert effective(spec, container, "runAsGroup") == uid
    assert effective(spec, container, "readOnlyRootFilesystem") is True
    assert effective(spec, container, "allowPrivilegeEscalation") is False
    assert effective(spec, container, "capabilities") == {"drop": ["ALL"]}
    assert effective(spec, container, "seccompProfile") == {"type": "RuntimeDefault"}
    assert not effective(spec, container, "privileged")
    assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")
    service_account = spec.get("serviceAccountName")
    assert spec.get("automountServiceAccountToken") is (False if not service_account else None)


@pytest.mark.parametrize("overlay, container, spec, owner", all_containers())
def test_every_container_has_requests_and_limits(overlay, container, spec, owner):
    resources = container["resources"]
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= resources[kind].keys(), kind
    assert to_mib(resources["limits"]["memory"]) >= to_mib(resources["requests"]["memory"])


def to_mib(quantity: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(Mi|Gi)", quantity).groups()
    return float(number) * (1024 if unit == "Gi" else 1)


@pytest.mark.parametrize("overlay, container, spec, owner", all_containers())
def test_only_documented_paths_are_writable(overlay, container, spec, owner):
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "persistentVolumeClaim" in volume:
            assert mount.get("readOnly") is True and volume["persistentVolumeClaim"]["readOnly"]
        elif container["image"].startswith("redis"):
            assert mount["mountPath"] in {"/data", "/tmp"}
        else:
            assert mount["mountPath"] in WRITABLE
        if "emptyDir" in volume:
            assert volume["emptyDir"].get("sizeLimit"), "an unbounded emptyDir fills the node"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_container_gets_only_the_secret_keys_it_uses(overlay):
    objects = rendered(overlay)
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    seen = set()
    for owner, _, container in containers(objects):
        assert all("secretRef" not in source for source in container.get("envFrom", []))
        env = container.get("env", [])
        refs = [
            v["valueFrom"]["secretKeyRef"] for v in env if "secretKeyRef" in v.get("valueFrom", {})
        ]
        keys = {r["key"] for r in refs}
        where = (component(owner), container["name"])
        assert keys == SECRET_KEYS[where], where
        assert {r["name"] for r in refs} <= {secret["metadata"]["name"]}
        assert keys <= secret["data"].keys()
        seen.add(where)
    assert seen == {w for w in SECRET_KEYS if overlay == "production" or w[0] != "worker-gpu"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_redis_url_is_built_from_the_password_and_the_service(overlay):
    objects = rendered(overlay)
    redis_service = by_key(objects)[("Service", "stapel-redis")]
    port = redis_service["spec"]["ports"][0]["port"]
    for owner, _, container in containers(objects):
        names = [v["name"] for v in container.get("env", [])]
        if "REDIS_URL" not in names:
            continue
        url = next(v["value"] for v in container["env"] if v["name"] == "REDIS_URL")
        assert url == f"redis://:$(REDIS_PASSWORD)@stapel-redis:{port}/0", owner["metadata"]
        # $(VAR) expands only variables defined earlier in the list.
        assert names.index("REDIS_PASSWORD") < names.index("REDIS_URL")
    (redis,) = [c for o, _, c in containers(objects) if component(o) == "redis"]
    assert "requirepass" in redis["args"][0] and "$REDIS_PASSWORD" in redis["args"][0]
    assert "REDIS_PASSWORD" not in " ".join(redis["command"]), "keep it off the command line"


def test_no_credential_is_committed():
    tracked = subprocess.run(
        ["git", "ls-files", "deploy"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "deploy/base/secrets/.gitignore" in tracked
    assert [p for p in tracked if p.startswith("deploy/base/secrets/")] == [
        "deploy/base/secrets/.gitignore"
    ]
    for path in tracked:
        text = (ROOT / path).read_text()
        assert "kind: Secret" not in text, path
        assert not re.search(r"CHANGE-?ME|changeme|admin:", text, re.I), path
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "deploy/base/secrets/stapel.env"], cwd=ROOT
    )
    assert ignored.returncode == 0


@pytest.mark.process
def test_make_secrets_writes_fresh_private_values_once(tmp_path):
    out = tmp_path / "stapel.env"
    command = ["python3", str(DEPLOY / "make_secrets.py"), "--out", str(out)]
    url = "postgresql://stapel:pw@db:5432/stapel"
    # DATABASE_URL would be its default (CI sets it for the suite): leave it out here.
    bare = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    missing = subprocess.run(command, capture_output=True, env=bare)
    assert missing.returncode == 2, "needs a database URL"
    subprocess.run([*command, "--database-url", url], check=True, capture_output=True)
    first = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert out.stat().st_mode & 0o777 == 0o600
    assert first["DATABASE_URL"] == url and set(first) == set().union(*SECRET_KEYS.values())
    again = subprocess.run([*command, "--database-url", url], capture_output=True, text=True)
    assert again.returncode == 1 and "exists" in again.stderr
    subprocess.run([*command, "--database-url", url, "--force"], check=True, capture_output=True)
    second = dict(line.split("=", 1) for line in out.read_text().splitlines())
    for key in ("REDIS_PASSWORD", "FLOWER_BASIC_AUTH", "STAPEL_METRICS_TOKEN"):
        assert first[key] != second[key] and len(first[key]) >= 32


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_generated_secret_carries_what_make_secrets_wrote(overlay):
    (secret,) = [o for o in rendered(overlay) if o["kind"] == "Secret"]
    database_url = base64.b64decode(secret["data"]["DATABASE_URL"]).decode()
    assert database_url == "postgresql://stapel:pw@db.example:5432/stapel"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_namespace_enforces_the_restricted_pod_security_profile(overlay):
    namespace = by_key(rendered(overlay))[("Namespace", "stapel")]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_cluster_scoped_objects_carry_no_namespace(overlay):
    cluster_scoped = {"Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    for obj in rendered(overlay):
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in obj["metadata"], obj["kind"]
        else:
            assert obj["metadata"]["namespace"] == "stapel", obj["kind"]
