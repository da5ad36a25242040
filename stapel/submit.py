"""The submit use case: idempotency, quota, the job's rows, then its chunks' dispatch."""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

import redis
from celery import Celery
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session

from stapel import jobs, quotas
from stapel.dispatch import dispatch
from stapel.jobs import JobSpec
from stapel.settings import Settings
from stapel.tables import Job

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Submitted:
    """The job a submission stands for, and whether this call stored it."""

    job: Job
    created: bool


def submit(
    session: Session,
    client: redis.Redis,
    celery: Celery,
    served: Collection[str],
    settings: Settings,
    tenant_id: str,
    spec: JobSpec,
    *,
    fair_share: bool = True,
) -> Submitted:
    """Store a validated job for the tenant and send its chunks; replay an idempotent one.

    Raises QuotaExceeded when a quota would be passed. A job with the tenant's
    Idempotency-Key already stored is returned as it is (nothing charged, nothing sent).
    The effective priority (fair share: lower for a tenant with many jobs in flight) is
    decided here once and stored on the job, so every later send uses it too;
    `fair_share=False` keeps the spec's priority (the interactive lane, stapel.interactive).
    """
    if spec.idempotency_key:
        existing = jobs.by_idempotency_key(session, tenant_id, spec.idempotency_key)
        if existing is not None:
            return Submitted(existing, False)
    with quotas.admit(
        client,
        session,
        tenant_id,
        spec.segments_total,
        segments_limit=settings.quota_segments_per_day,
        jobs_limit=settings.quota_jobs_in_flight,
    ) as flying:
        priority = spec.priority
        if fair_share:
            priority = quotas.fair_priority(spec.priority, flying, settings.fair_share_step)
        job, created = jobs.create_job(
            session,
            tenant_id,
            spec,
            gpu_threshold=settings.gpu_threshold,
            chunk_segments=settings.chunk_segments,
            dispatch_priority=priority,
        )
    if not created:  # a concurrent request with the same key stored it first
        quotas.refund(client, tenant_id, spec.segments_total)
        return Submitted(job, False)
    session.expunge(job)  # a rollback below must not expire what the caller answers with
    _send(session, celery, served, job.id)
    return Submitted(job, True)


def _send(session: Session, celery: Celery, served: Collection[str], job_id: str) -> None:
    """Send a stored job's chunks; a failure here is the watchdog's to repair, not a 503.

    The job is committed, so the client must hear 202: answering an error would make it
    submit (and pay for) the same job again.
    """
    try:
        dispatch(session, celery, served, job_id=job_id)
    except (OperationalError, InterfaceError) as exc:
        session.rollback()
        log.warning(
            "job stored but not marked sent logid=%s error=%s; the watchdog will send it",
            job_id,
            type(exc).__name__,
        )
