"""The submit use case: idempotency, quota, the job's rows, then its chunks' dispatch."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis
from celery import Celery
from sqlalchemy.orm import Session

from stapel import jobs, memories, quotas
from stapel.dispatch import dispatch_stored
from stapel.exceptions import StapelError
from stapel.jobs import JobSpec
from stapel.presence import Room
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
    served: Room,
    settings: Settings,
    tenant_id: str,
    spec: JobSpec,
    *,
    fair_share: bool = True,
) -> Submitted:
    """Store a validated job for the tenant and send its chunks; replay an idempotent one.

    Raises QuotaExceeded when a quota would be passed. A job with the tenant's
    Idempotency-Key already stored is returned as it is (nothing sent; the quota its
    replay reserved is given back at once, and a replay refused by a quota or a check
    still gets its job).
    The effective priority (fair share: lower for a tenant with many jobs in flight) is
    decided here once and stored on the job, so every later send uses it too;
    `fair_share=False` keeps the spec's priority (the interactive lane, stapel.interactive).
    """
    # No lookup of the Idempotency-Key first: the insert's unique constraint finds a
    # replay (store_job returns the stored job, and the reservation is given back), and
    # only a refused submission asks whether it was a replay, which gets its job back.
    try:
        memories.check_named(
            session, tenant_id, spec.memories, (spec.source_lang, spec.target_lang)
        )
        with quotas.admit(
            client,
            session,
            tenant_id,
            spec.segments_total,
            segments_limit=settings.quota_segments_per_day,
            jobs_limit=settings.quota_jobs_in_flight,
        ) as admission:
            priority = spec.priority
            if fair_share:
                priority = quotas.fair_priority(
                    spec.priority, admission.in_flight, settings.fair_share_step
                )
            stored = jobs.store_job(
                session,
                tenant_id,
                spec,
                gpu_threshold=settings.gpu_threshold,
                chunk_segments=settings.chunk_segments,
                dispatch_priority=priority,
            )
    except StapelError:
        session.rollback()
        existing = spec.idempotency_key and jobs.by_idempotency_key(
            session, tenant_id, spec.idempotency_key
        )
        if not existing:
            raise
        return Submitted(existing, False)
    if not stored.created:  # a concurrent request with the same key stored it first
        quotas.refund(client, admission, spec.segments_total)
        return Submitted(stored.job, False)
    # The job is committed, so the client hears 202 whatever the broker does: a chunk
    # the broker did not take is the watchdog's to send (its task id is not in Redis).
    dispatch_stored(celery, served, stored)
    return Submitted(stored.job, True)
