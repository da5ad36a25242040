"""The one small interface every backend implements, and its error."""

from __future__ import annotations

from typing import Protocol

from autoscaler.victims import WorkerView


class BackendError(Exception):
    """The backend could not be read or changed now (API server down, refused, ...)."""


class Backend(Protocol):
    """Reads and sets one pool's replicas and names its workers."""

    def replicas(self) -> int:
        """Return the replicas the pool is set to now."""
        ...

    def workers(self) -> list[str]:
        """Return the Celery hostnames of the pool's live workers."""
        ...

    def scale(self, replicas: int, workers: list[WorkerView]) -> None:
        """Set the pool to replicas; on a scale-down, remove idle workers first."""
        ...

    def close(self) -> object:
        """Release what the backend holds (the local backend stops its workers).

        The loop ignores what it returns (the local backend says whether all exited).
        """
        ...
