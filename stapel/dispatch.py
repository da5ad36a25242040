"""Sending chunk tasks: the one place that decides a message's priority and queue.

Every path that sends a chunk (the submit route, a worker's hand-back or requeue, the
watchdog's resend, the operator's requeue) calls `dispatch`, so they all agree:
- the priority is the job's `dispatch_priority`, decided once at submit (fair share
  included) and stored on the row, so a resend has the same one as the first send;
- the queue is decided by `route` against the model queues live workers serve now: a
  pool's worker that holds the pair gets it on `<pool>.<pair>`, otherwise the pool's
  shared queue, where any worker takes it and loads the model on demand. The queue is
  not stored: a model queue whose worker died meanwhile would trap the chunk.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime

from celery import Celery
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from stapel.broker import ChunkMessage, send_chunk
from stapel.presence import model_queue
from stapel.states import Status
from stapel.tables import Chunk, Job, db_now, new_id

log = logging.getLogger(__name__)


def route(pool: str, pair: str, served: Collection[str]) -> str:
    """Return the queue for a chunk of pool and pair: its model queue when served."""
    queue = model_queue(pool, pair)
    return queue if queue in served else pool


def messages(
    session: Session,
    served: Collection[str],
    *,
    job_id: str | None = None,
    chunk_ids: Collection[str] | None = None,
    only_unsent: bool = False,
) -> list[ChunkMessage]:
    """Return the messages of the queued chunks selected (a job's, or by id), in order."""
    query = (
        select(
            Chunk.id,
            Chunk.job_id,
            Chunk.pool,
            func.coalesce(Job.dispatch_priority, Job.priority),
            Job.source_lang,
            Job.target_lang,
            Chunk.end_segment - Chunk.first_segment,
        )
        .join(Job, Job.id == Chunk.job_id)
        .where(Chunk.status == Status.QUEUED)
        .order_by(Chunk.created_at, Chunk.idx)
    )
    if job_id is not None:
        query = query.where(Chunk.job_id == job_id)
    if chunk_ids is not None:
        query = query.where(Chunk.id.in_(list(chunk_ids)))
    if only_unsent:
        query = query.where(Chunk.sent_at.is_(None))
    return [
        ChunkMessage(cid, jid, pool, prio, route(pool, f"{src}-{tgt}", served), size)
        for cid, jid, pool, prio, src, tgt, size in session.execute(query)
    ]


def dispatch(
    session: Session,
    celery: Celery,
    served: Collection[str],
    *,
    job_id: str | None = None,
    chunk_ids: Collection[str] | None = None,
    only_unsent: bool = False,
    leased: dict[str, str] | None = None,
) -> list[ChunkMessage]:
    """Send the queued chunks selected and record each one's task id and send time.

    `leased` (chunk id -> task id) is for the watchdog, which has already recorded the
    task ids with a compare-and-set (so two watchdogs send a chunk once): those chunks
    are sent under these ids and not marked again. Sending stops at the first broker
    failure; the watchdog sends the rest. Returns the messages sent.
    """
    if leased is not None:
        chunk_ids = list(leased)
    found = messages(session, served, job_id=job_id, chunk_ids=chunk_ids, only_unsent=only_unsent)
    session.commit()  # no transaction open while talking to the broker
    sent: dict[str, str] = {}
    done: list[ChunkMessage] = []
    for message in found:
        task_id = leased[message.chunk_id] if leased is not None else new_id()
        if not send_chunk(celery, message, task_id):
            break
        sent[message.chunk_id] = task_id
        done.append(message)
    if leased is None:
        mark_sent(session, sent)
    return done


def mark_sent(session: Session, sent: dict[str, str], now: datetime | None = None) -> None:
    """Record the task id and time each chunk was sent with (chunk id -> task id)."""
    if not sent:
        return
    # the database's clock: the watchdog compares sent_at with its own reading of it
    now = now or session.scalar(select(db_now()))
    session.execute(
        update(Chunk),
        [{"id": cid, "task_id": tid, "sent_at": now} for cid, tid in sent.items()],
    )
    session.commit()
