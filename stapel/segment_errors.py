"""Segments that failed alone: stored once with their error, counted on the job, read back.

A worker's batcher gives up on a segment only when it fails in a batch of its own
(workers/isolation.py); its target stays NULL, its code and message are stored here,
and its job's `segments_failed` counts it. Such a segment is not translated again.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from stapel.chunks import Claim
from stapel.db import affected
from stapel.tables import Job, Segment


def record_failures(session: Session, claim: Claim, failures: list[tuple[int, str, str]]) -> int:
    """Store (index, code, message) of segments that failed alone; return how many were new.

    A segment is marked once (only while it has neither target nor error), and the job's
    `segments_failed` rises by exactly the segments marked, so a retried call or a
    second attempt cannot count one twice. Failed segments are not translated again.
    """
    marked = 0
    for idx, code, message in failures:
        marked += affected(
            session,
            update(Segment)
            .where(
                Segment.job_id == claim.job_id,
                Segment.idx == idx,
                Segment.target.is_(None),
                Segment.error_code.is_(None),
            )
            .values(error_code=code, error=message),
        )
    if marked:
        session.execute(
            update(Job)
            .where(Job.id == claim.job_id)
            .values(segments_failed=Job.segments_failed + marked)
        )
    session.commit()
    return marked


def segment_errors(session: Session, job_id: str) -> dict[int, tuple[str, str | None]]:
    """Return index -> (code, message) of the job's segments that failed alone."""
    rows = session.execute(
        select(Segment.idx, Segment.error_code, Segment.error).where(
            Segment.job_id == job_id, Segment.error_code.is_not(None)
        )
    )
    return {idx: (code or "", message) for idx, code, message in rows}
