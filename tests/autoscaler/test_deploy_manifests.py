"""The autoscaler's Role in deploy/ allows exactly the calls its Kubernetes backend makes."""

from __future__ import annotations

import pytest

from autoscaler.victims import WorkerView
from tests.deploy.render import OVERLAYS, by_key, pod_spec, rendered


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


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_role_allows_exactly_the_calls_the_backend_makes(backend, kube, overlay):
    backend.scale(4, [])
    backend.scale(1, [WorkerView(name) for name in backend.workers()])
    made = {rbac_of(r.method, r.path) for r in kube.requests}
    objects = by_key(rendered(overlay))
    role = objects[("Role", "stapel-autoscaler")]
    allowed = {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert made == allowed
    autoscaler = objects[("Deployment", "stapel-autoscaler")]
    account = pod_spec(autoscaler)["serviceAccountName"]
    binding = objects[("RoleBinding", "stapel-autoscaler")]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": "stapel"}
    ]
    assert ("ServiceAccount", account) in objects
