"""Operator actions on any tenant's jobs: requeue, cancel, purge (`flask --app app jobs`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from celery import Celery
from sqlalchemy import ColumnElement, and_, delete, or_, select, update
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session

from stapel import callbacks, jobs
from stapel.db import affected
from stapel.dispatch import dispatch
from stapel.dispatch import messages as dispatch_messages
from stapel.exceptions import Conflict, NotFound
from stapel.locking import job_status, lock_job, lock_jobs_for_delete, retry_conflicts
from stapel.presence import Room
from stapel.states import FINAL, CallbackStatus, Status
from stapel.tables import Chunk, Document, Job, Segment, db_now, is_id

log = logging.getLogger(__name__)


def find_job(session: Session, job_id: str) -> Job:
    """Return the job with this id, whatever its tenant, or raise NotFound."""
    job = session.get(Job, job_id) if is_id(job_id) else None
    if job is None:
        raise NotFound(f"no job with id {job_id!r}")
    return job


@dataclass(frozen=True)
class Requeued:
    """What an operator's requeue did: chunks put back, and how many were sent."""

    chunks: int
    sent: int


def requeue_job(session: Session, celery: Celery, served: Room, job_id: str) -> Requeued:
    """Put a failed, cancelled or stuck job's unfinished chunks back in the queue, send them.

    Translated segments are kept (a requeued chunk resumes); attempts start again. A
    succeeded job cannot be requeued (Conflict). Chunks the broker did not take are the
    watchdog's to send.
    """
    _reset(session, job_id)
    chunks = len(dispatch_messages(session, served, job_id=job_id))
    sent = len(dispatch(session, celery, served, job_id=job_id))
    log.info("job requeued by operator logid=%s chunks=%d sent=%d", job_id, chunks, sent)
    return Requeued(chunks, sent)


@retry_conflicts
def _reset(session: Session, job_id: str) -> None:
    """Put the job's unfinished chunks and the job back to `queued` (job locked first)."""
    lock_job(session, job_id)
    status = job_status(session, job_id)
    if status is None:
        session.rollback()
        raise NotFound(f"no job with id {job_id!r}")
    if status == Status.SUCCEEDED:
        session.rollback()
        raise Conflict(f"job {job_id} already succeeded", code="job_finished")
    session.execute(
        update(Chunk)
        .where(Chunk.job_id == job_id, Chunk.status != Status.SUCCEEDED)
        .values(
            status=Status.QUEUED,
            attempts=0,
            claim_token=None,
            sent_at=None,
            task_id=None,
            finished_at=None,
            error=None,
        )
    )
    session.execute(
        update(Job)
        .where(Job.id == job_id)
        .values(
            status=Status.QUEUED,
            error=None,
            finished_at=None,
            callback_status=None,
            callback_attempts=0,
            callback_next_at=None,
            callback_lease_until=None,
        )
    )
    session.commit()


def cancel_job(session: Session, job_id: str) -> Job:
    """Cancel any tenant's queued or running job (Conflict if it already ended)."""
    job = find_job(session, job_id)
    return jobs.cancel_job(session, job.tenant_id, job_id)


PURGE_BATCH_SEGMENTS = 20_000
"""Segments deleted per transaction at most (a larger job is deleted alone)."""
PURGE_BATCH_JOBS = 200


def purgeable(older_than_days: float, callback_window_s: float) -> ColumnElement[bool]:
    """The condition of a job purge may delete now (checked again in the DELETE itself).

    Ended more than older_than_days ago (the database's clock), and not a job whose
    callback is still pending within its retry window.
    """
    recent = Job.finished_at > db_now(-callback_window_s)
    return and_(
        Job.status.in_(FINAL),
        Job.finished_at < db_now(-older_than_days * 86400),
        or_(Job.callback_status.is_(None), Job.callback_status != CallbackStatus.PENDING, ~recent),
    )


def purge_jobs(
    session: Session,
    older_than_days: float,
    *,
    callback_deadline_s: float = 10.0,
    batch_segments: int = PURGE_BATCH_SEGMENTS,
) -> int:
    """Delete jobs that ended more than older_than_days ago, with all their rows.

    Works in short transactions of at most batch_segments segments (one larger job
    alone), each locking its jobs first and re-checking in every DELETE that they still
    may go, so a job requeued meanwhile keeps all its rows.
    """
    condition = purgeable(older_than_days, callbacks.retry_window_s(callback_deadline_s))
    purged, after = 0, ""
    while True:
        rows = session.execute(
            select(Job.id, Job.segments_total)
            .where(condition, Job.id > after)
            .order_by(Job.id)
            .limit(PURGE_BATCH_JOBS)
        ).all()
        session.commit()
        if not rows:
            break
        after = rows[-1].id
        for batch in _batches(rows, batch_segments):
            purged += _purge_batch(session, batch, condition)
    log.info("purged jobs count=%d older_than_days=%g", purged, older_than_days)
    return purged


def _batches(rows: Sequence[Row], limit: int) -> list[list[str]]:
    batches: list[list[str]] = [[]]
    size = 0
    for job_id, segments in rows:
        if batches[-1] and size + segments > limit:
            batches.append([])
            size = 0
        batches[-1].append(job_id)
        size += segments
    return batches


@retry_conflicts
def _purge_batch(session: Session, ids: list[str], condition: ColumnElement[bool]) -> int:
    lock_jobs_for_delete(session, ids)
    still = select(Job.id).where(Job.id.in_(ids), condition)
    for table in (Segment, Document, Chunk):
        session.execute(delete(table).where(table.job_id.in_(still)))
    count = affected(session, delete(Job).where(Job.id.in_(ids), condition))
    session.commit()
    return count
