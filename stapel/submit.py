"""The submit use case: idempotency, quota, the job's rows, then its chunks' dispatch.

A job the MT cache answers whole is stored as ended instead, and nothing is sent
(`cached_answer`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import redis
from celery import Celery
from sqlalchemy.orm import Session

from stapel import jobs, memories, metrics, mtcache, pivot, quotas, scores
from stapel.broker import send_callback
from stapel.dispatch import dispatch_stored
from stapel.exceptions import StapelError
from stapel.jobs import JobSpec
from stapel.model_families import MULTILINGUAL
from stapel.presence import Room, agreed_fingerprint, model_queue
from stapel.settings import Settings
from stapel.states import Origin
from stapel.tables import Job

log = logging.getLogger(__name__)

ANSWER_MAX_SEGMENTS = mtcache.LOOKUP_BATCH
"""The largest job the web answers from the cache at submit (its lookup is one query)."""


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
    if spec.min_score is None and spec.api is None:
        # decided once, here: a later change of a default leaves stored jobs as they are
        default = scores.tenant_min_score(session, tenant_id)
        if default is None:
            default = settings.default_min_score
        if default is not None:
            spec = replace(spec, min_score=default)
    # No lookup of the Idempotency-Key first: the insert's unique constraint finds a
    # replay (store_job returns the stored job, and the reservation is given back), and
    # only a refused submission asks whether it was a replay, which gets its job back.
    try:
        memories.check_named(
            session, tenant_id, spec.memories, (spec.source_lang, spec.target_lang)
        )
        answered = cached_answer(session, served, settings, tenant_id, spec)
        with quotas.admit(
            client,
            session,
            tenant_id,
            spec.segments_total,
            segments_limit=settings.quota_segments_per_day,
            jobs_limit=settings.quota_jobs_in_flight,
            count_up_to=spec.priority * settings.fair_share_step if fair_share else 0,
            ends_stored=answered is not None,
            hand_over=True,
        ) as admission:
            priority = spec.priority
            if fair_share and answered is None:
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
                answered=answered,
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
    if answered is not None:  # ended as it was stored: nothing to send but its callback
        if spec.callback_url:
            send_callback(celery, stored.job.id)
        return Submitted(stored.job, True)
    # The job is committed, so the client hears 202 whatever the broker does: a chunk
    # the broker did not take is the watchdog's to send (its task id is not in Redis).
    # The first chunk's message also ends the submission's pending place (one round trip).
    if not dispatch_stored(celery, served, stored, pending=admission.pending):
        quotas.leave(client, admission)
    return Submitted(stored.job, True)


def _multilingual_fp(served: Room, settings: Settings, pool: str, pair: str) -> str | None:
    """The fingerprint of a multilingual model's pair, from the one its live workers share."""
    found = pivot.served(settings.model_root, settings.pivot).get(pair)
    if found is None or found.family not in MULTILINGUAL:
        return None
    model_fp = agreed_fingerprint(served, model_queue(pool, found.model))
    return mtcache.pair_fingerprint(model_fp, found.source, found.target) if model_fp else None


def cached_answer(
    session: Session, served: Room, settings: Settings, tenant_id: str, spec: JobSpec
) -> jobs.Answered | None:
    """Return the job's every target from the MT cache, or None to translate it.

    A job is answered at submit only when the cache can answer it all, exactly as a
    worker would: the cache on (for the web and the job), no memories named (a human
    translation would win over the cache), at most ANSWER_MAX_SEGMENTS segments (one
    query), and one model fingerprint shared by every live worker that holds the pair
    for the job's pool (stapel.presence); each segment is looked up by its exact text,
    inline codes included (stapel.mtcache.segment_key: a worker stores a segment with
    codes with its codes placed). Blank segments pass through, as a worker gives them
    back.
    """
    total = spec.segments_total
    if not (settings.cache_enabled and spec.use_cache) or spec.memories:
        return None
    if not 0 < total <= ANSWER_MAX_SEGMENTS:
        return None
    pair = f"{spec.source_lang}-{spec.target_lang}"
    pool = jobs.route_pool(total, settings.gpu_threshold)
    fp = agreed_fingerprint(served, model_queue(pool, pair)) or _multilingual_fp(
        served, settings, pool, pair
    )
    if fp is None:
        return None
    texts = [text for doc in spec.documents for text in doc.segments]
    keys = [
        mtcache.segment_key(pair, spec.split_sentences, t) if t.strip() else None for t in texts
    ]
    wanted = {key for key in keys if key is not None}
    found = mtcache.lookup(
        session, mtcache.scope(tenant_id, settings.cache_shared), fp, wanted, settings.cache_ttl_s
    )
    metrics.observe_lookup("submit", len(found), len(wanted))
    if len(found) < len(wanted):
        return None
    return jobs.Answered(
        fp,
        [text if key is None else found[key] for text, key in zip(texts, keys, strict=True)],
        [None if key is None else Origin.CACHE.value for key in keys],
    )
