"""Operator actions on any tenant's jobs: requeue, cancel, purge (`flask --app app jobs`)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app import jobs
from app.exceptions import Conflict, NotFound
from app.models import FINAL_STATES, Chunk, Document, Job, Segment, utcnow

log = logging.getLogger(__name__)


def find_job(session: Session, job_id: str) -> Job:
    """Return the job with this id, whatever its tenant, or raise NotFound."""
    job = session.get(Job, job_id)
    if job is None:
        raise NotFound(f"no job with id {job_id!r}")
    return job


def requeue_job(session: Session, job_id: str) -> list[jobs.ChunkMessage]:
    """Put a failed, cancelled or stuck job's unfinished chunks back in the queue.

    Translated segments are kept (a requeued chunk resumes); attempts start again.
    Returns the messages to send. A succeeded job cannot be requeued (Conflict).
    """
    job = find_job(session, job_id)
    if job.status == "succeeded":
        raise Conflict(f"job {job_id} already succeeded", code="job_finished")
    session.execute(
        update(Chunk)
        .where(Chunk.job_id == job_id, Chunk.status != "succeeded")
        .values(status="queued", attempts=0, claim_token=None, sent_at=None, task_id=None,
                finished_at=None, error=None)
    )
    session.execute(
        update(Job).where(Job.id == job_id)
        .values(status="queued", error=None, finished_at=None, callback_status=None,
                callback_attempts=0, callback_next_at=None)
    )
    session.commit()
    messages = jobs.chunk_messages(session, job_id)
    log.info("job requeued by operator logid=%s chunks=%d", job_id, len(messages))
    return messages


def cancel_job(session: Session, job_id: str) -> Job:
    """Cancel any tenant's queued or running job (Conflict if it already ended)."""
    job = find_job(session, job_id)
    return jobs.cancel_job(session, job.tenant_id, job_id)


def purge_jobs(session: Session, older_than_days: float, now: datetime | None = None) -> int:
    """Delete jobs that ended more than older_than_days ago, with all their rows."""
    cutoff = (now or utcnow()) - timedelta(days=older_than_days)
    ids = list(session.scalars(
        select(Job.id).where(Job.status.in_(FINAL_STATES), Job.finished_at < cutoff)))
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        for table in (Segment, Document, Chunk):
            session.execute(delete(table).where(table.job_id.in_(part)))
        session.execute(delete(Job).where(Job.id.in_(part)))
        session.commit()
    log.info("purged jobs count=%d older_than_days=%g", len(ids), older_than_days)
    return len(ids)
