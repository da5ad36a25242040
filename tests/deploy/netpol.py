"""Decide whether the rendered NetworkPolicies let one endpoint reach another.

A small evaluator of the NetworkPolicy rules Kubernetes documents: a pod selected by no
policy of a direction is open in that direction; once selected, only what some rule of
a selecting policy allows gets through; a connection needs the source's egress and the
destination's ingress. ipBlock peers match addresses outside the cluster only.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict = field(default_factory=dict)
    namespace_labels: dict = field(default_factory=dict)

    def ns_labels(self) -> dict:
        return {"kubernetes.io/metadata.name": self.namespace, **self.namespace_labels}


@dataclass(frozen=True)
class Address:
    ip: str


def selects(selector: dict | None, labels: dict) -> bool:
    """Return whether a label selector (matchLabels, matchExpressions In/NotIn/...) matches."""
    if selector is None:
        return True
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def peer_matches(peer: dict, policy_ns: str, other: Pod | Address) -> bool:
    if "ipBlock" in peer:
        if not isinstance(other, Address):
            return False
        ip = ipaddress.ip_address(other.ip)
        block = peer["ipBlock"]
        inside = ip in ipaddress.ip_network(block["cidr"])
        return inside and not any(ip in ipaddress.ip_network(e) for e in block.get("except", []))
    if not isinstance(other, Pod):
        return False
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], other.ns_labels()):
            return False
    elif other.namespace != policy_ns:
        return False
    return selects(peer.get("podSelector"), other.labels)


def port_matches(ports: list | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    return any(
        p.get("protocol", "TCP") == protocol and ("port" not in p or p["port"] == port)
        for p in ports
    )


def allowed(
    policies: list[dict], pod: Pod, other: Pod | Address, port: int, protocol: str, direction: str
) -> bool:
    """Return whether pod may send (Egress) to, or receive (Ingress) from, other."""
    key, peers_key = ("egress", "to") if direction == "Egress" else ("ingress", "from")
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == pod.namespace
        and direction in p["spec"].get("policyTypes", ["Ingress"])
        and selects(p["spec"]["podSelector"], pod.labels)
    ]
    if not selecting:
        return True
    return any(
        port_matches(rule.get("ports"), port, protocol)
        and (
            peers_key not in rule
            or any(peer_matches(peer, pod.namespace, other) for peer in rule[peers_key])
        )
        for policy in selecting
        for rule in policy["spec"].get(key, [])
    )


def reaches(
    policies: list[dict], src: Pod, dst: Pod | Address, port: int, protocol: str = "TCP"
) -> bool:
    """Return whether src can open a connection to dst:port under the policies."""
    if not allowed(policies, src, dst, port, protocol, "Egress"):
        return False
    return isinstance(dst, Address) or allowed(policies, dst, src, port, protocol, "Ingress")
