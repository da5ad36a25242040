"""The admission policy lets the autoscaler change a pod's deletion cost and nothing else.

Its CEL expressions are evaluated here with cel-python against pod updates, the way the
API server evaluates them (matchConditions, then variables in order, then validations).
"""

from __future__ import annotations

import copy

import celpy
import pytest
import yaml
from celpy import celtypes, json_to_cel

from tests.deploy.render import DEPLOY, by_key, rendered

COST = "controller.kubernetes.io/pod-deletion-cost"
AUTOSCALER = "system:serviceaccount:stapel:stapel-autoscaler"
POD = {
    "metadata": {
        "name": "stapel-worker-cpu-abc",
        "labels": {"app.kubernetes.io/component": "worker-cpu"},
        "annotations": {"prometheus.io/scrape": "true"},
        "ownerReferences": [{"kind": "ReplicaSet", "name": "stapel-worker-cpu-5d"}],
    },
    "spec": {"containers": [{"name": "worker", "image": "stapel:0.3.0"}]},
}


def policy() -> dict:
    return by_key(rendered("production"))[
        ("ValidatingAdmissionPolicy", "stapel-autoscaler-pod-patch")
    ]


def decide(spec: dict, old: dict, new: dict, user: str = AUTOSCALER) -> str:
    """Return 'skipped' (not matched), 'allowed', or the first failing validation's message."""
    env = celpy.Environment()

    def evaluate(expression: str, activation: dict):
        return env.program(env.compile(expression)).evaluate(activation)

    request = {"userInfo": {"username": user}, "namespace": "stapel", "operation": "UPDATE"}
    activation = {"object": json_to_cel(new), "oldObject": json_to_cel(old)}
    activation["request"] = json_to_cel(request)
    if not all(evaluate(c["expression"], activation) for c in spec["matchConditions"]):
        return "skipped"
    variables: dict = {}
    for variable in spec["variables"]:
        scope = {**activation, "variables": celtypes.MapType(variables)}
        variables[variable["name"]] = evaluate(variable["expression"], scope)
    activation["variables"] = celtypes.MapType(variables)
    for validation in spec["validations"]:
        if not evaluate(validation["expression"], activation):
            return validation["message"]
    return "allowed"


def changed(change) -> dict:
    pod = copy.deepcopy(POD)
    change(pod)
    return pod


def set_cost(pod: dict, value: str = "-3") -> None:
    pod["metadata"]["annotations"][COST] = value


CASES = [
    ("set the cost", set_cost, "allowed"),
    (
        "drop the others, set the cost",
        lambda p: p["metadata"].update(annotations={}) or set_cost(p),
        "may change the pod-deletion-cost annotation only",
    ),
    ("swap the image", lambda p: p["spec"]["containers"][0].update(image="evil"), "spec"),
    ("relabel out of the ReplicaSet", lambda p: p["metadata"]["labels"].clear(), "labels"),
    ("another annotation", lambda p: p["metadata"]["annotations"].update(x="1"), "annotation"),
    ("drop an annotation", lambda p: p["metadata"]["annotations"].clear(), "annotation"),
    ("orphan the pod", lambda p: p["metadata"].pop("ownerReferences"), "owners"),
    ("add a finalizer", lambda p: p["metadata"].update(finalizers=["x/y"]), "finalizers"),
]


@pytest.mark.parametrize("change, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_autoscaler_pod_updates(change, expected):
    outcome = decide(policy()["spec"], POD, changed(change))
    assert expected in outcome if expected != "allowed" else outcome == "allowed"


def test_a_pod_without_annotations_may_get_its_first_cost():
    bare = copy.deepcopy(POD)
    del bare["metadata"]["annotations"]
    with_cost = copy.deepcopy(bare)
    with_cost["metadata"]["annotations"] = {COST: "0"}
    assert decide(policy()["spec"], bare, with_cost) == "allowed"


def test_other_accounts_are_left_to_rbac():
    spec = policy()["spec"]
    swapped = changed(lambda p: p["spec"]["containers"][0].update(image="x"))
    assert decide(spec, POD, swapped, user="system:serviceaccount:stapel:deployer") == "skipped"
    assert decide(spec, POD, swapped, user="system:serviceaccount:other:stapel-autoscaler") == (
        "skipped"
    )


def test_binding_denies_and_names_the_policy():
    binding = by_key(rendered("production"))[
        ("ValidatingAdmissionPolicyBinding", "stapel-autoscaler-pod-patch")
    ]
    assert binding["spec"] == {
        "policyName": policy()["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    source = next(
        yaml.safe_load_all((DEPLOY / "cluster" / "autoscaler-admission.yaml").read_text())
    )
    assert source["spec"]["failurePolicy"] == "Fail"
