"""A watchdog liveness check whose cost does not grow with the backlog.

Reading every queue list to learn which task messages wait (stapel.broker
.waiting_task_ids) costs a Redis read and a JSON parse per queued chunk, every pass. Most
passes nothing was lost, and that can be seen from counts: if the broker holds at least
as many messages as the DB has chunks queued and sent before the grace cutoff, none of
them is missing, and only chunks never sent need sending. The broker's count is its
list lengths (one LLEN per queue and priority) plus the delivered messages whose task
waits in a live worker's line for room (Redis's `unacked` hash is bounded by the
workers' prefetch, not the backlog). Only when the broker holds fewer (a Redis restart,
`celery purge`, a worker that died between delivery and claim) does the pass read the
lists to find which.

A stale message (a chunk's second copy after a resend) counts as held until a worker
skips it, so a loss at the same time is found a few passes later, not missed.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from stapel.broker import PRIORITY_SEP, waiting_task_ids
from stapel.presence import reserved_task_ids
from stapel.states import Status
from stapel.tables import Chunk, utcnow

UNACKED_KEY = "unacked"
"""kombu's Redis transport: delivery tag -> [message, exchange, routing key]."""


def queue_keys(queues: list[str]) -> list[str]:
    """Return the Redis list keys of the queues at every priority (kombu's naming)."""
    return [q if p == 0 else f"{q}{PRIORITY_SEP}{p}" for q in queues for p in range(10)]


def held_messages(client: redis.Redis, queues: list[str], records: dict[str, dict]) -> int:
    """Return the messages the broker holds for chunks: waiting in lists or in a live line."""
    pipe = client.pipeline(transaction=False)
    for key in queue_keys(queues):
        pipe.llen(key)
    listed = sum(pipe.execute())
    lines = reserved_task_ids(records)
    delivered = 0
    if lines:
        for raw in client.hvals(UNACKED_KEY):
            message = json.loads(raw)[0]
            if str(message.get("headers", {}).get("id", "")) in lines:
                delivered += 1
    return listed + delivered


def expected_messages(session: Session, cutoff: datetime) -> int:
    """Return how many queued chunks were sent before cutoff (each needs a message)."""
    sent_before = (Chunk.sent_at.is_not(None), Chunk.sent_at < cutoff)
    query = select(func.count()).select_from(Chunk).where(Chunk.status == Status.QUEUED)
    return session.scalar(query.where(*sent_before)) or 0


def live_task_ids(
    client: redis.Redis,
    sessions: sessionmaker[Session],
    queues: list[str],
    records: dict[str, dict],
    grace_s: float,
) -> set[str] | None:
    """Return None when no sent chunk's message is missing, else the task ids still waiting.

    None is what stapel.watchdog.reconcile takes as "resend only chunks never sent", so
    a pass with nothing lost reads no list; a pass after a loss reads them all once.
    """
    with sessions() as session:
        expected = expected_messages(session, utcnow() - timedelta(seconds=grace_s))
    if held_messages(client, queues, records) >= expected:
        return None
    return waiting_task_ids(client, queues)
