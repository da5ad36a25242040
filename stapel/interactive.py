"""The interactive lane: a translation answered in the same HTTP call, done as a job.

The compat dialects (app/compat) answer text translations synchronously, but the web
never translates: each request becomes jobs (one per language pair) at
INTERACTIVE_PRIORITY, stored and sent through stapel.submit like every job (quotas,
rows, dispatch), and translated by the workers' batchers, where they share batches with
everything else. The caller then waits for its jobs to end: the worker that ends a job
announces it on Redis (`announce_end`, a list per job kept ENDED_TTL_S), and the waiter
blocks on those lists (BLPOP) in slices of at most SLICE_S. Between slices it reads the
jobs' status from the database, which catches ends nobody announced (the watchdog
failing a job, a cancel). A request still waiting at its deadline cancels its jobs:
nobody will read them.

Compat jobs carry `Job.api`; the watchdog deletes them STAPEL_COMPAT_KEEP_S after they
end (`purge`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta

import redis
from celery import Celery
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from stapel import billing, jobs
from stapel.broker import INTERACTIVE_PRIORITY
from stapel.exceptions import Conflict, TranslationFailed, TranslationTimeout
from stapel.formats import inline
from stapel.jobs import JobSpec
from stapel.presence import Room
from stapel.scores import Scored
from stapel.settings import Settings
from stapel.states import FINAL, ChunkOutcome, Status
from stapel.submit import submit
from stapel.tables import Job, utcnow

log = logging.getLogger(__name__)

ENDED_TTL_S = 120
"""How long a job's end announcement is kept for a waiter that comes late."""
SLICE_S = 1.0
"""The longest one BLPOP blocks before the waiter looks at the database (below the web's
Redis socket timeout)."""
APIS = ("libretranslate", "deepl")
"""The values of Job.api: the compat dialects."""
PURGE_BATCH = 200
"""Jobs deleted per transaction by `purge` (a transaction holds SQLite's write lock)."""
PURGE_MAX = 2000
"""Jobs deleted per `purge` call at most; the next watchdog pass goes on."""


@dataclass(frozen=True)
class Lane:
    """What a synchronous request needs: its session, Redis, Celery, settings, tenant."""

    session: Session
    client: redis.Redis
    celery: Celery
    served: Room
    settings: Settings
    tenant_id: str


def ended_key(job_id: str) -> str:
    """Return the Redis list a job's end is announced on."""
    return f"stapel:ended:{job_id}"


def waited_on(priority: int) -> bool:
    """Whether a caller may wait on the end of a job of this priority: only the lane's
    (the workers announce no other job's end: a Redis write per job nobody reads)."""
    return priority >= INTERACTIVE_PRIORITY


def announce_end(client: redis.Redis, job_id: str, outcome: str) -> None:
    """Tell a waiting caller that its job ended (a worker calls this after each chunk).

    Only outcomes that end the job are announced; a Redis error is logged and left to
    the waiter's database check.
    """
    announce_ends(client, [(job_id, outcome)])


def announce_ends(client: redis.Redis, ends: list[tuple[str, str]]) -> None:
    """announce_end for many (job id, outcome) pairs, in one round trip."""
    ended = [(job_id, outcome) for job_id, outcome in ends if outcome in _ENDS]
    if not ended:
        return
    try:
        pipe = client.pipeline(transaction=False)
        for job_id, outcome in ended:
            pipe.rpush(ended_key(job_id), outcome)
            pipe.expire(ended_key(job_id), ENDED_TTL_S)
        pipe.execute()
    except redis.RedisError as exc:
        log.warning(
            "job end not announced logids=%s error=%s",
            ",".join(job_id for job_id, _ in ended),
            type(exc).__name__,
        )


_ENDS = (ChunkOutcome.JOB_SUCCEEDED, ChunkOutcome.JOB_FAILED)


def _ended_in_db(session: Session, job_ids: Collection[str]) -> set[str]:
    ended = set(
        session.scalars(select(Job.id).where(Job.id.in_(list(job_ids)), Job.status.in_(FINAL)))
    )
    session.rollback()  # a short read: no transaction held while the waiter blocks
    return ended


def wait_ended(
    client: redis.Redis, session: Session, job_ids: Collection[str], timeout_s: float
) -> bool:
    """Block until every job has ended; return False if timeout_s passed first."""
    pending = set(job_ids)
    deadline = time.monotonic() + timeout_s
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            pending -= _ended_in_db(session, pending)
            return not pending
        keys = {ended_key(j): j for j in sorted(pending)}
        got = client.blpop(list(keys), timeout=min(SLICE_S, left))
        if got is not None:
            key = got[0].decode() if isinstance(got[0], bytes) else got[0]
            pending.discard(keys[key])
        else:
            pending -= _ended_in_db(session, pending)
    return True


def translate(
    lane: Lane, specs: list[JobSpec], api: str, characters: int | None = None
) -> list[list[Scored]]:
    """Translate each spec's one document as an interactive job; return their targets.

    Bills characters (default: the segments', inline codes left out) and charges the
    quotas like any submission (QuotaExceeded). Raises TranslationTimeout (the jobs are
    cancelled) or TranslationFailed.
    """
    if characters is None:
        segments = (t for spec in specs for doc in spec.documents for t in doc.segments)
        characters = billing.characters(inline.strip(t) for t in segments)
    with bill(lane, characters):
        job_ids, ended = _submit_all(lane, specs, api)
    finish(lane, [job_id for job_id in job_ids if job_id not in ended])
    lane.session.expire_all()  # the jobs as they ended, not as they were stored
    return [targets(lane.session, lane.tenant_id, job_id) for job_id in job_ids]


def bill(lane: Lane, count: int) -> AbstractContextManager[None]:
    """Bill count characters for the block (stapel.billing), given back if it raises."""
    limit = lane.settings.quota_characters_per_day
    return billing.charge(lane.client, lane.session, lane.tenant_id, count, limit=limit)


def submit_on(lane: Lane, spec: JobSpec, *, fair_share: bool = True) -> Job:
    """Submit a spec for the lane's tenant (stapel.submit: quotas, rows, dispatch)."""
    return submit(
        lane.session,
        lane.client,
        lane.celery,
        lane.served,
        lane.settings,
        lane.tenant_id,
        spec,
        fair_share=fair_share,
    ).job


def _submit_all(lane: Lane, specs: list[JobSpec], api: str) -> tuple[list[str], set[str]]:
    """Submit every spec on the lane; if one is refused, cancel the ones already sent.

    Returns the job ids, and those that ended as they were stored (the MT cache
    answered them at submit: nothing to wait for).
    """
    job_ids: list[str] = []
    ended: set[str] = set()
    try:
        for spec in specs:
            spec.priority, spec.api = INTERACTIVE_PRIORITY, api
            job = submit_on(lane, spec, fair_share=False)
            job_ids.append(job.id)
            if job.status in FINAL:
                ended.add(job.id)
    except Exception:
        cancel(lane.session, lane.tenant_id, job_ids)
        raise
    return job_ids, ended


def finish(lane: Lane, job_ids: Collection[str]) -> None:
    """Wait for the jobs to end; past the deadline cancel them and raise TranslationTimeout."""
    timeout_s = lane.settings.interactive_timeout_s
    if not wait_ended(lane.client, lane.session, job_ids, timeout_s):
        cancel(lane.session, lane.tenant_id, job_ids)
        raise TranslationTimeout(
            f"the translation did not finish within {timeout_s:g} s; "
            "the workers are busy or down, retry later"
        )


def succeeded(session: Session, tenant_id: str, job_id: str) -> Job:
    """Return the tenant's ended job, or raise TranslationFailed if it did not succeed."""
    session.expire_all()  # the job ended in a worker: read its row anew, not the cached one
    job = jobs.get_job(session, tenant_id, job_id)
    if job.status != Status.SUCCEEDED:
        log.warning("synchronous job ended status=%s logid=%s", job.status, job_id)
        raise TranslationFailed(f"the translation {job.status} (job {job_id})")
    return job


def targets(session: Session, tenant_id: str, job_id: str) -> list[Scored]:
    """Return a succeeded job's translations in order, each with its segment's score
    (raise TranslationFailed otherwise)."""
    job = succeeded(session, tenant_id, job_id)
    texts = [t or "" for _name, segments in jobs.iter_result(session, job) for t in segments]
    marks = jobs.iter_provenance(session, job.id, 0, len(texts))
    return [Scored(text, mark.score) for text, mark in zip(texts, marks, strict=True)]


def cancel(session: Session, tenant_id: str, job_ids: Iterable[str]) -> None:
    """Cancel the jobs that have not ended (those that did are left as they are)."""
    for job_id in job_ids:
        try:
            jobs.cancel_job(session, tenant_id, job_id)
        except Conflict:
            pass


def delete_jobs(session: Session, job_ids: Collection[str]) -> int:
    """Delete ended jobs with all their rows (the foreign keys cascade); return how many.

    The status is checked in the delete itself: a job requeued meanwhile stays.
    """
    if not job_ids:
        return 0
    result = session.execute(
        delete(Job).where(Job.id.in_(list(job_ids)), Job.status.in_(FINAL)),
        execution_options={"synchronize_session": False},
    )
    session.commit()
    return int(getattr(result, "rowcount", 0) or 0)


def purge(session: Session, keep_s: float, now: datetime | None = None) -> int:
    """Delete compat jobs that ended more than keep_s ago; return how many went."""
    cutoff = (now or utcnow()) - timedelta(seconds=keep_s)
    expired = select(Job.id).where(
        Job.api.in_(APIS), Job.finished_at < cutoff, Job.status.in_(FINAL)
    )
    deleted = 0
    while deleted < PURGE_MAX:
        ids = list(session.scalars(expired.limit(PURGE_BATCH)))
        if not ids:
            break
        gone = delete_jobs(session, ids)
        deleted += gone
        if gone < len(ids):
            break  # some changed meanwhile: leave them for the next pass
    if deleted:
        log.info("purged compat jobs count=%d keep_s=%g", deleted, keep_s)
    return deleted
