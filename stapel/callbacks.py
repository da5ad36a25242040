"""Telling the requester: one signed POST to `callback_url` when a job ends.

The final state change of a job also marks its callback `pending` (same UPDATE), so no
ending is missed; the `stapel.deliver_callback` task then POSTs, retrying with backoff,
and the watchdog resends a pending callback whose task was lost.

The body is JSON; the header `X-Stapel-Signature: sha256=<hex>` is the HMAC-SHA256 of the
exact body bytes with the tenant's callback secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import case, literal, select, update
from sqlalchemy.orm import Session

from stapel.netguard import BlockedDestination
from stapel.states import CallbackStatus
from stapel.tables import Job, Tenant, utcnow

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Stapel-Signature"
MAX_ATTEMPTS = 8
"""Deliveries tried before the callback is given up (backoff 2, 4, ... 256 s)."""
MAX_BACKOFF_S = 300

Poster = Callable[[str, bytes, dict], int]
"""Sends (url, body, headers) and returns the HTTP status; raises OSError-like on failure,
BlockedDestination when the URL points at an address that must not be reached."""


FIRST_SEND_LEASE_S = 60
"""After a job ends its callback task is sent at once; the watchdog steps in after this."""


def on_final(now: datetime) -> dict:
    """Return the column values a job's final UPDATE sets: its callback becomes pending."""
    return {
        "callback_status": case(
            (Job.callback_url.is_not(None), literal(CallbackStatus.PENDING.value)), else_=None
        ),
        "callback_next_at": now + timedelta(seconds=FIRST_SEND_LEASE_S),
    }


def sign(secret: str, body: bytes) -> str:
    """Return the signature header value for body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str) -> bool:
    """Check a signature header the way a receiver should (constant-time compare)."""
    return hmac.compare_digest(sign(secret, body), header)


def payload(job: Job) -> bytes:
    """Return the callback body for a finished job."""
    return json.dumps(
        {
            "id": job.id,
            "status": job.status,
            "segments_total": job.segments_total,
            "segments_done": job.segments_done,
            "error": job.error,
            "metadata": job.meta,
            "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


def backoff(attempt: int) -> float:
    """Seconds to wait after the given failed attempt."""
    return float(min(2**attempt, MAX_BACKOFF_S))


def is_pending(session: Session, job_id: str) -> bool:
    """Return whether the job has a callback waiting to be delivered."""
    return (
        session.scalar(select(Job.callback_status).where(Job.id == job_id))
        == CallbackStatus.PENDING
    )


def deliver(
    session: Session, job_id: str, post: Poster, now: datetime | None = None
) -> tuple[str, float]:
    """Try one delivery; return ("delivered"|"retry"|"failed"|"skipped", retry delay)."""
    now = now or utcnow()
    row = session.execute(
        select(Job, Tenant.callback_secret)
        .join(Tenant, Tenant.id == Job.tenant_id)
        .where(Job.id == job_id)
    ).first()
    if row is None or row[0].callback_status != CallbackStatus.PENDING:
        return "skipped", 0.0
    if row[0].callback_url is None:
        return "skipped", 0.0
    job, secret = row
    body = payload(job)
    attempt = job.callback_attempts + 1
    blocked = False
    try:
        status = post(
            row[0].callback_url,
            body,
            {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body)},
        )
        error = None if 200 <= status < 300 else f"HTTP {status}"
    except BlockedDestination as exc:
        blocked, error = True, f"blocked: {exc}"
    except OSError as exc:
        error = type(exc).__name__
    values: dict[str, object]
    if error is None:
        outcome, delay, values = "delivered", 0.0, {"callback_status": CallbackStatus.DELIVERED}
    elif blocked or attempt >= MAX_ATTEMPTS:
        outcome, delay, values = "failed", 0.0, {"callback_status": CallbackStatus.FAILED}
    else:
        delay = backoff(attempt)
        outcome, values = "retry", {"callback_next_at": now + timedelta(seconds=delay)}
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.callback_status == CallbackStatus.PENDING)
        .values(callback_attempts=attempt, **values)
    )
    session.commit()
    (log.warning if blocked else log.info)(
        "callback %s logid=%s attempt=%d error=%s", outcome, job_id, attempt, error
    )
    return outcome, delay
