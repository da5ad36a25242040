"""The NetworkPolicies let through exactly the connections Stapel needs."""

from __future__ import annotations

import pytest

from tests.deploy.netpol import Address, Pod, reaches
from tests.deploy.render import OVERLAYS, WORKLOADS, component, rendered

INGRESS = Pod("ingress-nginx", {"app": "ingress-nginx"})
MONITORING = Pod("monitoring", {"app": "prometheus"})
OPERATORS = Pod("ops", {"app": "vpn"}, {"stapel.io/operators": "true"})
ELSEWHERE = Pod("default", {"app": "anything"})
DNS = Pod("kube-system", {"k8s-app": "kube-dns"})
DATABASE = Address("10.20.0.5")
API_SERVER = Address("10.0.0.1")
PUBLIC = Address("93.184.216.34")
METADATA = Address("169.254.169.254")
PRIVATE = Address("192.168.1.10")

REDIS_CLIENTS = {"web", "worker-cpu", "worker-gpu", "beat", "callbacks", "flower", "autoscaler"}
DATABASE_CLIENTS = {"web", "worker-cpu", "worker-gpu", "beat", "callbacks", "autoscaler", "migrate"}
CALLBACK_SENDERS = {"callbacks"}
"""Pods consuming the `callbacks` queue, where callback deliveries run."""


def setup(overlay: str) -> tuple[list[dict], dict[str, Pod]]:
    objects = rendered(overlay)
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    pods = {
        component(o): Pod("stapel", o["spec"]["template"]["metadata"]["labels"])
        for o in objects
        if o["kind"] in WORKLOADS
    }
    return policies, pods


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_ingress_only_from_where_each_listener_is_used(overlay):
    policies, pods = setup(overlay)
    outsiders = [INGRESS, MONITORING, OPERATORS, ELSEWHERE]
    expected = {
        ("web", 8000): {"ingress-nginx", "monitoring"},
        ("flower", 5555): {"ops"},
        ("redis", 6379): set(),
        ("worker-cpu", 9100): {"monitoring"},
        ("worker-gpu", 9100): {"monitoring"},
    }
    for (name, port), sources in expected.items():
        if name not in pods:
            continue
        got = {o.namespace for o in outsiders if reaches(policies, o, pods[name], port)}
        assert got == sources, (name, port)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_redis_only_from_stapel_processes_that_use_it(overlay):
    policies, pods = setup(overlay)
    got = {name for name, pod in pods.items() if reaches(policies, pod, pods["redis"], 6379)}
    assert got == REDIS_CLIENTS & pods.keys()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_egress_only_to_what_each_process_talks_to(overlay):
    policies, pods = setup(overlay)
    for name, pod in pods.items():
        assert reaches(policies, pod, DNS, 53, "UDP"), name
        assert reaches(policies, pod, DATABASE, 5432) == (name in DATABASE_CLIENTS), name
        assert reaches(policies, pod, API_SERVER, 443) == (name == "autoscaler"), name
        assert reaches(policies, pod, API_SERVER, 6443) == (name == "autoscaler"), name
        # The API server's address is the cluster's (often public on managed clusters).
        https_out = CALLBACK_SENDERS | {"autoscaler"}
        assert reaches(policies, pod, PUBLIC, 443) == (name in https_out), name
        assert reaches(policies, pod, PUBLIC, 8080) == (name in CALLBACK_SENDERS), name
        assert not reaches(policies, pod, METADATA, 80), name
        assert not reaches(policies, pod, PRIVATE, 8080), name
        assert not reaches(policies, pod, ELSEWHERE, 8080), name
        for other_name, other in pods.items():
            if other_name != "redis":
                assert not reaches(policies, pod, other, 8000), (name, other_name)
                assert not reaches(policies, pod, other, 9100), (name, other_name)
