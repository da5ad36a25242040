"""The watchdog: a reconciler that requeues or fails stalled chunks and resends lost ones.

It compares the DB (the source of truth) with what is alive: a running chunk whose
heartbeat is older than the timeout lost its worker; a queued chunk that was never sent
(a crash between commit and send) or whose message the broker no longer holds (a Redis
restart) needs its task again. Every change is a compare-and-set on the values it read,
so two watchdogs running at once change each chunk once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from stapel.chunks import fail_job, requeue_job_if_idle
from stapel.db import affected
from stapel.states import CallbackStatus, Status
from stapel.tables import Chunk, Job, new_id

log = logging.getLogger(__name__)

UNSENT_PAGE = 1000
"""Never-sent chunks resent per pass when the broker lost nothing (stapel.liveness)."""


@dataclass
class Report:
    """What one watchdog pass found and did."""

    stale: int = 0
    requeued: int = 0
    failed: int = 0
    unsent: int = 0
    to_send: dict[str, str] = field(default_factory=dict)
    """Chunk id -> task id of the chunks leased for a resend (see stapel.dispatch)."""
    callbacks: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"watchdog found stale={self.stale} unsent={self.unsent} "
            f"callbacks_due={len(self.callbacks)} fixed requeued={self.requeued} "
            f"failed={self.failed} resent={len(self.to_send)}"
        )


def reconcile(
    session: Session,
    *,
    now: datetime,
    heartbeat_timeout_s: float,
    max_attempts: int,
    grace_s: float,
    live_task_ids: set[str] | None,
) -> Report:
    """Run one pass; the report's `to_send` are the chunks to dispatch now, leased.

    `live_task_ids` are the task messages waiting in the broker (see
    stapel.broker.waiting_task_ids); None means the broker could not be read, and then only
    chunks never sent at all are resent.
    """
    report = Report()
    _requeue_stale(session, report, now - timedelta(seconds=heartbeat_timeout_s), max_attempts)
    _resend_lost(session, report, now, now - timedelta(seconds=grace_s), live_task_ids)
    _due_callbacks(session, report, now, lease_s=max(grace_s, 1.0))
    return report


def _requeue_stale(session: Session, report: Report, cutoff: datetime, max_attempts: int) -> None:
    stale = session.execute(
        select(
            Chunk.id, Chunk.job_id, Chunk.idx, Chunk.attempts, Chunk.heartbeat_at, Chunk.worker
        ).where(Chunk.status == Status.RUNNING, Chunk.heartbeat_at < cutoff)
    ).all()
    report.stale = len(stale)
    for chunk in stale:
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
            if (
                affected(
                    session, update(Chunk).where(*cas).values(status=Status.FAILED, error=reason)
                )
                == 1
            ):
                session.commit()
                fail_job(session, chunk.job_id, reason)
                report.failed += 1
            continue
        if (
            affected(
                session,
                update(Chunk)
                .where(*cas)
                .values(
                    status=Status.QUEUED,
                    claim_token=None,
                    sent_at=None,
                    error=f"no heartbeat from {chunk.worker}",
                ),
            )
            == 1
        ):
            requeue_job_if_idle(session, chunk.job_id)
            session.commit()
            report.requeued += 1
            log.warning(
                "requeued stalled chunk logid=%s chunk=%d worker=%s attempts=%d",
                chunk.job_id,
                chunk.idx,
                chunk.worker,
                chunk.attempts,
            )
    session.commit()


def _resend_lost(
    session: Session,
    report: Report,
    now: datetime,
    cutoff: datetime,
    live: set[str] | None,
) -> None:
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
    for chunk in candidates:
        if chunk.sent_at is not None and (live is None or chunk.task_id in live):
            continue
        report.unsent += 1
        task_id = new_id()
        sent_cas = (
            Chunk.sent_at.is_(None) if chunk.sent_at is None else Chunk.sent_at == chunk.sent_at
        )
        if (
            affected(
                session,
                update(Chunk)
                .where(Chunk.id == chunk.id, Chunk.status == Status.QUEUED, sent_cas)
                .values(sent_at=now, task_id=task_id),
            )
            == 1
        ):
            report.to_send[chunk.id] = task_id
            log.info("resending chunk logid=%s chunk_id=%s", chunk.job_id, chunk.id)
    session.commit()


def _due_callbacks(session: Session, report: Report, now: datetime, lease_s: float) -> None:
    """Collect pending callbacks whose next try is due, leasing each so it is sent once."""
    due = session.execute(
        select(Job.id, Job.callback_next_at).where(
            Job.callback_status == CallbackStatus.PENDING, Job.callback_next_at <= now
        )
    ).all()
    lease = now + timedelta(seconds=lease_s)
    for job_id, next_at in due:
        if (
            affected(
                session,
                update(Job)
                .where(
                    Job.id == job_id,
                    Job.callback_status == CallbackStatus.PENDING,
                    Job.callback_next_at == next_at,
                )
                .values(callback_next_at=lease),
            )
            == 1
        ):
            report.callbacks.append(job_id)
    session.commit()
