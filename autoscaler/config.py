"""Autoscaler settings, read from the environment in one place and parsed to real types."""

from __future__ import annotations

import os
from dataclasses import dataclass

from stapel.settings import (
    DEFAULT_DATABASE_URL,
    DEFAULT_REDIS_URL,
    env_float,  # one parser for every process's settings
    env_int,
)

POOLS = ("cpu", "gpu")
"""The worker pools, each with its own control loop and Celery queue."""

BACKENDS = ("local", "kubernetes", "dry-run")


@dataclass(frozen=True)
class PoolLimits:
    """How one pool may be scaled; see docs/autoscaling.md for each field."""

    min: int = 0
    max: int = 4
    standby: int = 1
    scale_down_delay_s: float = 300.0
    chunks_per_worker: int = 1
    queued_per_worker: int = 1
    unserved_grace_s: float = 60.0

    def __post_init__(self) -> None:
        if not 0 <= self.min <= self.max:
            raise ValueError(f"need 0 <= min <= max, got min={self.min} max={self.max}")
        if self.standby < 0 or self.scale_down_delay_s < 0 or self.unserved_grace_s < 0:
            raise ValueError("standby and the delays must not be negative")
        if self.chunks_per_worker < 1 or self.queued_per_worker < 1:
            raise ValueError("chunks_per_worker and queued_per_worker must be at least 1")


@dataclass(frozen=True)
class PoolSettings:
    """One pool's limits, poll interval and the Deployment that runs its workers."""

    name: str
    limits: PoolLimits
    poll_s: float = 15.0
    deployment: str = ""

    @property
    def enabled(self) -> bool:
        return self.limits.max > 0


DEFAULT_LIMITS = {
    "cpu": PoolLimits(min=1, max=4, standby=1),
    # a GPU node the cluster adds for a pod can take minutes to join
    "gpu": PoolLimits(min=0, max=2, standby=0, unserved_grace_s=300.0),
}


@dataclass(frozen=True)
class AutoscalerSettings:
    """Everything the autoscaler process reads from its environment."""

    backend: str = "dry-run"
    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str = DEFAULT_REDIS_URL
    pools: tuple[PoolSettings, ...] = ()
    namespace: str = "default"
    api_timeout_s: float = 10.0
    worker_concurrency: int = 128

    def pool(self, name: str) -> PoolSettings:
        """Return the settings of the named pool."""
        return next(p for p in self.pools if p.name == name)

    @classmethod
    def from_env(cls, env: dict | None = None) -> AutoscalerSettings:
        """Build settings from STAPEL_AUTOSCALER_*, STAPEL_<POOL>_*, DATABASE_URL, REDIS_URL."""
        env = dict(os.environ if env is None else env)
        backend = env.get("STAPEL_AUTOSCALER_BACKEND") or "dry-run"
        if backend not in BACKENDS:
            raise ValueError(f"STAPEL_AUTOSCALER_BACKEND must be one of {', '.join(BACKENDS)}")
        return cls(
            backend=backend,
            database_url=env.get("DATABASE_URL") or DEFAULT_DATABASE_URL,
            redis_url=env.get("REDIS_URL") or DEFAULT_REDIS_URL,
            pools=tuple(_pool_from_env(env, name) for name in POOLS),
            namespace=env.get("STAPEL_K8S_NAMESPACE") or _incluster_namespace() or "default",
            api_timeout_s=env_float(env, "STAPEL_K8S_TIMEOUT_S", 10.0),
            worker_concurrency=env_int(env, "STAPEL_WORKER_CONCURRENCY", 128),
        )


def _pool_from_env(env: dict, name: str) -> PoolSettings:
    prefix, default = f"STAPEL_{name.upper()}_", DEFAULT_LIMITS[name]
    limits = PoolLimits(
        min=env_int(env, prefix + "MIN", default.min),
        max=env_int(env, prefix + "MAX", default.max),
        standby=env_int(env, prefix + "STANDBY", default.standby),
        scale_down_delay_s=env_float(
            env, prefix + "SCALE_DOWN_DELAY_S", default.scale_down_delay_s
        ),
        chunks_per_worker=env_int(env, prefix + "CHUNKS_PER_WORKER", 1),
        queued_per_worker=env_int(env, prefix + "QUEUED_PER_WORKER", 1),
        unserved_grace_s=env_float(env, prefix + "UNSERVED_GRACE_S", default.unserved_grace_s),
    )
    return PoolSettings(
        name=name,
        limits=limits,
        poll_s=env_float(env, prefix + "POLL_S", 15.0),
        deployment=env.get(prefix + "DEPLOYMENT") or f"stapel-worker-{name}",
    )


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _incluster_namespace() -> str | None:
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE) as f:
            return f.read().strip() or None
    except OSError:
        return None
