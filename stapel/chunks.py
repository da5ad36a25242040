"""What a worker does to a chunk's rows: claim it, record progress, finish or fail it.

A claim is a compare-and-set from `queued` to `running` that also hands out a claim
token; every later write checks the token, so a worker that lost its chunk (requeued by
the watchdog, cancelled by the client) finds out at its next heartbeat and stops.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, literal, select, update
from sqlalchemy.orm import Session

from stapel.callbacks import on_final
from stapel.db import affected
from stapel.states import ACTIVE, ChunkOutcome, Status
from stapel.tables import Chunk, Job, Segment, new_id, utcnow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claim:
    """A chunk this worker owns until it finishes, fails or loses the claim."""

    chunk_id: str
    job_id: str
    chunk_idx: int
    token: str
    pair: str
    first: int
    end: int
    attempt: int
    priority: int
    chunks_total: int = 1
    sent_at: datetime | None = None
    has_callback: bool = False
    split_sentences: bool = True


def chunk_size(session: Session, chunk_id: str) -> int:
    """Return a chunk's segment count (0 for a chunk that does not exist)."""
    return (
        session.scalar(select(Chunk.end_segment - Chunk.first_segment).where(Chunk.id == chunk_id))
        or 0
    )


def claim_chunk(session: Session, chunk_id: str, worker: str) -> Claim | None:
    """Take a queued chunk for this worker, or return None if it is not claimable."""
    token, now = new_id(), utcnow()
    won = affected(
        session,
        update(Chunk)
        .where(Chunk.id == chunk_id, Chunk.status == Status.QUEUED)
        .values(
            status=Status.RUNNING,
            attempts=Chunk.attempts + 1,
            claim_token=token,
            worker=worker,
            heartbeat_at=now,
            error=None,
        ),
    )
    if won != 1:
        session.rollback()
        return None
    chunk = session.execute(
        select(
            Chunk.job_id,
            Chunk.idx,
            Chunk.first_segment,
            Chunk.end_segment,
            Chunk.attempts,
            Chunk.sent_at,
            Job.source_lang,
            Job.target_lang,
            # The effective priority (fair share included) is what the worker's batcher
            # serves too, not the one the client asked for.
            func.coalesce(Job.dispatch_priority, Job.priority).label("priority"),
            Job.chunks_total,
            Job.callback_url.is_not(None).label("has_callback"),
            Job.split_sentences,
        )
        .join(Job, Job.id == Chunk.job_id)
        .where(Chunk.id == chunk_id)
    ).one()
    session.execute(
        update(Job)
        .where(Job.id == chunk.job_id)
        .values(
            status=case(
                (Job.status == Status.QUEUED, literal(Status.RUNNING.value)), else_=Job.status
            ),
            started_at=case(
                (Job.status == Status.QUEUED, func.coalesce(Job.started_at, now)),
                else_=Job.started_at,
            ),
            attempts=case((Job.attempts < chunk.attempts, chunk.attempts), else_=Job.attempts),
        )
    )
    session.commit()
    return Claim(
        chunk_id=chunk_id,
        job_id=chunk.job_id,
        chunk_idx=chunk.idx,
        token=token,
        pair=f"{chunk.source_lang}-{chunk.target_lang}",
        first=chunk.first_segment,
        end=chunk.end_segment,
        attempt=chunk.attempts,
        priority=chunk.priority,
        chunks_total=chunk.chunks_total,
        sent_at=chunk.sent_at,
        has_callback=bool(chunk.has_callback),
        split_sentences=chunk.split_sentences is not False,
    )


def release_claim(session: Session, claim: Claim) -> bool:
    """Give a claimed chunk back untouched, as if never claimed: no attempt charged.

    For a worker that cannot serve the chunk (its model does not load here); returns
    False if the claim was already lost.
    """
    won = affected(
        session,
        update(Chunk)
        .where(
            Chunk.id == claim.chunk_id,
            Chunk.claim_token == claim.token,
            Chunk.status == Status.RUNNING,
        )
        .values(
            status=Status.QUEUED,
            attempts=Chunk.attempts - 1,
            claim_token=None,
            worker=None,
            sent_at=None,
            heartbeat_at=None,
        ),
    )
    if won == 1:
        requeue_job_if_idle(session, claim.job_id)
        most = (
            select(func.coalesce(func.max(Chunk.attempts), 0))
            .where(Chunk.job_id == claim.job_id)
            .scalar_subquery()
        )
        session.execute(update(Job).where(Job.id == claim.job_id).values(attempts=most))
    session.commit()
    return won == 1


def pending_segments(session: Session, claim: Claim) -> list[tuple[int, str]]:
    """Return (index, source) of the chunk's segments not translated yet (resume point)."""
    rows = session.execute(
        select(Segment.idx, Segment.source)
        .where(
            Segment.job_id == claim.job_id,
            Segment.idx >= claim.first,
            Segment.idx < claim.end,
            Segment.target.is_(None),
            Segment.error_code.is_(None),
        )
        .order_by(Segment.idx)
    )
    return [(idx, source) for idx, source in rows]


def record_batch(session: Session, claim: Claim, translations: list[tuple[int, str]]) -> bool:
    """Write translated segments, heartbeat and progress; return False if the claim is lost.

    The segments are kept even when the claim is lost: they are correct translations.
    """
    _write_segments(session, claim, translations)
    done = session.scalar(
        select(func.count())
        .select_from(Segment)
        .where(
            Segment.job_id == claim.job_id,
            Segment.idx >= claim.first,
            Segment.idx < claim.end,
            Segment.target.is_not(None) | Segment.error_code.is_not(None),
        )
    )
    owned = (
        affected(
            session,
            update(Chunk)
            .where(
                Chunk.id == claim.chunk_id,
                Chunk.claim_token == claim.token,
                Chunk.status == Status.RUNNING,
            )
            .values(done=done, heartbeat_at=utcnow()),
        )
        == 1
    )
    _refresh_job_progress(session, claim.job_id)
    session.commit()
    return owned


def _write_segments(session: Session, claim: Claim, translations: list[tuple[int, str]]) -> None:
    if translations:
        session.execute(
            update(Segment),
            [{"job_id": claim.job_id, "idx": i, "target": t} for i, t in translations],
        )


def _refresh_job_progress(session: Session, job_id: str) -> None:
    total_done = (
        select(func.coalesce(func.sum(Chunk.done), 0))
        .where(Chunk.job_id == job_id)
        .scalar_subquery()
    )
    session.execute(update(Job).where(Job.id == job_id).values(segments_done=total_done))


def finish_chunk(
    session: Session, claim: Claim, translations: Sequence[tuple[int, str]] = ()
) -> ChunkOutcome:
    """Write the last translations and mark the chunk succeeded, in one transaction.

    Return JOB_SUCCEEDED if that finished its job, CHUNK_SUCCEEDED if other chunks are
    still to go, LOST if the claim was lost (the translations are kept, nothing else changes). A job
    of one chunk ends in the same transaction; a job of several is checked after the
    commit, so that of two last chunks finishing at once one sees the other's success.
    """
    now = utcnow()
    _write_segments(session, claim, list(translations))
    won = affected(
        session,
        update(Chunk)
        .where(
            Chunk.id == claim.chunk_id,
            Chunk.claim_token == claim.token,
            Chunk.status == Status.RUNNING,
        )
        .values(status=Status.SUCCEEDED, finished_at=now, done=claim.end - claim.first),
    )
    if won != 1:
        session.commit()
        return ChunkOutcome.LOST
    if claim.chunks_total == 1:
        return _finish_job(session, claim.job_id, now)
    _refresh_job_progress(session, claim.job_id)
    session.commit()
    unfinished = session.scalar(
        select(func.count())
        .select_from(Chunk)
        .where(Chunk.job_id == claim.job_id, Chunk.status != Status.SUCCEEDED)
    )
    if unfinished:
        return ChunkOutcome.CHUNK_SUCCEEDED
    return _finish_job(session, claim.job_id, now)


def _finish_job(session: Session, job_id: str, now: datetime) -> ChunkOutcome:
    finished = (
        affected(
            session,
            update(Job)
            .where(Job.id == job_id, Job.status.in_(ACTIVE))
            .values(
                status=Status.SUCCEEDED,
                finished_at=now,
                segments_done=Job.segments_total,
                **on_final(now),
            ),
        )
        == 1
    )
    session.commit()
    return ChunkOutcome.JOB_SUCCEEDED if finished else ChunkOutcome.CHUNK_SUCCEEDED


def fail_chunk(
    session: Session, claim: Claim, error: str, *, retry: bool, max_attempts: int
) -> ChunkOutcome:
    """Requeue the chunk alone if it has attempts left and may retry, else fail its job.

    Returns REQUEUED, JOB_FAILED (this call failed the job) or LOST (claim gone).
    """
    if retry and claim.attempt < max_attempts:
        won = (
            affected(
                session,
                update(Chunk)
                .where(
                    Chunk.id == claim.chunk_id,
                    Chunk.claim_token == claim.token,
                    Chunk.status == Status.RUNNING,
                )
                .values(status=Status.QUEUED, claim_token=None, sent_at=None, error=error),
            )
            == 1
        )
        if won:
            requeue_job_if_idle(session, claim.job_id)
        session.commit()
        return ChunkOutcome.REQUEUED if won else ChunkOutcome.LOST
    won = (
        affected(
            session,
            update(Chunk)
            .where(
                Chunk.id == claim.chunk_id,
                Chunk.claim_token == claim.token,
                Chunk.status == Status.RUNNING,
            )
            .values(status=Status.FAILED, finished_at=utcnow(), error=error),
        )
        == 1
    )
    if not won:
        session.rollback()
        return ChunkOutcome.LOST
    reason = f"chunk {claim.chunk_idx} failed after {claim.attempt} attempt(s): {error}"
    return ChunkOutcome.JOB_FAILED if fail_job(session, claim.job_id, reason) else ChunkOutcome.LOST


def fail_job(session: Session, job_id: str, reason: str) -> bool:
    """Mark a job failed with a reason and stop its other chunks; True if this call did."""
    now = utcnow()
    won = (
        affected(
            session,
            update(Job)
            .where(Job.id == job_id, Job.status.in_(ACTIVE))
            .values(status=Status.FAILED, error=reason, finished_at=now, **on_final(now)),
        )
        == 1
    )
    if won:
        session.execute(
            update(Chunk)
            .where(Chunk.job_id == job_id, Chunk.status.in_(ACTIVE))
            .values(status=Status.CANCELLED, finished_at=now)
        )
        log.warning("job failed logid=%s reason=%s", job_id, reason)
    session.commit()
    return won


def requeue_job_if_idle(session: Session, job_id: str) -> None:
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
