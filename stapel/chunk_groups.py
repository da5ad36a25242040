"""Claims and finishes of many chunks at once: one transaction for a group.

A worker running many small jobs pays a claim and a finish per job; here a group of
them is paid once (workers/committer.py gathers the group). Each chunk keeps its own
outcome: the claim is still a compare-and-set per row (`UPDATE ... WHERE id IN (...)
AND status = 'queued' RETURNING id`, each row with its own token), a finish still
checks each chunk's token (`(id, claim_token) IN (...)`), and what one chunk's row
says decides only that chunk's outcome. Both follow stapel/chunks.py's one-chunk
functions statement for statement, with the lock order kept: the group's jobs in id
order (`stapel.locking.lock_jobs`), then their chunks, then their segments.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Executable, String, and_, bindparam, case, cast, func, select, true, update
from sqlalchemy.orm import Session

from stapel import endings, mtcache
from stapel.callbacks import on_final
from stapel.chunks import (
    _CHUNKS,
    _CLAIMED_ROWS,
    _JOBS,
    _START_JOB,
    _WRITE_SEGMENT,
    Claim,
    Learned,
    Written,
    _ended_under,
    claim_chunk,
    claim_from_row,
    finish_chunk,
    pending_segments,
    segment_rows,
)
from stapel.db import ids_in, pairs_in, pairs_param, read_retried
from stapel.locking import job_status, lock_jobs, retry_conflicts
from stapel.scores import bucket_counts
from stapel.states import ACTIVE, ChunkOutcome, Origin, Status
from stapel.tables import Segment, db_now

Pending = list[tuple[int, str]]
"""(index, source) of a claimed chunk's segments not translated yet."""


@dataclass(frozen=True)
class Finish:
    """One chunk's finish in a group: its claim, its last translations, its cache entries."""

    claim: Claim
    translations: Sequence[Written] = ()
    learned: Learned | None = None


_SEGMENTS = Segment.__table__
_CLAIMED_MANY = _CLAIMED_ROWS.add_columns(_CHUNKS.c.id.label("chunk_id"), _CHUNKS.c.job_id)


def claim_chunks(
    session: Session, chunk_ids: Sequence[str], worker: str
) -> dict[str, tuple[Claim, Pending]]:
    """Take the queued ones of chunk_ids for this worker; return each won chunk's claim
    and pending segments by chunk id (a chunk not claimable is absent).

    A lone chunk takes stapel.chunks.claim_chunk's statements, built once: half the CPU
    and wall time of a group of one (docs/design/worker-cost.md).
    """
    ids = sorted(set(chunk_ids))
    if len(ids) != 1:
        return _claim_group(session, ids, worker)
    claim = claim_chunk(session, ids[0], worker)
    if claim is None:
        return {}
    # claimed: a failing read from here on must not claim it again (its task would skip)
    pending = read_retried(session, lambda: pending_segments(session, claim))
    return {claim.chunk_id: (claim, pending)}


@retry_conflicts
def _claim_group(session: Session, ids: list[str], worker: str) -> dict[str, tuple[Claim, Pending]]:
    built = _built(session)
    jobs: dict[str, str] = dict(session.execute(built.chunk_jobs, {"g_ids": ids}).all())
    session.commit()  # the claim's own transaction starts with the jobs' locks
    if not jobs:
        return {}
    lock_jobs(session, jobs.values())
    won: dict[str, str] = dict(
        session.execute(built.claim, {"g_ids": list(jobs), "g_worker": worker}).all()
    )
    if not won:
        session.rollback()
        return {}
    rows = session.execute(built.claimed, {"g_ids": list(won)}).all()
    attempts: dict[str, int] = {}
    for row in rows:
        attempts[row.job_id] = max(attempts.get(row.job_id, 0), row.attempts)
    session.execute(
        _START_JOB, [{"c_job": job, "c_attempts": n} for job, n in sorted(attempts.items())]
    )
    session.commit()
    claims = {row.chunk_id: _claim(row, won[row.chunk_id]) for row in rows}
    # claimed: a failing read from here on must not claim them again (their tasks'd skip)
    pending = read_retried(session, lambda: pending_of(session, list(claims.values())))
    return {chunk_id: (claim, pending[chunk_id]) for chunk_id, claim in claims.items()}


def _new_token(dialect: str):
    """A new token for each row, made by the database: the statement stays the same for
    any group, where a token per row as a parameter made it a new one each time."""
    if dialect == "postgresql":
        return cast(func.gen_random_uuid(), String)
    return func.lower(func.hex(func.randomblob(16)))


def _claim(row, token: str) -> Claim:
    return claim_from_row(row, row.chunk_id, row.job_id, token)


def pending_of(session: Session, claims: Sequence[Claim]) -> dict[str, Pending]:
    """Each claim's segments not translated yet (its resume point), in one query."""
    found: dict[str, Pending] = {claim.chunk_id: [] for claim in claims}
    if not claims:
        return found
    rows = session.execute(_built(session).pending, {"g_ids": list(found)})
    for chunk_id, idx, source in rows:
        found[chunk_id].append((idx, source))
    return found


def _count_of(origin: str | None, counted=None):
    """The chunk's ended segments of one origin (finish_chunk's `_COUNTS`), per row; with
    `counted` (a 1-or-0 expression per segment), the sum of that over them instead."""
    segments = _SEGMENTS.c
    return (
        select(func.count() if counted is None else func.coalesce(func.sum(counted), 0))
        .where(
            segments.job_id == _CHUNKS.c.job_id,
            segments.idx >= _CHUNKS.c.first_segment,
            segments.idx < _CHUNKS.c.end_segment,
            segments.target.is_not(None) | segments.error_code.is_not(None),
            segments.origin == origin if origin is not None else true(),
        )
        .scalar_subquery()
    )


_SCORE_COUNTS = {"review": case((_SEGMENTS.c.review, 1), else_=0)} | bucket_counts(
    _SEGMENTS.c.score, _SEGMENTS.c.origin
)
"""The chunk's review and score counts (stapel.scores.BUCKETS), as finish_chunk's."""


def _job_sum(column):
    return (
        select(func.coalesce(func.sum(column), 0))
        .where(_CHUNKS.c.job_id == _JOBS.c.id)
        .scalar_subquery()
    )


def finish_chunks(session: Session, finishes: Sequence[Finish]) -> list[ChunkOutcome]:
    """Write each chunk's last translations, mark it succeeded and end its job if it was
    the last: one transaction for the group, an outcome per chunk (finish_chunk's).

    A lone finish is stapel.chunks.finish_chunk, as a lone claim is claim_chunk."""
    if len(finishes) == 1:
        (f,) = finishes
        return [finish_chunk(session, f.claim, f.translations, f.learned)]
    return _finish_group(session, finishes)


@retry_conflicts
def _finish_group(session: Session, finishes: Sequence[Finish]) -> list[ChunkOutcome]:
    lock_jobs(session, [f.claim.job_id for f in finishes])
    rows = [row for f in finishes for row in segment_rows(f.claim, f.translations)]
    if rows:  # one statement for the group's segments (executemany)
        session.execute(_WRITE_SEGMENT, rows)
    _store_learned(session, finishes)
    owned = [(f.claim.chunk_id, f.claim.token) for f in finishes]
    dialect = session.get_bind().dialect.name
    won = set(
        session.execute(_built(session).finish, pairs_param(dialect, "g_owned", owned)).scalars()
    )
    alone = sorted(
        {f.claim.job_id for f in finishes if f.claim.chunk_id in won and f.claim.chunks_total == 1}
    )
    succeeded = _end_only_chunks(session, alone)
    outcomes = [_outcome(session, f, f.claim.chunk_id in won, succeeded) for f in finishes]
    session.commit()
    return outcomes


def _store_learned(session: Session, finishes: Sequence[Finish]) -> None:
    """The group's new cache entries, one upsert per scope and fingerprint."""
    merged: dict[tuple[str, str], dict[str, str]] = {}
    for f in finishes:
        if f.learned is not None:
            merged.setdefault((f.learned.scope, f.learned.fingerprint), {}).update(
                f.learned.entries
            )
    for (scope, fp), entries in sorted(merged.items()):
        mtcache.store(session, scope, fp, entries)


_JOB_COUNTS_MANY = update(_JOBS).values(  # type: ignore[arg-type]
    segments_done=_job_sum(_CHUNKS.c.done),
    segments_from_memory=_job_sum(_CHUNKS.c.from_memory),
    segments_from_cache=_job_sum(_CHUNKS.c.from_cache),
    segments_from_mt=_job_sum(_CHUNKS.c.from_mt),
    segments_review=_job_sum(_CHUNKS.c.review),
)


def _end_only_chunks(session: Session, job_ids: list[str]) -> set[str]:
    """End the jobs whose one chunk this group just finished; return those it ended.

    Their counts are their chunk's (finish_chunk's `_JOB_COUNTS`); no chunk is counted."""
    if not job_ids:
        return set()
    built = _built(session)
    session.execute(built.job_counts, {"g_jobs": job_ids})
    return set(session.execute(built.succeed, {"g_jobs": job_ids}).scalars())


@dataclass(frozen=True)
class _Statements:
    """A group's statements, built once per dialect: their lists are parameters."""

    chunk_jobs: Executable
    claim: Executable
    claimed: Executable
    pending: Executable
    finish: Executable
    job_counts: Executable
    succeed: Executable


def _built(session: Session) -> _Statements:
    return _build(session.get_bind().dialect.name)


@functools.cache
def _build(dialect: str) -> _Statements:
    chunk_ids = ids_in(dialect, _CHUNKS.c.id, "g_ids")
    job_ids = ids_in(dialect, _JOBS.c.id, "g_jobs")
    segments = _SEGMENTS.c
    return _Statements(
        chunk_jobs=select(_CHUNKS.c.id, _CHUNKS.c.job_id).where(chunk_ids),
        claim=update(_CHUNKS)  # type: ignore[arg-type]
        .where(chunk_ids, _CHUNKS.c.status == Status.QUEUED.value)
        .values(
            status=Status.RUNNING.value,
            attempts=_CHUNKS.c.attempts + 1,
            claim_token=_new_token(dialect),
            worker=bindparam("g_worker"),
            heartbeat_at=db_now(),
            error=None,
        )
        .returning(_CHUNKS.c.id, _CHUNKS.c.claim_token),
        claimed=_CLAIMED_MANY.where(chunk_ids).order_by(_CHUNKS.c.id),
        pending=select(_CHUNKS.c.id, segments.idx, segments.source)
        .select_from(
            _CHUNKS.join(
                _SEGMENTS,
                and_(
                    segments.job_id == _CHUNKS.c.job_id,
                    segments.idx >= _CHUNKS.c.first_segment,
                    segments.idx < _CHUNKS.c.end_segment,
                ),
            )
        )
        .where(chunk_ids, segments.target.is_(None), segments.error_code.is_(None))
        .order_by(_CHUNKS.c.id, segments.idx),
        finish=update(_CHUNKS)  # type: ignore[arg-type]
        .where(
            pairs_in(dialect, _CHUNKS.c.id, _CHUNKS.c.claim_token, "g_owned"),
            _CHUNKS.c.status == Status.RUNNING.value,
        )
        .values(
            status=Status.SUCCEEDED.value,
            finished_at=db_now(),
            done=_CHUNKS.c.end_segment - _CHUNKS.c.first_segment,
            from_memory=_count_of(Origin.MEMORY.value),
            from_cache=_count_of(Origin.CACHE.value),
            from_mt=_count_of(Origin.MT.value),
            **{name: _count_of(None, counted) for name, counted in _SCORE_COUNTS.items()},
        )
        .returning(_CHUNKS.c.id),
        job_counts=_JOB_COUNTS_MANY.where(job_ids),
        succeed=update(_JOBS)  # type: ignore[arg-type]
        .where(job_ids, _JOBS.c.status.in_(ACTIVE))
        .values(
            status=Status.SUCCEEDED,
            finished_at=db_now(),
            segments_done=_JOBS.c.segments_total,
            **on_final(),
        )
        .returning(_JOBS.c.id),
    )


def _outcome(session: Session, f: Finish, won: bool, succeeded: set[str]) -> ChunkOutcome:
    """One chunk's outcome in the group, as finish_chunk decides it."""
    claim = f.claim
    if won and claim.chunks_total == 1:
        return (
            ChunkOutcome.JOB_SUCCEEDED
            if claim.job_id in succeeded
            else ChunkOutcome.CHUNK_SUCCEEDED
        )
    if not won and not _ended_under(session, claim, Status.SUCCEEDED):
        return ChunkOutcome.LOST
    session.execute(_JOB_COUNTS_MANY.where(_JOBS.c.id == claim.job_id))
    ended = endings.end_if_done(session, claim.job_id)
    # a re-run after a lost answer: the first run may have ended the job already
    status = None if won else job_status(session, claim.job_id)
    if Status.SUCCEEDED in (ended, status):
        return ChunkOutcome.JOB_SUCCEEDED
    return ChunkOutcome.CHUNK_SUCCEEDED
