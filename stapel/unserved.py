"""Queued work that no live worker consumes: a pool whose only consumer died.

The watchdog requeues a chunk whose worker stopped heartbeating, but a chunk that was
never claimed has no heartbeat to go stale: with every consumer of its pool gone it
waits in Redis, and nothing else would say so. Live workers are their presence records
(stapel.presence), refreshed every few seconds; a pool counts as unserved when chunks
have waited in it longer than `min_age_s` and no record names the pool.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stapel.presence import PRESENCE_INTERVAL_S
from stapel.states import Status
from stapel.tables import Chunk, db_now

MIN_AGE_S = 2 * PRESENCE_INTERVAL_S
"""The least a chunk must have waited: a live worker republishes its presence sooner."""


def served_pools(records: dict[str, dict]) -> set[str]:
    """Return the pools at least one live worker consumes."""
    return {str(r["pool"]) for r in records.values() if r.get("pool")}


def unserved_chunks(
    session: Session, records: dict[str, dict], min_age_s: float = MIN_AGE_S
) -> dict[str, int]:
    """Return pool -> chunks queued longer than min_age_s, for the pools nobody consumes."""
    waiting = session.execute(
        select(Chunk.pool, func.count())
        .where(Chunk.status == Status.QUEUED, Chunk.created_at < db_now(-min_age_s))
        .group_by(Chunk.pool)
    ).all()
    served = served_pools(records)
    return {pool: count for pool, count in waiting if pool not in served}
