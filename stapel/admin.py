"""Operator actions on any tenant's jobs: requeue, cancel, purge (`flask --app app jobs`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import Celery
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from stapel import jobs
from stapel.dispatch import dispatch
from stapel.dispatch import messages as dispatch_messages
from stapel.exceptions import Conflict, NotFound
from stapel.presence import Room
from stapel.states import FINAL, Status
from stapel.tables import Chunk, Document, Job, Segment, utcnow

log = logging.getLogger(__name__)


def find_job(session: Session, job_id: str) -> Job:
    """Return the job with this id, whatever its tenant, or raise NotFound."""
    job = session.get(Job, job_id)
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
    job = find_job(session, job_id)
    if job.status == Status.SUCCEEDED:
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
        )
    )
    session.commit()
    chunks = len(dispatch_messages(session, served, job_id=job_id))
    sent = len(dispatch(session, celery, served, job_id=job_id))
    log.info("job requeued by operator logid=%s chunks=%d sent=%d", job_id, chunks, sent)
    return Requeued(chunks, sent)


def cancel_job(session: Session, job_id: str) -> Job:
    """Cancel any tenant's queued or running job (Conflict if it already ended)."""
    job = find_job(session, job_id)
    return jobs.cancel_job(session, job.tenant_id, job_id)


def purge_jobs(session: Session, older_than_days: float, now: datetime | None = None) -> int:
    """Delete jobs that ended more than older_than_days ago, with all their rows."""
    cutoff = (now or utcnow()) - timedelta(days=older_than_days)
    ids = list(
        session.scalars(select(Job.id).where(Job.status.in_(FINAL), Job.finished_at < cutoff))
    )
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        for table in (Segment, Document, Chunk):
            session.execute(delete(table).where(table.job_id.in_(part)))
        session.execute(delete(Job).where(Job.id.in_(part)))
        session.commit()
    log.info("purged jobs count=%d older_than_days=%g", len(ids), older_than_days)
    return len(ids)
