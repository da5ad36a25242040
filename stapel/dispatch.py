"""Dispatching chunks: which to send, to which queue, at which priority; marking them sent.

The send itself is stapel.broker's (`send_chunk`). Every path that sends a chunk (the
submit route, a worker's hand-back or requeue, the watchdog's resend, the operator's
requeue) calls `dispatch`, so they all agree:
- the priority is the job's `dispatch_priority`, decided once at submit (fair share
  included) and stored on the row, so a resend has the same one as the first send;
- the queue is decided by `route`, and locality is a preference, never a trap: a chunk
  goes to its model queue `<pool>.<pair>` only while a live worker that holds the pair
  has room for it now (its presence record: budget less held and waiting segments);
  otherwise to the pool's shared queue, which every worker of the pool consumes and
  where any of them takes it and loads the model on demand. A model queue is consumed
  only by the workers holding the pair, so work sent there while they are full would
  wait for them however many idle workers the autoscaler starts.
- the room is spent as chunks are routed, so a burst does not send a full worker more
  than it has room for within one presence period;
- a hand-back (a worker that had no room) passes no room: it always goes to the pool
  queue, never back to the model queue it came from.
The queue is not stored: a model queue whose worker died meanwhile would trap the chunk.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime

from celery import Celery
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from stapel.broker import ChunkMessage, send_chunk
from stapel.jobs import StoredJob
from stapel.presence import Room, model_queue
from stapel.states import Status
from stapel.tables import Chunk, Job, db_now, new_id

log = logging.getLogger(__name__)


def route(pool: str, pair: str, segments: int, room: Mapping[str, int]) -> str:
    """Return the queue for a chunk: its model queue while a worker there has room, else pool.

    `room` is model queue -> free segments of its roomiest live worker
    (stapel.presence.model_room); a hand-back passes none and goes to the pool queue.
    """
    queue = model_queue(pool, pair)
    return queue if queue in room and room[queue] >= max(segments, 1) else pool


def messages(
    session: Session,
    room: Mapping[str, int],
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
    return _routed(
        (
            (cid, jid, pool, prio, f"{src}-{tgt}", size)
            for cid, jid, pool, prio, src, tgt, size in session.execute(query)
        ),
        room,
    )


def _routed(
    chunks: Iterable[tuple[str, str, str, int, str, int]], room: Mapping[str, int]
) -> list[ChunkMessage]:
    """Route (chunk id, job id, pool, priority, pair, segments) rows, spending room in order."""
    left = dict(room)  # what this batch's earlier chunks have not taken yet
    found = []
    for chunk_id, job_id, pool, priority, pair, size in chunks:
        queue = route(pool, pair, size, left)
        if queue != pool:
            left[queue] -= size
        found.append(ChunkMessage(chunk_id, job_id, pool, priority, queue, size))
    return found


def dispatch_stored(
    celery: Celery, room: Room, stored: StoredJob, *, pending: tuple[str, str] | None = None
) -> list[ChunkMessage]:
    """Send the chunks of a job just stored, under the task ids recorded with them.

    The submit path records each chunk's task id and send time in the insert, so the
    first send reads and writes nothing more; if the broker does not take a message,
    the watchdog finds its task id missing from Redis and sends it again. The first
    message's round trip also ends the submission's `pending` place (stapel.quotas).
    """
    job = stored.job
    priority = job.priority if job.dispatch_priority is None else job.dispatch_priority
    found = _routed(
        (
            (chunk_id, job.id, job.pool, priority, job.pair, size)
            for chunk_id, size in stored.chunks
        ),
        room,
    )
    return _send(celery, found, stored.task_ids, room, pending)


def _send(
    celery: Celery,
    found: list[ChunkMessage],
    task_ids: dict[str, str],
    room: Room,
    pending: tuple[str, str] | None = None,
) -> list[ChunkMessage]:
    """Send messages under their task ids, stopping at the first broker failure."""
    done: list[ChunkMessage] = []
    for message in found:
        if not send_chunk(celery, message, task_ids[message.chunk_id], pending=pending):
            break
        pending = None
        done.append(message)
        if message.queue != message.pool:  # spent: later sends in this view see it taken
            room[message.queue] = room.get(message.queue, 0) - message.segments
    return done


def dispatch(
    session: Session,
    celery: Celery,
    room: Room,
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
    found = messages(session, room, job_id=job_id, chunk_ids=chunk_ids, only_unsent=only_unsent)
    session.commit()  # no transaction open while talking to the broker
    task_ids = leased if leased is not None else {m.chunk_id: new_id() for m in found}
    done = _send(celery, found, task_ids, room)
    if leased is None:
        mark_sent(session, {m.chunk_id: task_ids[m.chunk_id] for m in done})
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
