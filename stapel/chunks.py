"""What a worker does to a chunk's rows: claim it, record progress, finish or fail it.

A claim is a compare-and-set from `queued` to `running` that also hands out a claim
token; every later write checks the token, so a worker that lost its chunk (requeued by
the watchdog, cancelled by the client) finds out at its next heartbeat and stops.

Each public function is one transaction that first locks the chunk's job
(`stapel.locking`: job, then chunks, then segments), and is re-run on a lock conflict.
Heartbeats and times are the database's clock (`db_now`), never this host's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, case, func, literal, select, update
from sqlalchemy.orm import Session

from stapel import endings, mtcache
from stapel.db import affected
from stapel.locking import lock_job, retry_conflicts
from stapel.states import ChunkOutcome, Origin, Status
from stapel.tables import Chunk, Job, Segment, db_now, new_id

Written = tuple[int, str] | tuple[int, str, str | None, str | None]
"""(index, target) or (index, target, origin, model fingerprint) of a translated segment;
a plain pair is a model translation of unknown fingerprint."""


@dataclass(frozen=True)
class Learned:
    """New model translations of pieces, to store in the MT cache with the segments."""

    scope: str
    fingerprint: str
    entries: dict[str, str]


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
    claimed_at: datetime | None = None
    """The database's time of the claim (so `claimed_at - sent_at` is the queue wait)."""
    has_callback: bool = False
    split_sentences: bool = True
    tenant_id: str = ""
    use_cache: bool = True
    memories: tuple[str, ...] = ()


def chunk_size(session: Session, chunk_id: str) -> int:
    """Return a chunk's segment count (0 for a chunk that does not exist)."""
    return (
        session.scalar(select(Chunk.end_segment - Chunk.first_segment).where(Chunk.id == chunk_id))
        or 0
    )


@retry_conflicts
def claim_chunk(session: Session, chunk_id: str, worker: str) -> Claim | None:
    """Take a queued chunk for this worker, or return None if it is not claimable."""
    job_id = session.scalar(select(Chunk.job_id).where(Chunk.id == chunk_id))
    session.commit()  # the claim's own transaction starts with the job's lock
    if job_id is None:
        return None
    lock_job(session, job_id)
    token = new_id()
    won = affected(
        session,
        update(Chunk)
        .where(Chunk.id == chunk_id, Chunk.status == Status.QUEUED)
        .values(
            status=Status.RUNNING,
            attempts=Chunk.attempts + 1,
            claim_token=token,
            worker=worker,
            heartbeat_at=db_now(),
            error=None,
        ),
    )
    if won != 1:
        session.rollback()
        return None
    chunk = session.execute(
        select(
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
            db_now().label("now"),
            Job.split_sentences,
            Job.tenant_id,
            Job.use_cache,
            Job.memories,
        )
        .join(Job, Job.id == Chunk.job_id)
        .where(Chunk.id == chunk_id)
    ).one()
    queued = Job.status == Status.QUEUED
    session.execute(
        update(Job)
        .where(Job.id == job_id)
        .values(
            status=case((queued, literal(Status.RUNNING.value)), else_=Job.status),
            started_at=case(
                (queued, func.coalesce(Job.started_at, db_now())), else_=Job.started_at
            ),
            attempts=case((Job.attempts < chunk.attempts, chunk.attempts), else_=Job.attempts),
        )
    )
    session.commit()
    return Claim(
        chunk_id=chunk_id,
        job_id=job_id,
        chunk_idx=chunk.idx,
        token=token,
        pair=f"{chunk.source_lang}-{chunk.target_lang}",
        first=chunk.first_segment,
        end=chunk.end_segment,
        attempt=chunk.attempts,
        priority=chunk.priority,
        chunks_total=chunk.chunks_total,
        sent_at=chunk.sent_at,
        claimed_at=chunk.now,
        has_callback=bool(chunk.has_callback),
        split_sentences=chunk.split_sentences is not False,
        tenant_id=chunk.tenant_id,
        use_cache=chunk.use_cache is not False,
        memories=tuple(chunk.memories or ()),
    )


@retry_conflicts
def release_claim(session: Session, claim: Claim) -> bool:
    """Give a claimed chunk back untouched, as if never claimed: no attempt charged.

    For a worker that cannot serve the chunk (its model does not load here); returns
    False if the claim was already lost.
    """
    lock_job(session, claim.job_id)
    won = affected(
        session,
        update(Chunk)
        .where(*_owned(claim))
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
        endings.requeue_if_idle(session, claim.job_id)
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


@retry_conflicts
def record_batch(
    session: Session,
    claim: Claim,
    translations: Sequence[Written],
    learned: Learned | None = None,
) -> bool:
    """Write translated segments, heartbeat and progress; return False if the claim is lost.

    The segments are kept even when the claim is lost: they are correct translations;
    so are the learned cache entries, stored in the same transaction.
    """
    lock_job(session, claim.job_id)
    _write_segments(session, claim, translations, learned)
    counts = _chunk_counts(session, claim)
    owned = (
        affected(
            session,
            update(Chunk)
            .where(*_owned(claim))
            .values(done=counts.pop("done"), heartbeat_at=db_now(), **counts),
        )
        == 1
    )
    _refresh_job_progress(session, claim.job_id)
    session.commit()
    return owned


def _owned(claim: Claim) -> tuple:
    """The compare-and-set condition of a write that needs the claim still held."""
    return (
        Chunk.id == claim.chunk_id,
        Chunk.claim_token == claim.token,
        Chunk.status == Status.RUNNING,
    )


def _chunk_counts(session: Session, claim: Claim) -> dict[str, int]:
    """The chunk's ended segments (`done`) and its targets per origin, in one query."""
    rows = session.execute(
        select(Segment.origin, func.count())
        .where(
            Segment.job_id == claim.job_id,
            Segment.idx >= claim.first,
            Segment.idx < claim.end,
            Segment.target.is_not(None) | Segment.error_code.is_not(None),
        )
        .group_by(Segment.origin)
    ).all()
    by_origin = {origin: int(n) for origin, n in rows}
    return {
        "done": sum(by_origin.values()),
        "from_memory": by_origin.get(Origin.MEMORY.value, 0),
        "from_cache": by_origin.get(Origin.CACHE.value, 0),
        "from_mt": by_origin.get(Origin.MT.value, 0),
    }


_SEGMENTS = Segment.__table__
_WRITE_SEGMENT = (
    update(_SEGMENTS)  # type: ignore[arg-type]
    .where(
        _SEGMENTS.c.job_id == bindparam("w_job"),
        _SEGMENTS.c.idx == bindparam("w_idx"),
        # a segment is written once: a stale worker or a re-run never overwrites it
        _SEGMENTS.c.target.is_(None),
    )
    .values(
        target=bindparam("w_target"),
        origin=bindparam("w_origin"),
        fingerprint=bindparam("w_fp"),
    )
)


def _write_segments(
    session: Session,
    claim: Claim,
    translations: Sequence[Written],
    learned: Learned | None = None,
) -> None:
    if translations:
        rows = []
        for row in translations:
            origin, fp = (row[2], row[3]) if len(row) == 4 else (Origin.MT.value, None)
            rows.append(
                {"w_job": claim.job_id, "w_idx": row[0], "w_target": row[1], "w_origin": origin}
                | {"w_fp": fp}
            )
        session.execute(_WRITE_SEGMENT, rows)
    if learned is not None:
        mtcache.store(session, learned.scope, learned.fingerprint, learned.entries)


def _refresh_job_progress(session: Session, job_id: str) -> None:
    def total(column):
        return (
            select(func.coalesce(func.sum(column), 0))
            .where(Chunk.job_id == job_id)
            .scalar_subquery()
        )

    session.execute(
        update(Job)
        .where(Job.id == job_id)
        .values(
            segments_done=total(Chunk.done),
            segments_from_memory=total(Chunk.from_memory),
            segments_from_cache=total(Chunk.from_cache),
            segments_from_mt=total(Chunk.from_mt),
        )
    )


def _ended_under(session: Session, claim: Claim, status: Status) -> bool:
    """Whether this claim already moved its chunk to status (a re-run after a lost answer)."""
    row = session.execute(
        select(Chunk.claim_token, Chunk.status).where(Chunk.id == claim.chunk_id)
    ).first()
    return row is not None and tuple(row) == (claim.token, status)


@retry_conflicts
def finish_chunk(
    session: Session,
    claim: Claim,
    translations: Sequence[Written] = (),
    learned: Learned | None = None,
) -> ChunkOutcome:
    """Write the last translations, mark the chunk succeeded and, if it was the job's
    last, end the job: one transaction.

    Return JOB_SUCCEEDED if the job has succeeded with this chunk, CHUNK_SUCCEEDED if
    other chunks are still to go, LOST if the claim was lost (the translations are
    kept, nothing else changes). Safe to run again: a chunk that already succeeded
    under this claim (a commit whose answer was lost) counts as this call's success.
    """
    lock_job(session, claim.job_id)
    _write_segments(session, claim, translations, learned)
    counts = _chunk_counts(session, claim)
    counts.pop("done")
    won = affected(
        session,
        update(Chunk)
        .where(*_owned(claim))
        .values(
            status=Status.SUCCEEDED,
            finished_at=db_now(),
            done=claim.end - claim.first,
            **counts,
        ),
    )
    if won != 1 and not _ended_under(session, claim, Status.SUCCEEDED):
        session.commit()
        return ChunkOutcome.LOST
    _refresh_job_progress(session, claim.job_id)
    ended = endings.end_if_done(session, claim.job_id)
    status = session.scalar(select(Job.status).where(Job.id == claim.job_id))
    session.commit()
    if ended == Status.SUCCEEDED or (won != 1 and status == Status.SUCCEEDED):
        return ChunkOutcome.JOB_SUCCEEDED
    return ChunkOutcome.CHUNK_SUCCEEDED


@retry_conflicts
def fail_chunk(
    session: Session, claim: Claim, error: str, *, retry: bool, max_attempts: int
) -> ChunkOutcome:
    """Requeue the chunk alone if it has attempts left and may retry, else fail its job
    in the same transaction.

    Returns REQUEUED, JOB_FAILED (this call failed the job) or LOST (claim gone).
    """
    lock_job(session, claim.job_id)
    if retry and claim.attempt < max_attempts:
        won = (
            affected(
                session,
                update(Chunk)
                .where(*_owned(claim))
                .values(status=Status.QUEUED, claim_token=None, sent_at=None, error=error),
            )
            == 1
        )
        if won:
            endings.requeue_if_idle(session, claim.job_id)
        session.commit()
        return ChunkOutcome.REQUEUED if won else ChunkOutcome.LOST
    won = (
        affected(
            session,
            update(Chunk)
            .where(*_owned(claim))
            .values(status=Status.FAILED, finished_at=db_now(), error=error),
        )
        == 1
    )
    if not won:
        again = _ended_under(session, claim, Status.FAILED)
        session.rollback()
        return ChunkOutcome.JOB_FAILED if again else ChunkOutcome.LOST
    reason = f"chunk {claim.chunk_idx} failed after {claim.attempt} attempt(s): {error}"
    failed = endings.fail(session, claim.job_id, reason)
    session.commit()
    return ChunkOutcome.JOB_FAILED if failed else ChunkOutcome.LOST


@retry_conflicts
def fail_job(session: Session, job_id: str, reason: str) -> bool:
    """Mark a job failed with a reason and stop its other chunks; True if this call did."""
    lock_job(session, job_id)
    won = endings.fail(session, job_id, reason)
    session.commit()
    return won
