"""Job logic as plain functions over a session: create, read, cancel, claim, progress, finish.

Every state change is a compare-and-set (`UPDATE ... WHERE status = ...`) whose row count
says whether this caller won, so a task delivered twice or a watchdog run twice at once
never changes a job twice. Work is done in chunks: a job has one chunk per
`chunk_segments` segments and each chunk is one Celery task.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from stapel.callbacks import on_final
from stapel.db import affected
from stapel.exceptions import Conflict, NotFound
from stapel.states import ACTIVE, Status
from stapel.tables import Chunk, Document, Job, Segment, new_id, utcnow

log = logging.getLogger(__name__)

INSERT_BATCH = 5000
"""Segments inserted per statement when a job is created."""


@dataclass
class DocumentSpec:
    """One document of a job request: an optional client id and its segments."""

    name: str | None
    segments: list[str]


@dataclass
class JobSpec:
    """A validated job request."""

    source_lang: str
    target_lang: str
    documents: list[DocumentSpec]
    priority: int = 5
    callback_url: str | None = None
    metadata: dict | None = None
    idempotency_key: str | None = None
    api: str | None = None
    """The compat dialect that made the job (None for /v1); see Job.api."""

    @property
    def segments_total(self) -> int:
        return sum(len(d.segments) for d in self.documents)


def route_pool(segments_total: int, gpu_threshold: int) -> str:
    """Return the pool for a job: small jobs go to `cpu`, large ones to `gpu`."""
    return "gpu" if segments_total >= gpu_threshold else "cpu"


def chunk_bounds(total: int, size: int) -> list[tuple[int, int]]:
    """Cut segment indexes [0, total) into [start, end) ranges of at most size."""
    if total == 0:
        return [(0, 0)]
    return [(start, min(start + size, total)) for start in range(0, total, size)]


def create_job(
    session: Session,
    tenant_id: str,
    spec: JobSpec,
    *,
    gpu_threshold: int,
    chunk_segments: int,
    dispatch_priority: int | None = None,
) -> tuple[Job, bool]:
    """Store a job with its documents, segments and chunks; return (job, created).

    When another request stored a job under the same Idempotency-Key first (the unique
    constraint says so), return that job instead.
    """
    total = spec.segments_total
    bounds = chunk_bounds(total, chunk_segments)
    job = Job(
        id=new_id(),
        tenant_id=tenant_id,
        status=Status.QUEUED,
        pool=route_pool(total, gpu_threshold),
        source_lang=spec.source_lang,
        target_lang=spec.target_lang,
        priority=spec.priority,
        dispatch_priority=spec.priority if dispatch_priority is None else dispatch_priority,
        callback_url=spec.callback_url,
        meta=spec.metadata,
        idempotency_key=spec.idempotency_key,
        api=spec.api,
        documents_total=len(spec.documents),
        segments_total=total,
        segments_done=0,
        chunks_total=len(bounds),
        attempts=0,
        created_at=utcnow(),
    )
    session.add(job)
    try:
        session.flush()
    except IntegrityError:
        session.rollback()
        existing = by_idempotency_key(session, tenant_id, spec.idempotency_key or "")
        if existing is None:
            raise
        return existing, False
    _insert_documents(session, job.id, spec.documents)
    session.execute(
        insert(Chunk),
        [
            {
                "id": new_id(),
                "job_id": job.id,
                "idx": i,
                "pool": job.pool,
                "first_segment": start,
                "end_segment": end,
                "status": Status.QUEUED,
                "done": 0,
                "attempts": 0,
                "created_at": job.created_at,
            }
            for i, (start, end) in enumerate(bounds)
        ],
    )
    session.commit()
    log.info(
        "job created logid=%s tenant=%s pool=%s segments=%d chunks=%d",
        job.id,
        tenant_id,
        job.pool,
        total,
        len(bounds),
    )
    return job, True


def by_idempotency_key(session: Session, tenant_id: str, key: str) -> Job | None:
    """Return the tenant's job created under this Idempotency-Key, if any."""
    return session.scalar(select(Job).where(Job.tenant_id == tenant_id, Job.idempotency_key == key))


def _insert_documents(session: Session, job_id: str, documents: list[DocumentSpec]) -> None:
    doc_rows, seg_rows, index = [], [], 0
    for d, doc in enumerate(documents):
        doc_rows.append(
            {
                "job_id": job_id,
                "idx": d,
                "name": doc.name,
                "first_segment": index,
                "segment_count": len(doc.segments),
            }
        )
        for text in doc.segments:
            seg_rows.append({"job_id": job_id, "idx": index, "source": text, "target": None})
            index += 1
            if len(seg_rows) >= INSERT_BATCH:
                session.execute(insert(Segment), seg_rows)
                seg_rows = []
    if seg_rows:
        session.execute(insert(Segment), seg_rows)
    session.execute(insert(Document), doc_rows)


def get_job(session: Session, tenant_id: str, job_id: str) -> Job:
    """Return the tenant's job, or raise NotFound (also for another tenant's job)."""
    job = session.scalar(select(Job).where(Job.id == job_id, Job.tenant_id == tenant_id))
    if job is None:
        raise NotFound(f"no job with id {job_id!r}")
    return job


def list_jobs(
    session: Session,
    tenant_id: str,
    *,
    status: str | None = None,
    limit: int = 20,
    before: tuple[datetime, str] | None = None,
) -> list[Job]:
    """Return the tenant's jobs, newest first, starting after the cursor `before`."""
    query = select(Job).where(Job.tenant_id == tenant_id)
    if status:
        query = query.where(Job.status == status)
    if before is not None:
        created, job_id = before
        query = query.where(
            (Job.created_at < created) | ((Job.created_at == created) & (Job.id < job_id))
        )
    query = query.order_by(Job.created_at.desc(), Job.id.desc()).limit(limit)
    return list(session.scalars(query))


def cancel_job(session: Session, tenant_id: str, job_id: str) -> Job:
    """Cancel a queued or running job; its running chunks stop at their next heartbeat."""
    job = get_job(session, tenant_id, job_id)
    now = utcnow()
    won = affected(
        session,
        update(Job)
        .where(Job.id == job.id, Job.status.in_(ACTIVE))
        .values(status=Status.CANCELLED, finished_at=now, **on_final(now)),
    )
    if won != 1:
        session.rollback()
        session.refresh(job)
        raise Conflict(f"job {job.id} is already {job.status}", code="job_finished")
    _stop_chunks(session, job.id, Status.CANCELLED)
    session.commit()
    session.refresh(job)
    log.info("job cancelled logid=%s", job.id)
    return job


def _stop_chunks(session: Session, job_id: str, status: str) -> None:
    session.execute(
        update(Chunk)
        .where(Chunk.job_id == job_id, Chunk.status.in_(ACTIVE))
        .values(status=status, finished_at=utcnow())
    )


def iter_result(
    session: Session, job: Job, page: int = 2000
) -> Iterator[tuple[str | None, Iterator[str | None]]]:
    """Yield (document id, its translated segments) in order, reading the DB page by page.

    Segments not translated yet come as None. Consume each document's iterator before
    asking for the next document. Each page is its own short read (the transaction ends
    before the page is handed on), so a slow or vanished client holds no transaction.
    """
    job_id, total = job.id, job.segments_total
    documents = session.execute(
        select(Document.name, Document.segment_count)
        .where(Document.job_id == job_id)
        .order_by(Document.idx)
    ).all()
    session.rollback()

    def targets() -> Iterator[str | None]:
        for start in range(0, total, page):
            rows = (
                session.execute(
                    select(Segment.target)
                    .where(
                        Segment.job_id == job_id, Segment.idx >= start, Segment.idx < start + page
                    )
                    .order_by(Segment.idx)
                )
                .scalars()
                .all()
            )
            session.rollback()
            yield from rows

    stream = targets()
    for name, count in documents:
        yield name, itertools.islice(stream, count)
