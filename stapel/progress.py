"""A job's progress by document, with its rate and time left measured on the DB clock.

A document's progress (segments ended: a target, or an error of their own) comes from
its chunks' counts, reading segment rows only where a chunk is part done across a
document boundary; the rate is the job's segments ended since it started, divided by
the time since then on the database's clock, so it means the same whichever web
process answers.
"""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import Row, func, literal, select, union_all
from sqlalchemy.orm import Session

from stapel.formats.results import documents_of
from stapel.states import ACTIVE
from stapel.tables import Chunk, Job, Segment, db_now


@dataclass(frozen=True)
class DocumentProgress:
    """One document of a job: its name, format and segments ended of total."""

    index: int
    name: str | None
    format: str
    segments_total: int
    segments_done: int
    segments_failed: int


@dataclass(frozen=True)
class Pace:
    """How fast a job goes: segments per second since it started, and seconds left."""

    elapsed_s: float | None
    rate_per_s: float | None
    remaining_s: float | None


def documents(session: Session, job: Job | Row) -> list[DocumentProgress]:
    """Return the job's documents in order with their progress.

    Built from the chunks' `done` counts (each written with its segments, in the same
    transaction): a chunk inside one document, or finished, or untouched, says how many
    of its segments ended in each document it covers without reading them; only the
    chunks part done across a document boundary have segments counted, in one read.
    """
    docs = documents_of(session, job)
    if not docs:
        session.rollback()
        return []
    chunks = session.execute(
        select(Chunk.first_segment, Chunk.end_segment, Chunk.done)
        .where(Chunk.job_id == job.id)
        .order_by(Chunk.first_segment)
    ).all()
    starts = [d.first_segment for d in docs]
    done = [0] * len(docs)
    partial = []
    for c in chunks:
        if c.end_segment <= c.first_segment or c.done == 0:
            continue
        first, last = _doc_of(starts, c.first_segment), _doc_of(starts, c.end_segment - 1)
        if first == last:
            done[first] += c.done
        elif c.done >= c.end_segment - c.first_segment:
            for k in range(first, last + 1):
                end = starts[k] + docs[k].segment_count
                done[k] += max(min(end, c.end_segment) - max(starts[k], c.first_segment), 0)
        else:
            partial.append((c.first_segment, c.end_segment, first, last, c.done))
    ends = [start + d.segment_count for start, d in zip(starts, docs, strict=True)]
    for k, n in _ended_by_document(session, job.id, starts, ends, partial):
        done[k] += n
    failed = _failed_by_document(session, job, starts)
    session.rollback()
    return [
        DocumentProgress(d.idx, d.name, d.format or "txt", d.segment_count, n, failed.get(k, 0))
        for k, (d, n) in enumerate(zip(docs, done, strict=True))
    ]


def _doc_of(starts: list[int], idx: int) -> int:
    """The position of the document holding segment idx (empty documents hold none)."""
    return bisect.bisect_right(starts, idx) - 1


def _ended_by_document(
    session: Session, job_id: str, starts: list[int], ends: list[int], partial: list
) -> list[tuple[int, int]]:
    """Ended segments by document within part-done chunks across boundaries, in one read.

    Each chunk's overlap with each of its documents but the last is counted over its
    primary-key range (one UNION ALL, a range scan each); the last is the chunk's `done`
    less those.
    """
    pairs = [(c, k) for c in partial for k in range(c[2], c[3])]
    if not partial:
        return []
    counts = [
        select(literal(n).label("n"), func.count())
        .select_from(Segment)
        .where(
            Segment.job_id == job_id,
            Segment.idx >= max(starts[k], lo),
            Segment.idx < min(ends[k], hi),
            Segment.target.is_not(None) | Segment.error_code.is_not(None),
        )
        for n, ((lo, hi, _, _, _), k) in enumerate(pairs)
    ]
    found = dict(session.execute(union_all(*counts)).all())
    out: list[tuple[int, int]] = []
    n = 0
    for _lo, _hi, first, last, done in partial:  # pairs are in this order
        counted = 0
        for k in range(first, last):
            got = int(found.get(n, 0))
            out.append((k, got))
            counted, n = counted + got, n + 1
        out.append((last, done - counted))
    return out


def _failed_by_document(session: Session, job: Job | Row, starts: list[int]) -> dict[int, int]:
    """Segments failed alone, by document position; no read when the job has none."""
    if not job.segments_failed:
        return {}
    out: dict[int, int] = {}
    for idx in session.scalars(
        select(Segment.idx).where(Segment.job_id == job.id, Segment.error_code.is_not(None))
    ):
        d = bisect.bisect_right(starts, idx) - 1
        out[d] = out.get(d, 0) + 1
    return out


def pace(session: Session, job: Job | Row) -> Pace:
    """Return the job's rate since it started and, while it is active, the time left."""
    if job.started_at is None:
        return Pace(None, None, None)
    end: datetime = job.finished_at or session.scalar(select(db_now()))
    session.rollback()
    elapsed = max((end - job.started_at).total_seconds(), 0.0)
    done = job.segments_done or 0
    rate = done / elapsed if elapsed > 0 and done else None
    remaining = None
    if job.status in ACTIVE and rate:
        remaining = max(job.segments_total - done, 0) / rate
    return Pace(round(elapsed, 3), _round(rate), _round(remaining))


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def as_json(job: Job | Row, docs: list[DocumentProgress], speed: Pace) -> dict:
    """Return the progress document of GET /v1/jobs/<id>/documents."""
    return {
        "id": job.id,
        "status": job.status,
        "segments_total": job.segments_total,
        "segments_done": job.segments_done,
        "pace": asdict(speed),
        "documents": [asdict(d) for d in docs],
    }
