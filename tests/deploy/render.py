"""Render deploy/'s overlays offline (kubectl kustomize) with freshly generated secrets."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = ("small", "production")
WORKLOADS = ("Deployment", "Job", "StatefulSet", "DaemonSet")


@functools.cache
def _render_all() -> dict[str, list[dict]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "deploy"
        shutil.copytree(DEPLOY, copy, ignore=shutil.ignore_patterns("stapel.env"))
        secrets = copy / "base" / "secrets" / "stapel.env"
        subprocess.run(
            [sys.executable, str(copy / "make_secrets.py"), "--out", str(secrets)],
            env={"DATABASE_URL": "postgresql://stapel:pw@db.example:5432/stapel"},
            check=True,
            capture_output=True,
        )
        rendered = {}
        for overlay in OVERLAYS:
            out = subprocess.run(
                [kubectl, "kustomize", str(copy / "overlays" / overlay)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            rendered[overlay] = [doc for doc in yaml.safe_load_all(out) if doc]
    return rendered


def rendered(overlay: str) -> list[dict]:
    """Return every object `kubectl kustomize deploy/overlays/<overlay>` produces."""
    objects = _render_all()
    if not objects:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    return objects[overlay]


def by_key(objects: list[dict]) -> dict[tuple[str, str], dict]:
    """Index objects by (kind, name), the Secret under its name without kustomize's hash."""
    index = {}
    for obj in objects:
        name = obj["metadata"]["name"]
        if obj["kind"] == "Secret":
            name = name.rsplit("-", 1)[0]
        assert (obj["kind"], name) not in index, f"{obj['kind']} {name} defined twice"
        index[(obj["kind"], name)] = obj
    return index


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def containers(objects: list[dict]) -> list[tuple[dict, dict, dict]]:
    """Return (workload, pod spec, container) for every container, init containers too."""
    found = []
    for obj in objects:
        if obj["kind"] in WORKLOADS:
            spec = pod_spec(obj)
            for container in spec.get("initContainers", []) + spec["containers"]:
                found.append((obj, spec, container))
    return found


def component(obj: dict) -> str:
    return obj["metadata"]["labels"]["app.kubernetes.io/component"]
