"""Telling the requester: a signed POST to `callback_url` when a job ends, at least once.

The final state change of a job also makes its callback `pending` and due (same
UPDATE), so no ending is missed. A delivery is three steps, and no transaction is open
during the network exchange:

1. `lease` (one transaction): a compare-and-set that counts the attempt and holds the
   callback until `callback_lease_until`, longer than the exchange's hard deadline, so
   no other delivery of it starts meanwhile; at most `tenant_cap` of a tenant's
   callbacks are in flight at once (the tenant's row is locked while counting).
2. the POST (`netguard.post`: checked address, hard deadline on the whole exchange).
3. `record` (one transaction, retried on its own): delivered, failed for good, or due
   again after a backoff. A database error here never repeats the POST; if the
   outcome cannot be stored at all, the lease runs out and the callback is delivered
   again: receivers must treat `id` + `status` as idempotent.

The body is JSON and carries `sent_at` (the database's time of the attempt) and
`attempt`; the header `X-Stapel-Signature: sha256=<hex>` is the HMAC-SHA256 of the exact
body bytes with the tenant's callback secret, so a receiver that checks the signature
and refuses a `sent_at` older than `REPLAY_WINDOW_S` cannot be fed an old body again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, case, func, literal, or_, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from stapel.db import affected, with_retry
from stapel.locking import lock_tenant, retry_conflicts
from stapel.netguard import BlockedDestination
from stapel.states import CallbackStatus
from stapel.tables import Job, Tenant, db_now, utcnow

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Stapel-Signature"
MAX_ATTEMPTS = 8
"""Deliveries tried before the callback is given up (backoff 2, 4, ... 128 s between)."""
MAX_BACKOFF_S = 300
REPLAY_WINDOW_S = 300
"""A receiver should refuse a body whose `sent_at` is further than this from its clock."""
DEFAULT_TENANT_CAP = 4
"""Callbacks of one tenant in flight at once (`STAPEL_CALLBACK_TENANT_IN_FLIGHT`)."""

Poster = Callable[[str, bytes, dict], int]
"""Sends (url, body, headers) and returns the HTTP status; raises OSError-like on failure,
BlockedDestination when the URL points at an address that must not be reached."""


def lease_s(deadline_s: float) -> float:
    """Seconds a delivery holds its callback: the deadline, and as much again (5 s at least)."""
    return deadline_s + max(deadline_s, 5.0)


def retry_window_s(deadline_s: float) -> float:
    """Seconds from a job's end within which its callback may still be tried."""
    return sum(backoff(a) for a in range(1, MAX_ATTEMPTS)) + MAX_ATTEMPTS * lease_s(deadline_s)


def on_final() -> dict:
    """Return the column values a job's final UPDATE sets: its callback becomes due now."""
    return {
        "callback_status": case(
            (Job.callback_url.is_not(None), literal(CallbackStatus.PENDING.value)), else_=None
        ),
        "callback_next_at": db_now(),
        "callback_attempts": 0,
        "callback_lease_until": None,
    }


def sign(secret: str, body: bytes) -> str:
    """Return the signature header value for body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(
    secret: str,
    body: bytes,
    header: str,
    *,
    max_age_s: float | None = None,
    now: datetime | None = None,
) -> bool:
    """Check a callback the way a receiver should: the signature (constant-time), and
    with max_age_s also that its `sent_at` lies within that many seconds of now."""
    if not hmac.compare_digest(sign(secret, body), header):
        return False
    if max_age_s is None:
        return True
    sent = datetime.fromisoformat(json.loads(body)["sent_at"])
    return abs(((now or utcnow()) - sent).total_seconds()) <= max_age_s


def payload(job: Job, sent_at: datetime, attempt: int) -> bytes:
    """Return the callback body of a finished job for one attempt."""
    return json.dumps(
        {
            "id": job.id,
            "status": job.status,
            "segments_total": job.segments_total,
            "segments_done": job.segments_done,
            "segments_review": job.segments_review or 0,
            "error": job.error,
            "metadata": job.meta,
            "finished_at": job.finished_at.isoformat() if job.finished_at else None,
            "sent_at": sent_at.isoformat(),
            "attempt": attempt,
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


def backoff(attempt: int) -> float:
    """Seconds to wait after the given failed attempt."""
    return float(min(2**attempt, MAX_BACKOFF_S))


def in_flight() -> ColumnElement[bool]:
    """The condition of a callback whose delivery holds an unexpired lease."""
    return (Job.callback_status == CallbackStatus.PENDING) & (Job.callback_lease_until > db_now())


def leasable() -> ColumnElement[bool]:
    """The condition of a pending callback that is due and that no delivery holds."""
    return (
        (Job.callback_status == CallbackStatus.PENDING)
        & (Job.callback_next_at <= db_now())
        & or_(Job.callback_lease_until.is_(None), Job.callback_lease_until <= db_now())
        & (Job.callback_attempts < MAX_ATTEMPTS)
    )


@dataclass(frozen=True)
class Delivery:
    """One leased attempt: what to send, and the attempt number the lease holds."""

    job_id: str
    url: str
    body: bytes
    headers: dict
    attempt: int


@retry_conflicts
def lease(session: Session, job_id: str, *, hold_s: float, tenant_cap: int) -> Delivery | None:
    """Take the next attempt of a due callback (None: not due, held, or the tenant's cap)."""
    tenant_id = session.scalar(select(Job.tenant_id).where(Job.id == job_id))
    session.commit()  # the lease's transaction starts with the tenant's lock
    if tenant_id is None:
        return None
    lock_tenant(session, tenant_id)
    if tenant_cap > 0:
        busy = session.scalar(
            select(func.count()).select_from(Job).where(Job.tenant_id == tenant_id, in_flight())
        )
        if (busy or 0) >= tenant_cap:
            session.rollback()
            log.info("callback waits: tenant at its cap logid=%s in_flight=%d", job_id, busy)
            return None
    won = affected(
        session,
        update(Job)
        .where(Job.id == job_id, leasable())
        .values(callback_attempts=Job.callback_attempts + 1, callback_lease_until=db_now(hold_s)),
    )
    if won != 1:
        session.rollback()
        return None
    job, secret, sent_at = session.execute(
        select(Job, Tenant.callback_secret, db_now())
        .join(Tenant, Tenant.id == Job.tenant_id)
        .where(Job.id == job_id)
        .execution_options(populate_existing=True)
    ).one()
    session.commit()
    body = payload(job, sent_at, job.callback_attempts)
    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body)}
    return Delivery(job_id, job.callback_url or "", body, headers, job.callback_attempts)


@retry_conflicts
def record(
    session: Session, delivery: Delivery, error: str | None, *, blocked: bool = False
) -> tuple[str, float]:
    """Store one attempt's outcome; return ("delivered"|"retry"|"failed", retry delay).

    A success counts whatever attempt holds the callback now; a failure only changes
    the callback while its own attempt still holds it.
    """
    ours = Job.callback_attempts == delivery.attempt
    where = [Job.id == delivery.job_id, Job.callback_status == CallbackStatus.PENDING]
    delay = 0.0
    values: dict[str, object]
    if error is None:
        outcome, values = "delivered", {"callback_status": CallbackStatus.DELIVERED}
    elif blocked or delivery.attempt >= MAX_ATTEMPTS:
        outcome, values = "failed", {"callback_status": CallbackStatus.FAILED}
        where.append(ours)
    else:
        delay = backoff(delivery.attempt)
        outcome, values = "retry", {"callback_next_at": db_now(delay)}
        where.append(ours)
    affected(session, update(Job).where(*where).values(callback_lease_until=None, **values))
    session.commit()
    return outcome, delay


def deliver(
    session: Session,
    job_id: str,
    post: Poster,
    *,
    hold_s: float = lease_s(10.0),
    tenant_cap: int = DEFAULT_TENANT_CAP,
) -> tuple[str, float]:
    """Lease, POST and record one attempt; return (outcome, retry delay).

    Outcomes: "delivered", "retry", "failed", "skipped" (nothing to do now), or
    "unrecorded" (the POST ended but the database could not store how: the lease runs
    out and the callback is tried again, never re-POSTed from here).
    """
    delivery = with_retry(
        session, lambda: lease(session, job_id, hold_s=hold_s, tenant_cap=tenant_cap)
    )
    if delivery is None:
        return "skipped", 0.0
    blocked, error = False, None
    try:
        status = post(delivery.url, delivery.body, delivery.headers)
        error = None if 200 <= status < 300 else f"HTTP {status}"
    except BlockedDestination as exc:
        blocked, error = True, f"blocked: {exc}"
    except OSError as exc:
        error = f"{type(exc).__name__}: {exc}"[:200]
    try:
        outcome, delay = with_retry(
            session, lambda: record(session, delivery, error, blocked=blocked)
        )
    except SQLAlchemyError as exc:  # the lease decides what happens next, never a re-POST
        log.error(
            "callback outcome not stored logid=%s attempt=%d error=%s post_error=%s",
            job_id,
            delivery.attempt,
            type(exc).__name__,
            error,
        )
        return "unrecorded", 0.0
    (log.warning if blocked else log.info)(
        "callback %s logid=%s attempt=%d error=%s", outcome, job_id, delivery.attempt, error
    )
    return outcome, delay


def due_per_tenant(session: Session, limit: int) -> list[tuple[str, str]]:
    """Return (job id, tenant id) of callbacks a delivery may take now, oldest due first."""
    return [
        (job_id, tenant_id)
        for job_id, tenant_id in session.execute(
            select(Job.id, Job.tenant_id)
            .where(leasable())
            .order_by(Job.callback_next_at)
            .limit(limit)
        )
    ]


def in_flight_per_tenant(session: Session) -> dict[str, int]:
    """Return how many callbacks each tenant has in flight now."""
    return dict(
        session.execute(
            select(Job.tenant_id, func.count()).where(in_flight()).group_by(Job.tenant_id)
        ).all()
    )


def give_up_expired(session: Session) -> int:
    """Fail pending callbacks whose last attempt's lease ran out unrecorded."""
    count = affected(
        session,
        update(Job)
        .where(
            Job.callback_status == CallbackStatus.PENDING,
            Job.callback_attempts >= MAX_ATTEMPTS,
            or_(Job.callback_lease_until.is_(None), Job.callback_lease_until <= db_now()),
        )
        .values(callback_status=CallbackStatus.FAILED, callback_lease_until=None),
    )
    session.commit()
    return count


def is_pending(session: Session, job_id: str) -> bool:
    """Return whether the job has a callback waiting to be delivered."""
    return (
        session.scalar(select(Job.callback_status).where(Job.id == job_id))
        == CallbackStatus.PENDING
    )
