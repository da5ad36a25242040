"""Scale a pool's Deployment through the official client, marking idle pods cheap first.

API calls made (and all the Role in deploy/base/autoscaler.yaml allows):
  apps/v1 deployments/scale: get, patch      core/v1 pods: list, patch
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from autoscaler.backends.base import BackendError
from autoscaler.victims import WorkerView, deletion_cost

log = logging.getLogger(__name__)
T = TypeVar("T")

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
"""Pods with a lower value are removed first when a ReplicaSet scales down."""

MERGE_PATCH = "application/merge-patch+json"
"""The client defaults to JSON Patch (a list of ops); our bodies are merge patches."""

LIVE_PHASES = ("Pending", "Running")


def _live(pod: client.V1Pod) -> bool:
    """Whether a listed pod counts: pending or running, and not being deleted."""
    meta, status = pod.metadata, pod.status
    return (
        meta is not None
        and meta.deletion_timestamp is None
        and status is not None
        and status.phase in LIVE_PHASES
    )


def make_api_client() -> client.ApiClient:
    """Return an API client: in-cluster config when in a pod, else the kubeconfig.

    Each call passes its own `_request_timeout` (STAPEL_K8S_TIMEOUT_S).
    """
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException:
        config.load_kube_config(client_configuration=configuration)
    configuration.retries = 1
    return client.ApiClient(configuration)


class KubernetesBackend:
    """One pool's Deployment: its scale subresource and the pods it selects."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        deployment: str,
        pool: str,
        timeout_s: float = 10.0,
    ) -> None:
        self.apps, self.core = client.AppsV1Api(api), client.CoreV1Api(api)
        self.namespace, self.deployment, self.pool = namespace, deployment, pool
        self.timeout_s = timeout_s
        self._selector: str | None = None

    def _call(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except ApiException as exc:
            raise BackendError(f"{what}: HTTP {exc.status} {exc.reason}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise BackendError(f"{what}: {type(exc).__name__}: {exc}") from exc

    def replicas(self) -> int:
        scale = self._call(
            "read scale",
            lambda: self.apps.read_namespaced_deployment_scale(
                self.deployment, self.namespace, _request_timeout=self.timeout_s
            ),
        )
        if scale.status is not None and scale.status.selector:
            self._selector = scale.status.selector
        return (scale.spec.replicas if scale.spec else 0) or 0

    def _pods(self) -> list:
        if self._selector is None:
            self.replicas()
        pods = self._call(
            "list pods",
            lambda: self.core.list_namespaced_pod(
                self.namespace, label_selector=self._selector, _request_timeout=self.timeout_s
            ),
        )
        return [p for p in pods.items if _live(p)]

    def workers(self) -> list[str]:
        return [f"{self.pool}@{p.metadata.name}" for p in self._pods()]

    def mark(self, workers: list[WorkerView]) -> int:
        """Annotate every pod with its deletion cost; return how many pods were patched."""
        costs = {w.pod: str(deletion_cost(w)) for w in workers}
        patched = 0
        for pod in self._pods():
            name = pod.metadata.name
            cost = costs.get(name, "0")
            if (pod.metadata.annotations or {}).get(DELETION_COST) == cost:
                continue
            body = {"metadata": {"annotations": {DELETION_COST: cost}}}
            self._call(
                f"patch pod {name}",
                partial(
                    self.core.patch_namespaced_pod,
                    name,
                    self.namespace,
                    body,
                    _content_type=MERGE_PATCH,
                    _request_timeout=self.timeout_s,
                ),
            )
            patched += 1
        return patched

    def scale(self, replicas: int, workers: list[WorkerView]) -> None:
        current = self.replicas()
        if replicas < current:
            patched = self.mark(workers)
            log.info("pods marked for scale-down pool=%s patched=%d", self.pool, patched)
        body = {"spec": {"replicas": replicas}}
        self._call(
            "patch scale",
            lambda: self.apps.patch_namespaced_deployment_scale(
                self.deployment,
                self.namespace,
                body,
                _content_type=MERGE_PATCH,
                _request_timeout=self.timeout_s,
            ),
        )
        log.info(
            "deployment scaled pool=%s deployment=%s from=%d to=%d",
            self.pool,
            self.deployment,
            current,
            replicas,
        )

    def close(self) -> None:
        self.apps.api_client.close()
