"""Quotas per tenant (segments per UTC day, jobs in flight) and the fair-share priority.

Today's segment counter is raised with INCRBY and lowered again if that goes over the
limit or the job is not stored, so concurrent submissions never overshoot it. The jobs
in flight (queued + running rows in the DB) are counted and the job stored under a short
per-tenant lock, so they never overshoot either: a lock in the process first, where
its threads queue without polling, then a Redis lock shared by every web process
(polled every LOCK_POLL_S). Without a jobs-in-flight limit no lock is taken. A limit
of 0 means no limit.

Fair share: a job's broker priority is its requested priority minus one step for every
`fair_share_step` jobs its tenant already has in flight (never below 0). A tenant that
floods the queue sinks to the back of it, so another tenant's new job is served first;
the jobs-in-flight quota bounds how deep the flood can be.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stapel.exceptions import StapelError, Unavailable
from stapel.states import ACTIVE
from stapel.tables import Job, utcnow

log = logging.getLogger(__name__)

LOCK_TIMEOUT_S = 60
LOCK_WAIT_S = 10
LOCK_POLL_S = 0.005
IN_FLIGHT_RETRY_S = 30
"""What a jobs-in-flight refusal tells clients to wait (jobs end at no fixed time)."""


class QuotaExceeded(StapelError):
    """A tenant quota is used up: 429 with Retry-After."""

    status = 429
    code = "quota_exceeded"

    def __init__(self, message: str, *, code: str, retry_after_s: int) -> None:
        super().__init__(message, code=code)
        self.headers = {"Retry-After": str(max(1, retry_after_s))}


@dataclass(frozen=True)
class Usage:
    """A tenant's quota use now."""

    segments_today: int
    segments_limit: int | None
    segments_reset_at: datetime
    jobs_in_flight: int
    jobs_in_flight_limit: int | None

    def as_json(self) -> dict:
        return {
            "segments_today": self.segments_today,
            "segments_limit": self.segments_limit,
            "segments_reset_at": self.segments_reset_at.isoformat(),
            "jobs_in_flight": self.jobs_in_flight,
            "jobs_in_flight_limit": self.jobs_in_flight_limit,
        }


def day_key(tenant_id: str, now: datetime) -> str:
    """Return the Redis key of the tenant's segment counter for now's UTC day."""
    return f"stapel:quota:{tenant_id}:segments:{now.astimezone(timezone.utc):%Y%m%d}"


def next_reset(now: datetime) -> datetime:
    """Return the next UTC midnight, when the daily counters start again."""
    day = now.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    return day + timedelta(days=1)


def in_flight(session: Session, tenant_id: str) -> int:
    """Return how many of the tenant's jobs are queued or running."""
    return (
        session.scalar(
            select(func.count())
            .select_from(Job)
            .where(Job.tenant_id == tenant_id, Job.status.in_(ACTIVE))
        )
        or 0
    )


def usage(
    client: redis.Redis,
    session: Session,
    tenant_id: str,
    *,
    segments_limit: int,
    jobs_limit: int,
    now: datetime | None = None,
) -> Usage:
    """Return the tenant's usage against its limits."""
    now = now or utcnow()
    used = int(client.get(day_key(tenant_id, now)) or 0)
    return Usage(
        used,
        segments_limit or None,
        next_reset(now),
        in_flight(session, tenant_id),
        jobs_limit or None,
    )


def fair_priority(priority: int, jobs_in_flight: int, step: int) -> int:
    """Return the broker-facing priority of a tenant's next job (9 most urgent, 0 least)."""
    if step <= 0:
        return priority
    return max(0, priority - jobs_in_flight // step)


_LOCAL_LOCKS: dict[str, threading.Lock] = {}
_LOCAL_GUARD = threading.Lock()


def _busy() -> Unavailable:
    return Unavailable(
        "too many submissions of this tenant at once; retry later", code="submission_busy"
    )


@contextmanager
def tenant_lock(client: redis.Redis, tenant_id: str) -> Iterator[None]:
    """Hold the tenant's submission lock (this process's, then the shared Redis one).

    Raises Unavailable (503 submission_busy) after waiting LOCK_WAIT_S in all.
    """
    with _LOCAL_GUARD:
        local = _LOCAL_LOCKS.setdefault(tenant_id, threading.Lock())
    deadline = time.monotonic() + LOCK_WAIT_S
    if not local.acquire(timeout=LOCK_WAIT_S):
        raise _busy()
    try:
        shared = client.lock(
            f"stapel:quota:{tenant_id}:lock",
            timeout=LOCK_TIMEOUT_S,
            sleep=LOCK_POLL_S,
            blocking_timeout=max(deadline - time.monotonic(), LOCK_POLL_S),
        )
        if not shared.acquire():
            raise _busy()
        try:
            yield
        finally:
            try:
                shared.release()
            except redis.exceptions.LockError:
                log.warning("quota lock expired before release tenant=%s", tenant_id)
    finally:
        local.release()


@contextmanager
def admit(
    client: redis.Redis,
    session: Session,
    tenant_id: str,
    segments: int,
    *,
    segments_limit: int,
    jobs_limit: int,
    now: datetime | None = None,
) -> Iterator[int]:
    """Reserve quota for a job of `segments`; yield the tenant's jobs in flight before it.

    Raises QuotaExceeded when a quota would be passed. The reservation is given back if
    the block raises; call `refund` when the block stored no new job.
    """
    now = now or utcnow()
    with tenant_lock(client, tenant_id) if jobs_limit else nullcontext():
        flying = in_flight(session, tenant_id)
        if jobs_limit and flying >= jobs_limit:
            raise QuotaExceeded(
                f"quota of {jobs_limit} jobs queued or running at once is used up "
                f"({flying} in flight); it frees as your jobs finish",
                code="quota_jobs_in_flight",
                retry_after_s=IN_FLIGHT_RETRY_S,
            )
        key = day_key(tenant_id, now)
        reset = next_reset(now)
        used = client.incrby(key, segments)
        client.expireat(key, reset + timedelta(days=1))
        if segments_limit and used > segments_limit:
            client.decrby(key, segments)
            raise QuotaExceeded(
                f"quota of {segments_limit} segments per day would be passed: "
                f"{used - segments} used today, this job has {segments}; "
                f"it resets at {reset.isoformat()}",
                code="quota_segments_per_day",
                retry_after_s=int((reset - now).total_seconds()) + 1,
            )
        try:
            yield flying
        except BaseException:
            client.decrby(key, segments)
            raise


def refund(client: redis.Redis, tenant_id: str, segments: int, now: datetime | None = None) -> None:
    """Give back a reservation whose job was not stored (an idempotent replay)."""
    client.decrby(day_key(tenant_id, now or utcnow()), segments)
