"""A job's progress by document, with its rate and time left measured on the DB clock.

A document's progress is counted from its rows in `segments` (ended: a target, or an
error of its own), one grouped read over the job's primary-key range; the rate is the
job's segments ended since it started, divided by the time since then on the
database's clock, so it means the same whichever web process answers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import Session

from stapel.states import ACTIVE
from stapel.tables import Document, DocumentFile, Job, Segment, db_now


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


def documents(session: Session, job: Job) -> list[DocumentProgress]:
    """Return the job's documents in order with their progress."""
    ended = case((Segment.target.is_not(None) | Segment.error_code.is_not(None), 1), else_=0)
    failed = case((Segment.error_code.is_not(None), 1), else_=0)
    rows = session.execute(
        select(
            Document.idx,
            Document.name,
            DocumentFile.format,
            Document.segment_count,
            func.coalesce(func.sum(ended), 0),
            func.coalesce(func.sum(failed), 0),
        )
        .outerjoin(
            DocumentFile,
            (DocumentFile.job_id == Document.job_id) & (DocumentFile.idx == Document.idx),
        )
        .outerjoin(
            Segment,
            and_(
                Segment.job_id == Document.job_id,
                Segment.idx >= Document.first_segment,
                Segment.idx < Document.first_segment + Document.segment_count,
            ),
        )
        .where(Document.job_id == job.id)
        .group_by(Document.idx, Document.name, DocumentFile.format, Document.segment_count)
        .order_by(Document.idx)
    ).all()
    session.rollback()
    return [
        DocumentProgress(idx, name, fmt or "txt", count, int(done), int(bad))
        for idx, name, fmt, count, done, bad in rows
    ]


def pace(session: Session, job: Job) -> Pace:
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


def as_json(job: Job, docs: list[DocumentProgress], speed: Pace) -> dict:
    """Return the progress document of GET /v1/jobs/<id>/documents."""
    return {
        "id": job.id,
        "status": job.status,
        "segments_total": job.segments_total,
        "segments_done": job.segments_done,
        "pace": asdict(speed),
        "documents": [asdict(d) for d in docs],
    }
