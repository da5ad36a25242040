"""Backends that carry out the autoscaler's decisions: kubernetes, local, dry-run."""

from __future__ import annotations

from autoscaler.backends.base import Backend, BackendError
from autoscaler.config import AutoscalerSettings, PoolSettings

__all__ = ["Backend", "BackendError", "make_backend"]


def make_backend(settings: AutoscalerSettings, pool: PoolSettings) -> Backend:
    """Return the backend STAPEL_AUTOSCALER_BACKEND names, for one pool."""
    if settings.backend == "kubernetes":
        from autoscaler.backends.kubernetes import KubernetesBackend, make_api_client

        return KubernetesBackend(
            make_api_client(),
            settings.namespace,
            pool.deployment,
            pool.name,
            settings.api_timeout_s,
        )
    if settings.backend == "local":
        from autoscaler.backends.local import LocalBackend

        return LocalBackend(pool.name, concurrency=settings.worker_concurrency)
    from autoscaler.backends.dry_run import DryRunBackend

    return DryRunBackend(pool.name, replicas=pool.limits.min)
