"""How a job ends: the one place that decides a job's final state from its chunks'.

Each function runs inside its caller's transaction, with the job row already locked
(`stapel.locking.lock_job`), and does not commit: a chunk's last change and its job's
end are one transaction, whichever path made it (a worker's finish or failure, the
watchdog's repair of a job whose chunks have all ended, a cancel).
"""

from __future__ import annotations

import logging
from typing import cast

from sqlalchemy import Table, bindparam, func, select, update
from sqlalchemy.orm import Session

from stapel.callbacks import on_final
from stapel.db import affected
from stapel.states import ACTIVE, Status
from stapel.tables import Chunk, Job, db_now

log = logging.getLogger(__name__)


def end_if_done(
    session: Session, job_id: str, *, only_chunk_succeeded: bool = False
) -> Status | None:
    """End an active job whose chunks have all ended; return its new state, else None.

    All chunks succeeded: the job succeeds. Any chunk failed: the job fails with that
    chunk's error. Chunks cancelled under an active job (a state no path leaves any
    more, but older versions could): the job fails saying so. `only_chunk_succeeded`:
    the caller just moved the job's one chunk to succeeded, so nothing needs counting.
    """
    if only_chunk_succeeded:
        return Status.SUCCEEDED if succeed(session, job_id) else None
    counts = dict(
        session.execute(
            select(Chunk.status, func.count()).where(Chunk.job_id == job_id).group_by(Chunk.status)
        ).all()
    )
    if any(counts.get(status) for status in ACTIVE):
        return None
    if not counts:  # nothing to translate ever: no path makes such a job, but it must end
        return Status.FAILED if fail(session, job_id, "the job has no chunks") else None
    if set(counts) == {Status.SUCCEEDED}:
        return Status.SUCCEEDED if succeed(session, job_id) else None
    failed = session.execute(
        select(Chunk.idx, Chunk.error)
        .where(Chunk.job_id == job_id, Chunk.status == Status.FAILED)
        .order_by(Chunk.idx)
        .limit(1)
    ).first()
    reason = (
        f"chunk {failed.idx} failed: {failed.error}"
        if failed
        else "its chunks ended without finishing (cancelled)"
    )
    return Status.FAILED if fail(session, job_id, reason) else None


_JOBS = cast(Table, Job.__table__)
# Built once, on the table: the ORM's bulk UPDATE (session.execute(update(Job)...)) built,
# hashed and evaluated it per call, 8% of a worker's Python time in many small jobs.
_SUCCEED = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("ending_job"), _JOBS.c.status.in_(ACTIVE))
    .values(
        status=Status.SUCCEEDED,
        finished_at=db_now(),
        segments_done=_JOBS.c.segments_total,
        **on_final(),
    )
)


def succeed(session: Session, job_id: str) -> bool:
    """Mark an active job succeeded (its callback becomes due); True if this call did.

    A Core statement on the session's connection: a Job object the session holds is
    not refreshed (no caller reads one after).
    """
    return session.connection().execute(_SUCCEED, {"ending_job": job_id}).rowcount == 1


def fail(session: Session, job_id: str, reason: str) -> bool:
    """Mark an active job failed and stop its other chunks; True if this call did."""
    won = (
        affected(
            session,
            update(Job)
            .where(Job.id == job_id, Job.status.in_(ACTIVE))
            .values(status=Status.FAILED, error=reason, finished_at=db_now(), **on_final()),
        )
        == 1
    )
    if won:
        stop_chunks(session, job_id, Status.CANCELLED)
        log.warning("job failed logid=%s reason=%s", job_id, reason)
    return won


def stop_chunks(session: Session, job_id: str, status: Status) -> None:
    """Move a job's queued and running chunks to status (their workers stop at a heartbeat)."""
    session.execute(
        update(Chunk)
        .where(Chunk.job_id == job_id, Chunk.status.in_(ACTIVE))
        .values(status=status, finished_at=db_now())
    )


def requeue_if_idle(session: Session, job_id: str) -> None:
    """Put a running job back to `queued` when none of its chunks is running any more."""
    running = (
        select(func.count())
        .select_from(Chunk)
        .where(Chunk.job_id == job_id, Chunk.status == Status.RUNNING)
        .scalar_subquery()
    )
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == Status.RUNNING, running == 0)
        .values(status=Status.QUEUED)
    )
