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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import Connection, Engine, Table, bindparam, insert, inspect, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, make_transient_to_detached

from stapel import ledger
from stapel.callbacks import on_final
from stapel.db import affected
from stapel.driver_sql import DriverStatement
from stapel.endings import stop_chunks
from stapel.exceptions import Conflict, NotFound
from stapel.locking import lock_job, retry_conflicts
from stapel.one_row import OneRow
from stapel.scores import BUCKETS, BelowMinScore, needs_review, score_of
from stapel.states import ACTIVE, CallbackStatus, Status
from stapel.tables import (
    Chunk,
    Document,
    DocumentFile,
    Job,
    Segment,
    db_now,
    is_id,
    new_id,
    utcnow,
)

log = logging.getLogger(__name__)

INSERT_BATCH = 5000
"""Segments inserted per statement when a job is created."""

# A new job's rows are written with Core inserts on the tables (no unit of work): the
# ORM's flush and bulk paths cost more than the statements themselves on a small job,
# and a Connection's execution more than the driver's work (stapel.driver_sql).
_INSERT_JOB = insert(cast(Table, Job.__table__))
_INSERT_DOCUMENTS = DriverStatement(insert(cast(Table, Document.__table__)))
_INSERT_SEGMENTS = DriverStatement(insert(cast(Table, Segment.__table__)))
_INSERT_FILE = insert(cast(Table, DocumentFile.__table__))
_INSERT_CHUNKS = DriverStatement(insert(cast(Table, Chunk.__table__)))
_JOB_COLUMNS = [(prop.key, prop.columns[0]) for prop in inspect(Job).column_attrs]
_JOB_DEFAULTS = {
    attr: column.default.arg if column.default is not None and column.default.is_scalar else None
    for attr, column in _JOB_COLUMNS
}
_JOB_MANAGER = inspect(Job).class_manager
# The job's creation time is the database's clock, read back from its insert (RETURNING:
# no separate select); a job answered at submit also starts and ends then, its callback
# due at once. SQLite reads 'now' once per statement, so the columns agree.
_NOW_COLUMNS = {
    False: ("created_at",),
    True: ("created_at", "started_at", "finished_at", "callback_next_at"),
}
_INSERT_JOB_AT_NOW = {
    answered: DriverStatement(
        _INSERT_JOB.values({name: db_now() for name in names}).returning(Job.__table__.c.created_at)
    )
    for answered, names in _NOW_COLUMNS.items()
}


@dataclass
class DocumentSpec:
    """One document of a job request: an optional client id and its segments.

    A document uploaded in its own format (XLIFF, PO, SRT, HTML, DOCX) also carries that
    format, its original bytes and the job's options for it, to be rebuilt translated.
    """

    name: str | None
    segments: list[str]
    format: str = "txt"
    original: bytes | None = None
    options: dict | None = None


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
    split_sentences: bool = True
    """Translate each sentence of a segment on its own (models are trained on sentences)."""
    api: str | None = None
    """The compat dialect that made the job (None for /v1); see Job.api."""
    memories: tuple[str, ...] = ()
    """The tenant's memories whose exact matches win (stapel.memories), in that order."""
    use_cache: bool = True
    """Reuse and add to the MT cache (off: every segment is translated by the model)."""
    min_score: float | None = None
    """A machine translation scoring under this goes to review (stapel.scores); None:
    the deployment's STAPEL_DEFAULT_MIN_SCORE, decided at submit."""
    below_min_score: str = "empty"
    """What such a segment's target is: `empty` or `source` (stapel.scores.BelowMinScore)."""

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


@dataclass(frozen=True)
class Answered:
    """A job's every target, found in the MT cache at submit under one model fingerprint.

    targets[i] is segment i's translation; origins[i] is `cache`, or None for a blank
    segment (it passes through untranslated, as a worker would give it back).
    """

    fingerprint: str
    targets: list[str]
    origins: list[str | None]

    def from_cache(self, start: int = 0, end: int | None = None) -> int:
        """How many of segments [start, end) the cache answered (blank ones it did not)."""
        return sum(origin is not None for origin in self.origins[start:end])

    def score(self, index: int) -> float | None:
        """Segment index's score, carried by its cached target (None for a blank one)."""
        return score_of(self.targets[index]) if self.origins[index] is not None else None

    def score_counts(self, min_score: float | None, start: int, end: int) -> dict[str, int]:
        """Segments [start, end)'s chunk counts: for review, and under each threshold."""
        found = [self.score(i) for i in range(start, end)]
        counts = {"review": sum(needs_review(s, min_score) for s in found)}
        for name, threshold in BUCKETS:
            counts[name] = sum(s is not None and s < threshold for s in found)
        return counts


@dataclass(frozen=True)
class StoredJob:
    """A job as `store_job` left it: whether this call stored it, and its chunks' sends."""

    job: Job
    created: bool
    chunks: list[tuple[str, int]] = field(default_factory=list)
    """(chunk id, segments) of each chunk, in order (empty for a replay)."""
    task_ids: dict[str, str] = field(default_factory=dict)
    """Chunk id -> the task id recorded for its first send."""


def create_job(
    session: Session,
    tenant_id: str,
    spec: JobSpec,
    *,
    gpu_threshold: int,
    chunk_segments: int,
    dispatch_priority: int | None = None,
) -> tuple[Job, bool]:
    """Store a job with its documents, segments and chunks; return (job, created)."""
    stored = store_job(
        session,
        tenant_id,
        spec,
        gpu_threshold=gpu_threshold,
        chunk_segments=chunk_segments,
        dispatch_priority=dispatch_priority,
    )
    return stored.job, stored.created


def store_job(
    session: Session,
    tenant_id: str,
    spec: JobSpec,
    *,
    gpu_threshold: int,
    chunk_segments: int,
    dispatch_priority: int | None = None,
    answered: Answered | None = None,
) -> StoredJob:
    """Store a job with its documents, segments and chunks, each with its task id.

    Each chunk's first send is recorded in the insert (task id and time), so sending it
    afterwards writes nothing (stapel.dispatch.dispatch_stored). When another request
    stored a job under the same Idempotency-Key first (the unique constraint says so),
    return that job instead, not created. An `answered` job is stored as it ends:
    succeeded, its segments translated (from the cache) and its chunks done, nothing to
    send; its callback is due at once.
    """
    total = spec.segments_total
    bounds = chunk_bounds(total, chunk_segments)
    # The inserts run on the driver's cursor of the session's connection (stapel.driver_sql).
    conn = session.connection()
    fields: dict[str, Any] = {
        "id": new_id(),
        "tenant_id": tenant_id,
        "status": Status.QUEUED,
        "pool": route_pool(total, gpu_threshold),
        "source_lang": spec.source_lang,
        "target_lang": spec.target_lang,
        "priority": spec.priority,
        "dispatch_priority": spec.priority if dispatch_priority is None else dispatch_priority,
        "callback_url": spec.callback_url,
        "meta": spec.metadata,
        "idempotency_key": spec.idempotency_key,
        "api": spec.api,
        "documents_total": len(spec.documents),
        "segments_total": total,
        "segments_done": 0,
        "chunks_total": len(bounds),
        "attempts": 0,
        "segments_failed": 0,
        "split_sentences": spec.split_sentences,
        "use_cache": spec.use_cache,
        "memories": list(spec.memories) or None,
        "segments_from_memory": 0,
        "segments_from_cache": 0,
        "segments_from_mt": 0,
        "segments_review": 0,
        "min_score": spec.min_score,
        "below_min_score": spec.below_min_score if spec.min_score is not None else None,
    }
    if answered is not None:
        fields |= {
            "status": Status.SUCCEEDED,
            "segments_done": total,
            "segments_from_cache": answered.from_cache(),
            "segments_review": answered.score_counts(spec.min_score, 0, total)["review"],
            "callback_status": CallbackStatus.PENDING.value if spec.callback_url else None,
            "callback_attempts": 0,
        }
    try:
        # the database's clock: the watchdog compares a chunk's age with its own reading
        job, now = _insert_job(session, conn, fields, answered is not None)
    except IntegrityError:
        session.rollback()
        existing = by_idempotency_key(session, tenant_id, spec.idempotency_key or "")
        if existing is None:
            raise
        return StoredJob(existing, False)
    _insert_documents(conn, job.id, spec, answered)
    chunk_ids = [new_id() for _ in bounds]
    task_ids = {} if answered else {chunk_id: new_id() for chunk_id in chunk_ids}
    _INSERT_CHUNKS.executemany(
        conn,
        [
            {
                "id": chunk_ids[i],
                "task_id": task_ids.get(chunk_ids[i]),
                "sent_at": None if answered else now,
                "job_id": job.id,
                "idx": i,
                "pool": job.pool,
                "first_segment": start,
                "end_segment": end,
                "attempts": 0,
                "created_at": now,
            }
            | _chunk_state(answered, start, end, now, spec.min_score)
            for i, (start, end) in enumerate(bounds)
        ],
    )
    # last before the commit: the tenant's row of the day is locked for the commit only
    ledger.add(conn, tenant_id, ledger.utc_day(utcnow()), segments=total)
    session.commit()
    log.info(
        "job created logid=%s tenant=%s pool=%s segments=%d chunks=%d%s",
        job.id,
        tenant_id,
        job.pool,
        total,
        len(bounds),
        " answered=cache" if answered else "",
    )
    if answered:
        return StoredJob(job, True)
    sizes = [end - start for start, end in bounds]
    return StoredJob(job, True, list(zip(chunk_ids, sizes, strict=True)), task_ids)


def _insert_job(
    session: Session, conn: Connection, fields: dict[str, Any], answered: bool
) -> tuple[Job, datetime]:
    """Insert a new job's row from its fields (Job's attribute names), then attach a Job
    object holding them as the stored row; return it and the row's time.

    Every column not given takes its column's default, on the object as in the row, so
    reading any attribute afterwards costs no query. The row's times are the database's
    clock (`_NOW_COLUMNS`). The object is made as a load makes one (its attributes set
    in its __dict__, no attribute events: a Job(...) with 28 arguments fired one each).
    """
    values = {}
    now_columns = _NOW_COLUMNS[answered]
    for attr, column in _JOB_COLUMNS:
        if column.key in now_columns:
            continue
        if attr not in fields:
            fields[attr] = _JOB_DEFAULTS[attr]
        values[column.key] = fields[attr]
    now = _INSERT_JOB_AT_NOW[answered].execute(conn, values)
    for name in now_columns:
        fields[name] = now
    job = _JOB_MANAGER.new_instance()
    job.__dict__.update(fields)
    make_transient_to_detached(job)
    session.add(job)
    return job, now


def _chunk_state(
    answered: Answered | None, start: int, end: int, now: datetime, min_score: float | None
) -> dict:
    """A new chunk's state columns: queued, or done from the cache for an answered job."""
    if answered is None:
        return {"status": Status.QUEUED, "done": 0}
    return {
        "status": Status.SUCCEEDED,
        "done": end - start,
        "from_cache": answered.from_cache(start, end),
        "finished_at": now,
    } | answered.score_counts(min_score, start, end)


def by_idempotency_key(session: Session, tenant_id: str, key: str) -> Job | None:
    """Return the tenant's job created under this Idempotency-Key, if any."""
    return session.scalar(select(Job).where(Job.tenant_id == tenant_id, Job.idempotency_key == key))


def _answered_row(answered: Answered, spec: JobSpec, index: int, source: str) -> dict:
    """A segment's row of a job answered at submit: its cached target, or, scoring
    under the job's min_score, sent to review as a worker would (stapel.scores)."""
    origin, score = answered.origins[index], answered.score(index)
    review = needs_review(score, spec.min_score)
    target = str(answered.targets[index])
    if review:
        target = "" if spec.below_min_score == BelowMinScore.EMPTY.value else source
    return {"target": target, "origin": origin, "score": score, "review": review} | {
        "fingerprint": answered.fingerprint if origin else None
    }


def _insert_documents(
    conn: Connection, job_id: str, spec: JobSpec, answered: Answered | None
) -> None:
    documents = spec.documents
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
            row = {"job_id": job_id, "idx": index, "source": text, "target": None}
            if answered is not None:
                row |= _answered_row(answered, spec, index, text)
            seg_rows.append(row)
            index += 1
            if len(seg_rows) >= INSERT_BATCH:
                _INSERT_SEGMENTS.executemany(conn, seg_rows)
                seg_rows = []
    _INSERT_SEGMENTS.executemany(conn, seg_rows)
    _INSERT_DOCUMENTS.executemany(conn, doc_rows)
    for d, doc in enumerate(documents):
        if doc.original is not None:  # one at a time: each may be megabytes
            conn.execute(
                _INSERT_FILE,
                {
                    "job_id": job_id,
                    "idx": d,
                    "format": doc.format,
                    "content": doc.original,
                    "options": doc.options,
                },
            )


_TENANT_JOB = select(Job).where(Job.id == bindparam("job"), Job.tenant_id == bindparam("tenant"))


def get_job(session: Session, tenant_id: str, job_id: str) -> Job:
    """Return the tenant's job, or raise NotFound (also for another tenant's job)."""
    job = (
        session.scalar(_TENANT_JOB, {"job": job_id, "tenant": tenant_id}) if is_id(job_id) else None
    )
    if job is None:
        raise NotFound(f"no job with id {job_id!r}")
    return job


# _TENANT_JOB's filter, every column under its Job attribute's name (`metadata` is `meta`).
_TENANT_JOB_ROW = _TENANT_JOB.with_only_columns(
    *(column.label(attr) for attr, column in _JOB_COLUMNS)
)


_JOB_READ = OneRow(_TENANT_JOB_ROW, "JobRow")


def read_job(db: Connection | Engine, tenant_id: str, job_id: str) -> Any:
    """Return the tenant's job as a read-only row with Job's attribute names; NotFound as get_job.

    A Core select: a status read has no use for an ORM object, whose loading was a third
    of the read's CPU, nor for a session around one statement. On a Connection it runs
    in that connection's transaction (a read of the job and then its chunks); on an
    Engine (the web's reader) straight on a pooled connection (stapel.one_row).
    """
    params = {"job": job_id, "tenant": tenant_id}
    if not is_id(job_id):
        raise NotFound(f"no job with id {job_id!r}")
    if isinstance(db, Engine):
        job = _JOB_READ.first(db, params)
    else:
        job = db.execute(_TENANT_JOB_ROW, params).first()
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


@retry_conflicts
def cancel_job(session: Session, tenant_id: str, job_id: str) -> Job:
    """Cancel a queued or running job; its running chunks stop at their next heartbeat.

    One transaction in the lock order (job, then chunks), re-run on a lock conflict, so
    a cancel racing a worker's writes waits its turn instead of failing.
    """
    job = get_job(session, tenant_id, job_id)
    session.commit()  # end the read: the change starts with the job's lock
    lock_job(session, job.id)
    won = affected(
        session,
        update(Job)
        .where(Job.id == job.id, Job.status.in_(ACTIVE))
        .values(status=Status.CANCELLED, finished_at=db_now(), **on_final()),
    )
    if won != 1:
        session.rollback()
        session.refresh(job)
        raise Conflict(f"job {job.id} already ended: {job.status}", code="job_finished")
    stop_chunks(session, job.id, Status.CANCELLED)
    session.commit()
    session.refresh(job)
    log.info("job cancelled logid=%s", job.id)
    return job


def document_starts(session: Session, job_id: str) -> list[int]:
    """Return the first segment index of each of the job's documents, in order."""
    return list(
        session.scalars(
            select(Document.first_segment).where(Document.job_id == job_id).order_by(Document.idx)
        )
    )


def iter_result(
    session: Session,
    job: Job,
    page: int = 2000,
    *,
    sources: bool = False,
) -> Iterator[tuple[str | None, Iterator]]:
    """Yield (document id, its translated segments) in order, reading the DB page by page.

    Segments not translated yet come as None; with sources, each segment comes as
    (source, target). Consume each document's iterator before asking for the next
    document. Each page is its own short read (the transaction ends before the page is
    handed on), so a slow or vanished client holds no transaction.
    """
    job_id, total = job.id, job.segments_total
    documents = session.execute(
        select(Document.name, Document.segment_count)
        .where(Document.job_id == job_id)
        .order_by(Document.idx)
    ).all()
    session.rollback()

    columns = (Segment.source, Segment.target) if sources else (Segment.target,)

    def targets() -> Iterator:
        for start in range(0, total, page):
            rows = session.execute(
                select(*columns)
                .where(Segment.job_id == job_id, Segment.idx >= start, Segment.idx < start + page)
                .order_by(Segment.idx)
            ).all()
            session.rollback()
            yield from (tuple(row) if sources else row[0] for row in rows)

    stream = targets()
    for name, count in documents:
        yield name, itertools.islice(stream, count)


class Provenance(NamedTuple):
    """Where one segment's target came from, and how sure its model was."""

    origin: str | None
    """`memory`, `cache` or `mt` (stapel.states.Origin); None: not translated, or blank."""
    fingerprint: str | None
    """The model fingerprint of a `cache` or `mt` target."""
    score: float | None
    """The model's confidence in [0, 1] (stapel.scores); 1 for a memory's match."""
    review: bool
    """It scored under the job's min_score: its target is empty or the source."""


def iter_provenance(
    session: Session, job_id: str, start: int, end: int, page: int = 2000
) -> Iterator[Provenance]:
    """Yield each segment's Provenance of segments [start, end), page by page."""
    for at in range(start, end, page):
        rows = session.execute(
            select(Segment.origin, Segment.fingerprint, Segment.score, Segment.review)
            .where(Segment.job_id == job_id, Segment.idx >= at, Segment.idx < min(at + page, end))
            .order_by(Segment.idx)
        ).all()
        session.rollback()
        yield from (Provenance(o, fp, score, bool(review)) for o, fp, score, review in rows)
