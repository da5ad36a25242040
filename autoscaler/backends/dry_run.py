"""A backend that only logs what it would do, starting from the pool's minimum."""

from __future__ import annotations

import logging

from autoscaler.victims import WorkerView, removal_order

log = logging.getLogger(__name__)


class DryRunBackend:
    """Pretends to scale: remembers the replicas it was told and logs every change."""

    def __init__(self, pool: str, replicas: int = 0) -> None:
        self.pool, self._replicas = pool, replicas

    def replicas(self) -> int:
        return self._replicas

    def workers(self) -> list[str]:
        return []

    def scale(self, replicas: int, workers: list[WorkerView]) -> None:
        order = ",".join(w.name for w in removal_order(workers)) or "-"
        log.info(
            "dry-run would scale pool=%s from=%d to=%d removal_order=%s",
            self.pool,
            self._replicas,
            replicas,
            order,
        )
        self._replicas = replicas

    def close(self) -> None:
        pass
