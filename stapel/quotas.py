"""Quotas per tenant (segments per UTC day, jobs in flight) and the fair-share priority.

Today's segment counter is raised with INCRBY and lowered again if that goes over the
limit or the job is not stored, so concurrent submissions never overshoot it. The
database's `usage_days` row is the day's truth (stapel.ledger): a counter Redis lost is
rebuilt from it by the next admission, and /v1/usage reads both. The jobs
in flight (queued + running rows in the DB, counted through the (tenant, status) index)
plus the tenant's submissions reserved but not yet stored (a Redis counter) never
overshoot their limit either, without a lock (see `admit`). A limit of 0 means no
limit.

Fair share: a job's broker priority is its requested priority minus one step for every
`fair_share_step` jobs its tenant already has in flight (never below 0). A tenant that
floods the queue sinks to the back of it, so another tenant's new job is served first;
the jobs-in-flight quota bounds how deep the flood can be.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import redis
from sqlalchemy import Integer, bindparam, func, literal_column, select, union_all
from sqlalchemy.orm import Session
from sqlalchemy.sql.selectable import CompoundSelect

from stapel import ledger
from stapel.driver_sql import DriverStatement
from stapel.exceptions import StapelError
from stapel.states import ACTIVE
from stapel.tables import Job, utcnow

log = logging.getLogger(__name__)

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


# One scan per active state, each bounded by both columns of the (tenant, status) index
# whatever the plan: PostgreSQL's plan for `status IN (...)` on a table without statistics
# yet (a new database, until its first analyze) bounded the scan by the tenant alone and
# filtered the status, reading the tenant's whole history at every submission, and a
# prepared statement keeps its plan (docs/design/in-flight-count-plan.md). Each scan
# selects a constant, not a column: the index alone can answer it (SQLite's covering index,
# PostgreSQL's index-only scan), where a selected `id` read every counted job's row.
_ACTIVE_ROWS: CompoundSelect[Any] = union_all(
    *(
        select(literal_column("1")).where(Job.tenant_id == bindparam("tenant"), Job.status == state)
        for state in ACTIVE
    )
)
_IN_FLIGHT = select(func.count()).select_from(_ACTIVE_ROWS.subquery())
_IN_FLIGHT_UP_TO = DriverStatement(
    select(func.count()).select_from(
        _ACTIVE_ROWS.limit(bindparam("cap", type_=Integer)).subquery()
    ),
    write=False,
)


def in_flight(session: Session, tenant_id: str, up_to: int | None = None) -> int:
    """Return how many of the tenant's jobs are queued or running (at most `up_to`).

    With `up_to` the count reads no more than that many index entries, so a submission's
    admission does not grow with a tenant's jobs in flight. A statement on the session's
    connection, the admission's on its driver's cursor (stapel.driver_sql): it runs at
    every submission.
    """
    if up_to is None:
        return session.connection().scalar(_IN_FLIGHT, {"tenant": tenant_id}) or 0
    if up_to <= 0:
        return 0
    return _IN_FLIGHT_UP_TO.execute(session.connection(), {"tenant": tenant_id, "cap": up_to}) or 0


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
    counted = int(client.get(day_key(tenant_id, now)) or 0)
    stored = ledger.read(session, tenant_id, ledger.utc_day(now))[0]
    return Usage(
        max(counted, stored),  # the counter holds admissions not yet stored too
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


PENDING_TTL_S = 60
"""A reservation older than this is dropped from the pending set (its web process died)."""
RECHECK_WAIT_S = 2.0
"""How long a submission refused at its in-flight limit waits for earlier ones to land."""
RECHECK_POLL_S = 0.005

# One round trip reserves both quotas and takes a place in the tenant's pending set.
# KEYS: day counter, pending set, sequence. ARGV: segments, segment limit (0 none), day
# counter's expiry (epoch s), member prefix (now in ms), stale cutoff (ms), pending TTL.
# Returns {sequence number, pending submissions before this one, segments used before
# this job, refused (the day's limit)}. A job that ends as it is stored (answered from
# the cache) runs the day's part alone (_COUNT_DAY: KEYS and ARGV up to the expiry).
_DAY = """
local segments, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local used = redis.call('INCRBY', KEYS[1], segments)
redis.call('EXPIREAT', KEYS[1], tonumber(ARGV[3]))
if limit > 0 and used > limit then
  redis.call('DECRBY', KEYS[1], segments)
  return {0, 0, used - segments, 1}
end
"""
_COUNT_DAY = _DAY + "return {0, 0, used - segments, 0}\n"
_RESERVE = (
    _DAY
    + """for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if tonumber(string.match(member, '^(%d+):')) < tonumber(ARGV[5]) then
    redis.call('ZREM', KEYS[2], member)
  end
end
local seq = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[2], seq, ARGV[4] .. ':' .. seq)
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[6]))
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[6]))
return {seq, redis.call('ZCOUNT', KEYS[2], '-inf', seq - 1), used - segments, 0}
"""
)
_SHAS = {script: hashlib.sha1(script.encode()).hexdigest() for script in (_RESERVE, _COUNT_DAY)}


def _run(client: redis.Redis, script: str, *args) -> list:
    """Run a script by its digest; send its text only when Redis lacks it."""
    try:
        return client.evalsha(_SHAS[script], *args)
    except redis.exceptions.NoScriptError:  # a restarted or flushed Redis
        return client.eval(script, *args)


def pending_key(tenant_id: str) -> str:
    """Return the Redis key of the tenant's submissions reserved but not yet stored."""
    return f"stapel:quota:{tenant_id}:pending"


@dataclass(frozen=True)
class Admission:
    """A reservation: the tenant's jobs in flight before this one, and the day it counts on.

    `pending` is its place among the tenant's pending submissions (key, member), None
    for a job that ends as it is stored; `admit(..., hand_over=True)` leaves it for the
    caller to end (`leave`, or in the first chunk's send: stapel.broker.publish).
    """

    in_flight: int
    day_key: str
    pending: tuple[str, str] | None = None


@contextmanager
def admit(
    client: redis.Redis,
    session: Session,
    tenant_id: str,
    segments: int,
    *,
    segments_limit: int,
    jobs_limit: int,
    count_up_to: int = 0,
    ends_stored: bool = False,
    hand_over: bool = False,
    now: datetime | None = None,
) -> Iterator[Admission]:
    """Reserve quota for a job of `segments` while the block stores it.

    Raises QuotaExceeded when a quota would be passed. No lock: one Redis script raises
    the day's segment counter and puts the submission in the tenant's pending set, in
    order; the jobs in flight are the DB's queued and running rows plus the pending
    submissions that came before this one. Of two submissions at once the later counts
    the earlier (pending, or stored before the count), so the limit is never overshot;
    a submission refused while earlier ones were pending waits for them to land and
    counts again, so it is not refused for a job that was then not stored. The
    reservation is given back if the block raises; call `refund` with the admission
    when the block stored no new job.

    The admission's `in_flight` is exact up to the jobs limit or `count_up_to`,
    whichever is higher (fair share needs no more than its steps to priority 0), and
    may be lower above it: the count stops there, so it costs no more with thousands of
    jobs in flight than with a few.

    A job that `ends_stored` (answered from the cache at submit: stored as succeeded)
    is never queued or running, so it takes the day's segments only: no place among
    the pending submissions, no count, and the jobs limit does not refuse it
    (`in_flight` is 0).

    The place among the pending submissions ends with the block, or, with `hand_over`
    and a block that does not raise, when the caller ends it (`admission.pending`):
    the submit path removes it in the same round trip as its first chunk's message. Until
    then the stored job counts twice for the tenant's later submissions, which only
    makes them wait (RECHECK_WAIT_S) at the limit, never overshoot it; a place never
    ended (Redis gone) lapses after PENDING_TTL_S.
    """
    now = now or utcnow()
    key, reset = day_key(tenant_id, now), next_reset(now)
    now_ms = int(now.timestamp() * 1000)
    day = (segments, segments_limit, int((reset + timedelta(days=1)).timestamp()))
    if ends_stored:
        seq, before, used, refused = _run(client, _COUNT_DAY, 1, key, *day)
    else:
        pending = pending_key(tenant_id)
        seq, before, used, refused = _run(
            client,
            _RESERVE,
            3,
            key,
            pending,
            pending + ":seq",
            *day,
            now_ms,
            now_ms - PENDING_TTL_S * 1000,
            PENDING_TTL_S,
        )
    place = None if ends_stored else (pending_key(tenant_id), f"{now_ms}:{seq}")
    if not refused and not used:
        used = seed(client, session, tenant_id, key, now)
        refused = bool(segments_limit) and used + segments > segments_limit
        if refused:
            client.decrby(key, segments)
            if place is not None:
                client.zrem(*place)
    if refused:
        raise QuotaExceeded(
            f"quota of {segments_limit} segments per day would be passed: "
            f"{used} used today, this job has {segments}; "
            f"it resets at {reset.isoformat()}",
            code="quota_segments_per_day",
            retry_after_s=int((reset - now).total_seconds()) + 1,
        )
    try:
        if place is None:
            yield Admission(0, key)
        else:
            # The count must read a snapshot taken after the reservation: a read the
            # caller began earlier (SQLite keeps a transaction's first snapshot) would miss
            # a job stored and taken out of the pending set in between.
            if session.in_transaction():
                session.commit()
            flying = _count_in_flight(
                client, session, tenant_id, int(seq), int(before), jobs_limit, count_up_to
            )
            yield Admission(flying, key, place)
    except BaseException:
        client.decrby(key, segments)
        if place is not None:
            client.zrem(*place)
        raise
    if place is not None and not hand_over:
        client.zrem(*place)


def seed(client: redis.Redis, session: Session, tenant_id: str, key: str, now: datetime) -> int:
    """Add the day's stored segments to a counter found empty; return them.

    Called by the admission that found the day's counter at 0 (the first of the day, or
    the first after Redis lost its data): only that one sees 0, so the figure is added
    once. Admissions between its count and this one were counted without it.
    """
    stored = ledger.read(session, tenant_id, ledger.utc_day(now))[0]
    if stored:
        client.incrby(key, stored)
    return stored


def leave(client: redis.Redis, admission: Admission) -> None:
    """End an admission's place among the pending submissions (see `admit`'s hand_over).

    Its job is stored by then: a Redis that does not answer is logged, not raised (the
    place lapses after PENDING_TTL_S).
    """
    if admission.pending is None:
        return
    try:
        client.zrem(*admission.pending)
    except (redis.RedisError, OSError) as exc:
        log.warning(
            "pending submission not ended error=%s; it lapses in %d s",
            type(exc).__name__,
            PENDING_TTL_S,
        )


def _count_in_flight(
    client: redis.Redis,
    session: Session,
    tenant_id: str,
    seq: int,
    before: int,
    limit: int,
    count_up_to: int,
) -> int:
    """Return the tenant's jobs in flight ahead of this submission; raise at the limit."""
    deadline = time.monotonic() + RECHECK_WAIT_S
    while True:
        # at the limit the count need go no further: limit - before rows decide it
        up_to = max(limit - before, count_up_to) if limit else count_up_to
        flying = in_flight(session, tenant_id, up_to) + before
        if not limit or flying < limit:
            return flying
        if not before or time.monotonic() > deadline:
            raise QuotaExceeded(
                f"quota of {limit} jobs queued or running at once is used up "
                f"({flying} in flight); it frees as your jobs finish",
                code="quota_jobs_in_flight",
                retry_after_s=IN_FLIGHT_RETRY_S,
            )
        time.sleep(RECHECK_POLL_S)
        session.rollback()  # a fresh snapshot for the next count
        before = client.zcount(pending_key(tenant_id), "-inf", seq - 1)


def refund(client: redis.Redis, admission: Admission, segments: int) -> None:
    """Give back a reservation whose job was not stored (an idempotent replay).

    The segments go back to the day they were counted on, even after midnight, and a
    place among the pending submissions handed over ends.
    """
    client.decrby(admission.day_key, segments)
    leave(client, admission)
