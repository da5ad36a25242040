"""Which workers go first on a scale-down: idle before busy, fewest models loaded first."""

from __future__ import annotations

from dataclasses import dataclass

BUSY_COST = 1_000_000
"""Added to a busy worker's deletion cost so that every idle worker goes before it."""

MAX_COST = 2**31 - 1
"""The annotation is an int32."""


@dataclass(frozen=True)
class WorkerView:
    """One worker as the autoscaler sees it: Celery hostname, running tasks, loaded models."""

    name: str
    busy: int = 0
    models: int = 0

    @property
    def pod(self) -> str:
        """Return the pod (host) name: the part of `cpu@pod` after '@'."""
        return self.name.rpartition("@")[2]


def deletion_cost(worker: WorkerView) -> int:
    """Return the pod-deletion-cost of a worker: lower is removed first."""
    cost = worker.models if worker.busy <= 0 else BUSY_COST + 1000 * worker.busy + worker.models
    return min(cost, MAX_COST)


def removal_order(workers: list[WorkerView]) -> list[WorkerView]:
    """Return the workers cheapest first (ties broken by name, for stable results)."""
    return sorted(workers, key=lambda w: (deletion_cost(w), w.name))


def idle_victims(workers: list[WorkerView], count: int) -> list[WorkerView]:
    """Return up to count idle workers to stop, cheapest first; busy ones never."""
    return [w for w in removal_order(workers) if w.busy <= 0][: max(count, 0)]
