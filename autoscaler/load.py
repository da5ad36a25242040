"""Observing a pool: running and queued chunks from the DB, worker views from presence."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from autoscaler.victims import WorkerView
from stapel.tables import Chunk


@dataclass(frozen=True)
class PoolCounts:
    """The DB's view of one pool: chunks running and queued, workers running a chunk."""

    running: int
    queued: int
    busy_workers: frozenset[str]


def read_counts(session: Session, pool: str) -> PoolCounts:
    """Count the pool's running and queued chunks and name the workers running them."""
    by_status = dict(
        session.execute(
            select(Chunk.status, func.count())
            .where(Chunk.pool == pool, Chunk.status.in_(("queued", "running")))
            .group_by(Chunk.status)
        ).all()
    )
    workers = session.scalars(
        select(Chunk.worker)
        .distinct()
        .where(Chunk.pool == pool, Chunk.status == "running", Chunk.worker.is_not(None))
    ).all()
    busy = frozenset(name for name in workers if name is not None)
    return PoolCounts(by_status.get("running", 0), by_status.get("queued", 0), busy)


def worker_views(
    names: list[str], db_busy: frozenset[str], presence: dict[str, dict]
) -> list[WorkerView]:
    """Join the backend's workers with the DB's busy set and their presence records.

    A worker is busy if the DB says it runs a chunk or its presence record says so;
    a worker with no presence record yet (starting) counts as idle with no models.
    """
    views = []
    for name in names:
        record = presence.get(name) or {}
        busy = max(int(record.get("busy") or 0), 1 if name in db_busy else 0)
        views.append(WorkerView(name=name, busy=busy, models=len(record.get("models") or ())))
    return views
