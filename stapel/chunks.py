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
from typing import Any

from sqlalchemy import Boolean, Float, Text, bindparam, case, func, literal, select, update
from sqlalchemy.orm import Session

from stapel import endings, mtcache
from stapel.db import affected
from stapel.locking import job_status, lock_job, retry_conflicts
from stapel.scores import BUCKETS, BelowMinScore, bucket_counts, needs_review
from stapel.states import ChunkOutcome, Origin, Status
from stapel.tables import Chunk, Job, Segment, db_now, new_id

Written = (
    tuple[int, str]
    | tuple[int, str, str | None, str | None]
    | tuple[int, str, str | None, str | None, float | None]
)
"""(index, target), (index, target, origin, model fingerprint) or (index, target, origin,
model fingerprint, score) of a translated segment; a plain pair is a model translation
of unknown fingerprint, a row without a score has none (stapel.scores)."""


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
    min_score: float | None = None
    """A target scoring under this goes to review (stapel.scores.needs_review)."""
    below_min_score: str = BelowMinScore.EMPTY.value


def chunk_size(session: Session, chunk_id: str) -> int:
    """Return a chunk's segment count (0 for a chunk that does not exist)."""
    return (
        session.scalar(select(Chunk.end_segment - Chunk.first_segment).where(Chunk.id == chunk_id))
        or 0
    )


# The hot path's statements (a claim, each batch write, a finish: several per chunk, a
# chunk per small job) are built once, on the tables: building and hashing a statement
# per call, and the ORM's bulk-update bookkeeping, cost more CPU than running it.
_CHUNKS = Chunk.__table__
_JOBS = Job.__table__
_CHUNK_JOB = select(_CHUNKS.c.job_id).where(_CHUNKS.c.id == bindparam("c_chunk"))
_CLAIM = (
    update(_CHUNKS)  # type: ignore[arg-type]
    .where(_CHUNKS.c.id == bindparam("c_chunk"), _CHUNKS.c.status == Status.QUEUED.value)
    .values(
        status=Status.RUNNING.value,
        attempts=_CHUNKS.c.attempts + 1,
        claim_token=bindparam("c_token"),
        worker=bindparam("c_worker"),
        heartbeat_at=db_now(),
        error=None,
    )
)
_CLAIMED_ROWS = select(
    _CHUNKS.c.idx,
    _CHUNKS.c.first_segment,
    _CHUNKS.c.end_segment,
    _CHUNKS.c.attempts,
    _CHUNKS.c.sent_at,
    _JOBS.c.source_lang,
    _JOBS.c.target_lang,
    # The effective priority (fair share included) is what the worker's batcher
    # serves too, not the one the client asked for.
    func.coalesce(_JOBS.c.dispatch_priority, _JOBS.c.priority).label("priority"),
    _JOBS.c.chunks_total,
    _JOBS.c.callback_url.is_not(None).label("has_callback"),
    db_now().label("now"),
    _JOBS.c.split_sentences,
    _JOBS.c.tenant_id,
    _JOBS.c.use_cache,
    _JOBS.c.memories,
    _JOBS.c.min_score,
    _JOBS.c.below_min_score,
).select_from(_CHUNKS.join(_JOBS, _JOBS.c.id == _CHUNKS.c.job_id))
_CLAIMED = _CLAIMED_ROWS.where(_CHUNKS.c.id == bindparam("c_chunk"))
_QUEUED = _JOBS.c.status == Status.QUEUED.value
_START_JOB = (
    update(_JOBS)  # type: ignore[arg-type]
    .where(_JOBS.c.id == bindparam("c_job"))
    .values(
        status=case((_QUEUED, literal(Status.RUNNING.value)), else_=_JOBS.c.status),
        started_at=case(
            (_QUEUED, func.coalesce(_JOBS.c.started_at, db_now())), else_=_JOBS.c.started_at
        ),
        attempts=case(
            (_JOBS.c.attempts < bindparam("c_attempts"), bindparam("c_attempts")),
            else_=_JOBS.c.attempts,
        ),
    )
)


@retry_conflicts
def claim_chunk(session: Session, chunk_id: str, worker: str) -> Claim | None:
    """Take a queued chunk for this worker, or return None if it is not claimable."""
    job_id = session.scalar(_CHUNK_JOB, {"c_chunk": chunk_id})
    session.commit()  # the claim's own transaction starts with the job's lock
    if job_id is None:
        return None
    lock_job(session, job_id)
    token = new_id()
    won = affected(session, _CLAIM, {"c_chunk": chunk_id, "c_token": token, "c_worker": worker})
    if won != 1:
        session.rollback()
        return None
    chunk = session.execute(_CLAIMED, {"c_chunk": chunk_id}).one()
    session.execute(_START_JOB, {"c_job": job_id, "c_attempts": chunk.attempts})
    session.commit()
    return claim_from_row(chunk, chunk_id, job_id, token)


def claim_from_row(row: Any, chunk_id: str, job_id: str, token: str) -> Claim:
    """Return the Claim a claimed chunk's row (with its job's columns) describes."""
    return Claim(
        chunk_id=chunk_id,
        job_id=job_id,
        chunk_idx=row.idx,
        token=token,
        pair=f"{row.source_lang}-{row.target_lang}",
        first=row.first_segment,
        end=row.end_segment,
        attempt=row.attempts,
        priority=row.priority,
        chunks_total=row.chunks_total,
        sent_at=row.sent_at,
        claimed_at=row.now,
        has_callback=bool(row.has_callback),
        split_sentences=row.split_sentences is not False,
        tenant_id=row.tenant_id,
        use_cache=row.use_cache is not False,
        memories=tuple(row.memories or ()),
        min_score=row.min_score,
        below_min_score=row.below_min_score or BelowMinScore.EMPTY.value,
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


_SEGMENTS = Segment.__table__
_IN_CHUNK = (
    _SEGMENTS.c.job_id == bindparam("s_job"),
    _SEGMENTS.c.idx >= bindparam("s_first"),
    _SEGMENTS.c.idx < bindparam("s_end"),
)
_PENDING = (
    select(_SEGMENTS.c.idx, _SEGMENTS.c.source)
    .where(*_IN_CHUNK, _SEGMENTS.c.target.is_(None), _SEGMENTS.c.error_code.is_(None))
    .order_by(_SEGMENTS.c.idx)
)
_COUNTS = (
    select(
        _SEGMENTS.c.origin,
        func.count(),
        func.sum(case((_SEGMENTS.c.review, 1), else_=0)),
        *(func.sum(expr) for expr in bucket_counts(_SEGMENTS.c.score, _SEGMENTS.c.origin).values()),
    )
    .where(*_IN_CHUNK, _SEGMENTS.c.target.is_not(None) | _SEGMENTS.c.error_code.is_not(None))
    .group_by(_SEGMENTS.c.origin)
)


def _in_chunk(claim: Claim) -> dict:
    return {"s_job": claim.job_id, "s_first": claim.first, "s_end": claim.end}


def pending_segments(session: Session, claim: Claim) -> list[tuple[int, str]]:
    """Return (index, source) of the chunk's segments not translated yet (resume point)."""
    return [(idx, source) for idx, source in session.execute(_PENDING, _in_chunk(claim))]


_OWNED = (
    _CHUNKS.c.id == bindparam("o_chunk"),
    _CHUNKS.c.claim_token == bindparam("o_token"),
    _CHUNKS.c.status == Status.RUNNING.value,
)
_HEARTBEAT = update(_CHUNKS).where(*_OWNED).values(heartbeat_at=db_now())  # type: ignore[arg-type]
_COUNTED: dict[str, Any] = {
    "done": bindparam("n_done"),
    "from_memory": bindparam("n_memory"),
    "from_cache": bindparam("n_cache"),
    "from_mt": bindparam("n_mt"),
    "review": bindparam("n_review"),
    **{name: bindparam(f"n_{name}") for name, _ in BUCKETS},
}
_PROGRESS = (
    update(_CHUNKS)  # type: ignore[arg-type]
    .where(*_OWNED)
    .values(heartbeat_at=db_now(), **_COUNTED)
)
_FINISH = (
    update(_CHUNKS)  # type: ignore[arg-type]
    .where(*_OWNED)
    .values(status=Status.SUCCEEDED.value, finished_at=db_now(), **_COUNTED)
)


def _owner(claim: Claim) -> dict:
    return {"o_chunk": claim.chunk_id, "o_token": claim.token}


@retry_conflicts
def record_batch(
    session: Session,
    claim: Claim,
    translations: Sequence[Written],
    learned: Learned | None = None,
) -> bool:
    """Write translated segments, heartbeat and progress; return False if the claim is lost.

    The segments are kept even when the claim is lost: they are correct translations;
    so are the learned cache entries, stored in the same transaction. With nothing to
    write it is a heartbeat alone.
    """
    lock_job(session, claim.job_id)
    if not translations and learned is None:
        owned = affected(session, _HEARTBEAT, _owner(claim)) == 1
        session.commit()
        return owned
    _write_segments(session, claim, translations, learned)
    counts = _chunk_counts(session, claim)
    owned = affected(session, _PROGRESS, _owner(claim) | counts) == 1
    _refresh_job_progress(session, claim, counts)
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
    """The chunk's ended segments and its targets per origin, in one query, as the
    parameters of `_COUNTED`."""
    by_origin, sums = {}, [0] * (1 + len(BUCKETS))
    for origin, n, *counted in session.execute(_COUNTS, _in_chunk(claim)):
        by_origin[origin] = int(n)
        sums = [total + int(more or 0) for total, more in zip(sums, counted, strict=True)]
    return {
        "n_done": sum(by_origin.values()),
        "n_memory": by_origin.get(Origin.MEMORY.value, 0),
        "n_cache": by_origin.get(Origin.CACHE.value, 0),
        "n_mt": by_origin.get(Origin.MT.value, 0),
        "n_review": sums[0],
    } | {f"n_{name}": n for (name, _), n in zip(BUCKETS, sums[1:], strict=True)}


_WRITE_SEGMENT = (
    update(_SEGMENTS)  # type: ignore[arg-type]
    .where(
        _SEGMENTS.c.job_id == bindparam("w_job"),
        _SEGMENTS.c.idx == bindparam("w_idx"),
        # a segment is written once: a stale worker or a re-run never overwrites it
        _SEGMENTS.c.target.is_(None),
    )
    .values(
        # a NULL target is one sent to review that keeps its source (segment_rows)
        target=func.coalesce(bindparam("w_target", type_=Text()), _SEGMENTS.c.source),
        origin=bindparam("w_origin"),
        fingerprint=bindparam("w_fp"),
        score=bindparam("w_score", type_=Float()),
        review=bindparam("w_review", type_=Boolean()),
    )
)


def segment_rows(claim: Claim, translations: Sequence[Written]) -> list[dict]:
    """The parameters of `_WRITE_SEGMENT` for a claim's translated segments, those
    scoring under the job's min_score sent to review (stapel.scores)."""
    rows = []
    for row in translations:
        origin, fp = (row[2], row[3]) if len(row) >= 4 else (Origin.MT.value, None)
        score = row[4] if len(row) == 5 else None
        review = needs_review(score, claim.min_score)
        target: str | None = str(row[1])
        if review:
            target = "" if claim.below_min_score == BelowMinScore.EMPTY.value else None
        rows.append(
            {"w_job": claim.job_id, "w_idx": row[0], "w_target": target, "w_origin": origin}
            | {"w_fp": fp, "w_score": score, "w_review": review}
        )
    return rows


def _write_segments(
    session: Session,
    claim: Claim,
    translations: Sequence[Written],
    learned: Learned | None = None,
) -> None:
    if translations:
        session.execute(_WRITE_SEGMENT, segment_rows(claim, translations))
    if learned is not None:
        mtcache.store(session, learned.scope, learned.fingerprint, learned.entries)


def _total(column):
    return (
        select(func.coalesce(func.sum(column), 0))
        .where(_CHUNKS.c.job_id == bindparam("p_job"))
        .scalar_subquery()
    )


_JOB_PROGRESS = (
    update(_JOBS)  # type: ignore[arg-type]
    .where(_JOBS.c.id == bindparam("p_job"))
    .values(
        segments_done=_total(_CHUNKS.c.done),
        segments_from_memory=_total(_CHUNKS.c.from_memory),
        segments_from_cache=_total(_CHUNKS.c.from_cache),
        segments_from_mt=_total(_CHUNKS.c.from_mt),
        segments_review=_total(_CHUNKS.c.review),
    )
)
_JOB_COUNTS = (
    update(_JOBS)  # type: ignore[arg-type]
    .where(_JOBS.c.id == bindparam("p_job"))
    .values(
        segments_done=bindparam("n_done"),
        segments_from_memory=bindparam("n_memory"),
        segments_from_cache=bindparam("n_cache"),
        segments_from_mt=bindparam("n_mt"),
        segments_review=bindparam("n_review"),
    )
)


def _refresh_job_progress(session: Session, claim: Claim, counts: dict[str, int]) -> None:
    """The job's counts: its chunks' sums, or this chunk's counts when it is the only one."""
    if claim.chunks_total == 1:
        session.execute(_JOB_COUNTS, {"p_job": claim.job_id} | counts)
    else:
        session.execute(_JOB_PROGRESS, {"p_job": claim.job_id})


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
    counts = _chunk_counts(session, claim) | {"n_done": claim.end - claim.first}
    won = affected(session, _FINISH, _owner(claim) | counts)
    if won != 1 and not _ended_under(session, claim, Status.SUCCEEDED):
        session.commit()
        return ChunkOutcome.LOST
    _refresh_job_progress(session, claim, counts)
    # the job's only chunk just succeeded under this claim: no need to count its chunks
    only = won == 1 and claim.chunks_total == 1
    ended = endings.end_if_done(session, claim.job_id, only_chunk_succeeded=only)
    # a re-run after a lost answer: the first run may have ended the job already
    status = None if won == 1 else job_status(session, claim.job_id)
    session.commit()
    if Status.SUCCEEDED in (ended, status):
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
