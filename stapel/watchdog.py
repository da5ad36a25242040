"""The watchdog: a reconciler that repairs what a crash or a lost message left behind.

It compares the DB (the source of truth) with what is alive, on the database's clock:
- a running chunk whose heartbeat is older than the timeout lost its worker: requeued,
  or failed with its job after the last attempt;
- a queued chunk never sent (a crash between commit and send) or whose message the
  broker no longer holds (a Redis restart) needs its task again;
- a queued or running job whose chunks have all ended (a worker killed between two
  commits of an older version, an operator's requeue of a finished job) is ended;
- a due callback is handed to a delivery, within each tenant's cap.
Every change is a compare-and-set on the values it read, in the lock order of
`stapel.locking`, one job per transaction, so two watchdogs running at once change each
row once and neither holds a lock another path waits on for long.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field

from sqlalchemy import exists, or_, select, update
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session

from stapel import callbacks, endings
from stapel.db import affected
from stapel.locking import lock_job, retry_conflicts
from stapel.states import ACTIVE, Status
from stapel.tables import Chunk, Job, db_now, new_id

log = logging.getLogger(__name__)

UNSENT_PAGE = 1000
"""Never-sent chunks resent per pass when the broker lost nothing (stapel.liveness)."""
CALLBACKS_PER_PASS = 500
"""Due callbacks looked at per pass (the rest wait for the next one)."""


@dataclass
class Report:
    """What one watchdog pass found and did."""

    stale: int = 0
    requeued: int = 0
    failed: int = 0
    unsent: int = 0
    stuck: int = 0
    """Queued or running jobs whose chunks had all ended."""
    ended: int = 0
    callbacks_due: int = 0
    callbacks_given_up: int = 0
    to_send: dict[str, str] = field(default_factory=dict)
    """Chunk id -> task id of the chunks leased for a resend (see stapel.dispatch)."""
    callbacks: list[str] = field(default_factory=list)
    """Jobs whose callback delivery is to be queued now."""

    def summary(self) -> str:
        return (
            f"watchdog found stale={self.stale} unsent={self.unsent} stuck={self.stuck} "
            f"callbacks_due={self.callbacks_due} fixed requeued={self.requeued} "
            f"failed={self.failed} resent={len(self.to_send)} ended={self.ended} "
            f"callbacks_queued={len(self.callbacks)} callbacks_given_up={self.callbacks_given_up}"
        )


def reconcile(
    session: Session,
    *,
    heartbeat_timeout_s: float,
    max_attempts: int,
    grace_s: float,
    live_task_ids: set[str] | None,
    waiting_callbacks: Collection[str] | None = None,
    tenant_cap: int = callbacks.DEFAULT_TENANT_CAP,
) -> Report:
    """Run one pass; the report's `to_send` are the chunks to dispatch now, leased.

    `live_task_ids` are the task messages waiting in the broker (see
    stapel.broker.waiting_task_ids); None means the broker could not be read, and then only
    chunks never sent at all are resent. `waiting_callbacks` are the jobs whose delivery
    task waits in the broker already (None: unknown).
    """
    report = Report()
    _requeue_stale(session, report, heartbeat_timeout_s, max_attempts)
    _resend_lost(session, report, grace_s, live_task_ids)
    _end_stuck(session, report)
    _due_callbacks(session, report, waiting_callbacks, tenant_cap)
    return report


def _requeue_stale(
    session: Session, report: Report, heartbeat_timeout_s: float, max_attempts: int
) -> None:
    stale = session.execute(
        select(
            Chunk.id, Chunk.job_id, Chunk.idx, Chunk.attempts, Chunk.heartbeat_at, Chunk.worker
        ).where(Chunk.status == Status.RUNNING, Chunk.heartbeat_at < db_now(-heartbeat_timeout_s))
    ).all()
    session.commit()
    report.stale = len(stale)
    for chunk in stale:
        outcome = _settle_stale(session, chunk, max_attempts)
        if outcome == Status.FAILED:
            report.failed += 1
        elif outcome == Status.QUEUED:
            report.requeued += 1
            log.warning(
                "requeued stalled chunk logid=%s chunk=%d worker=%s attempts=%d",
                chunk.job_id,
                chunk.idx,
                chunk.worker,
                chunk.attempts,
            )


@retry_conflicts
def _settle_stale(session: Session, chunk: Row, max_attempts: int) -> Status | None:
    """Requeue a stalled chunk, or fail it with its job after the last attempt."""
    lock_job(session, chunk.job_id)
    cas = (
        Chunk.id == chunk.id,
        Chunk.status == Status.RUNNING,
        Chunk.heartbeat_at == chunk.heartbeat_at,
    )
    if chunk.attempts >= max_attempts:
        reason = (
            f"chunk {chunk.idx} lost its worker ({chunk.worker}) "
            f"{chunk.attempts} time(s); giving up after {max_attempts} attempts"
        )
        values: dict = {"status": Status.FAILED, "error": reason, "finished_at": db_now()}
        won = affected(session, update(Chunk).where(*cas).values(**values)) == 1
        if won:
            endings.fail(session, chunk.job_id, reason)
        session.commit()
        return Status.FAILED if won else None
    values = {
        "status": Status.QUEUED,
        "claim_token": None,
        "sent_at": None,
        "error": f"no heartbeat from {chunk.worker}",
    }
    won = affected(session, update(Chunk).where(*cas).values(**values)) == 1
    if won:
        endings.requeue_if_idle(session, chunk.job_id)
    session.commit()
    return Status.QUEUED if won else None


def _resend_lost(session: Session, report: Report, grace_s: float, live: set[str] | None) -> None:
    cutoff = db_now(-grace_s)
    # Without a list of live messages only never-sent chunks are candidates: select just
    # those, a bounded page per pass, so the pass does not read the whole backlog.
    lost = (
        Chunk.sent_at.is_(None)
        if live is None
        else or_(Chunk.sent_at.is_(None), Chunk.sent_at < cutoff)
    )
    query = (
        select(Chunk.id, Chunk.job_id, Chunk.sent_at, Chunk.task_id)
        .where(Chunk.status == Status.QUEUED, Chunk.created_at < cutoff, lost)
        .order_by(Chunk.created_at)
    )
    candidates = session.execute(query if live is not None else query.limit(UNSENT_PAGE)).all()
    session.commit()
    for chunk in candidates:
        if chunk.sent_at is not None and (live is None or chunk.task_id in live):
            continue
        report.unsent += 1
        task_id = _lease_resend(session, chunk)
        if task_id is not None:
            report.to_send[chunk.id] = task_id
            log.info("resending chunk logid=%s chunk_id=%s", chunk.job_id, chunk.id)


@retry_conflicts
def _lease_resend(session: Session, chunk: Row) -> str | None:
    """Record a new task id on a lost chunk (compare-and-set), one chunk per transaction."""
    task_id = new_id()
    sent = Chunk.sent_at.is_(None) if chunk.sent_at is None else Chunk.sent_at == chunk.sent_at
    won = affected(
        session,
        update(Chunk)
        .where(Chunk.id == chunk.id, Chunk.status == Status.QUEUED, sent)
        .values(sent_at=db_now(), task_id=task_id),
    )
    session.commit()
    return task_id if won == 1 else None


def _end_stuck(session: Session, report: Report) -> None:
    """End the queued or running jobs whose chunks have all ended."""
    active_chunk = exists().where(Chunk.job_id == Job.id, Chunk.status.in_(ACTIVE))
    stuck = session.scalars(select(Job.id).where(Job.status.in_(ACTIVE), ~active_chunk)).all()
    session.commit()
    report.stuck = len(stuck)
    for job_id in stuck:
        ended = _end_one(session, job_id)
        if ended is not None:
            report.ended += 1
            log.warning(
                "watchdog ended a job whose chunks had all ended logid=%s status=%s",
                job_id,
                ended,
            )
    if stuck:
        log.warning(
            "watchdog reconciled jobs whose chunks had all ended found=%d fixed=%d",
            report.stuck,
            report.ended,
        )


@retry_conflicts
def _end_one(session: Session, job_id: str) -> Status | None:
    lock_job(session, job_id)
    ended = endings.end_if_done(session, job_id)
    session.commit()
    return ended


def _due_callbacks(
    session: Session, report: Report, waiting: Collection[str] | None, tenant_cap: int
) -> None:
    """Choose the due callbacks to queue: not queued already, within each tenant's cap."""
    report.callbacks_given_up = callbacks.give_up_expired(session)
    busy = Counter(callbacks.in_flight_per_tenant(session))
    due = callbacks.due_per_tenant(session, CALLBACKS_PER_PASS)
    session.commit()
    report.callbacks_due = len(due)
    queued = set(waiting) if waiting is not None else set()
    for job_id, tenant_id in due:
        if job_id in queued:
            busy[tenant_id] += 1  # its task waits in the broker: it counts against the cap
    for job_id, tenant_id in due:
        if job_id in queued or (tenant_cap > 0 and busy[tenant_id] >= tenant_cap):
            continue
        busy[tenant_id] += 1
        report.callbacks.append(job_id)
